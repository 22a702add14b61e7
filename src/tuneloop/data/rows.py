"""Corpus rows: a trace reduced to what training reads, plus the keys the steps use.

Pure functions: trace → `Row` (SFT shape), rated traces → preference pairs.
A row's messages end at the trace's last assistant message (trailing tool results or user
turns after it teach nothing to SFT and are cut, counted by the caller); a trace with no
assistant message gives no row. A trace whose feedback carries a user's `correction` (the
right answer, from a traffic log's feedback) becomes a row that answers with the correction,
scored 1, and keeps the model's own answer as the rejected side of a preference pair.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from tuneloop.data.text import conversation_text, normalized_prompt, prompt_text
from tuneloop.data.trace import Trace


@dataclass
class Row:
    """One candidate SFT row with its keys."""

    messages: list[dict[str, Any]]
    source: str
    source_id: str
    score: float | None
    """Normalized feedback score, None when unrated."""
    prompt_key: str
    """Normalized prompt (user turns)."""
    trimmed: int = 0
    """Messages cut after the last assistant message."""
    band: str | None = None
    pass_rate: float | None = None
    replaced: dict[str, Any] | None = None
    """The model's own final message, when a user's correction replaced it."""

    @property
    def text(self) -> str:
        return conversation_text(self.messages)

    @property
    def prompt(self) -> str:
        return prompt_text(self.messages)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "messages": self.messages,
            "source": self.source,
            "source_id": self.source_id,
        }
        if self.band is not None:
            out["band"] = self.band
            out["pass_rate"] = self.pass_rate
        return out


def to_row(trace: Trace) -> Row | None:
    """The SFT row of a trace, or None when it has no assistant message."""
    last = max((i for i, m in enumerate(trace.messages) if m.role == "assistant"), default=-1)
    if last < 0:
        return None
    messages = [m.to_chat() for m in trace.messages[: last + 1]]
    feedback = trace.feedback
    score = feedback.score if feedback else None
    replaced = None
    if feedback is not None and feedback.correction is not None:
        replaced = messages[-1]
        messages[-1] = {"role": "assistant", "content": feedback.correction}
        score = 1.0  # the answer the row teaches is the one the user said is right
    return Row(
        messages=messages,
        source=trace.source,
        source_id=trace.source_id,
        score=score,
        prompt_key=normalized_prompt(messages),
        trimmed=len(trace.messages) - last - 1,
        replaced=replaced,
    )


def preference_pairs(rows: list[Row], min_margin: float = 0.5) -> list[dict[str, Any]]:
    """One (chosen, rejected) pair per (source, prompt) whose rated answers differ by ≥ margin.

    Chosen is the first highest-scored answer, rejected the first lowest-scored one; both
    must end in different final assistant messages. Output follows TRL's conversational
    preference format: `prompt` (messages before the answer), `chosen`, `rejected` (one
    assistant message each).
    """
    groups: dict[tuple[str, str], list[Row]] = defaultdict(list)
    pairs = []
    for row in rows:
        if row.replaced is not None and row.replaced != row.messages[-1]:
            pairs.append(
                {
                    "prompt": row.messages[:-1],
                    "chosen": [row.messages[-1]],
                    "rejected": [row.replaced],
                    "source": row.source,
                    "source_id": f"{row.source_id}|correction",
                }
            )
        elif row.score is not None:
            groups[(row.source, row.prompt_key)].append(row)
    for group in groups.values():
        best = max(group, key=lambda r: r.score or 0.0)
        worst = min(group, key=lambda r: r.score or 0.0)
        if (best.score or 0.0) - (worst.score or 0.0) < min_margin - 1e-12:
            continue
        if best.messages[-1] == worst.messages[-1]:
            continue
        pairs.append(
            {
                "prompt": best.messages[:-1],
                "chosen": [best.messages[-1]],
                "rejected": [worst.messages[-1]],
                "source": best.source,
                "source_id": f"{best.source_id}|{worst.source_id}",
            }
        )
    return pairs
