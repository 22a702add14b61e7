"""Training rows: a trace reduced to what training reads, plus the keys the steps use.

Pure functions: trace → `Row` (SFT shape; `to_row`, or `row_or_id` naming a trace that gives
none), rated traces → preference pairs, rows with a reference → GRPO prompt rows.
A row's messages end at the trace's last assistant message (trailing tool results or user
turns after it teach nothing to SFT and are cut, counted by the caller); a trace with no
assistant message gives no row. A trace whose feedback carries a user's `correction` (the
right answer, from a traffic log's feedback) becomes a row that answers with the correction,
scored 1, and keeps the model's own answer as the rejected side of a preference pair.

A row keeps the verifiable answer its trace carries (`RowReference`): a logged reference
(origin `reference`), else a user's correction (`correction`); the corpus config may also
accept a thumbs-up answer as one (`accepted`, `with_accepted_answer`). `prompt_row` turns a
row with a reference into a GRPO prompt row (the suite item shape: `messages`, `answer`,
`scorer`, `scorer_args`), which `tuneloop.train.data.grpo_rows` reads.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace
from typing import Any, Literal

from tuneloop.data.text import conversation_text, normalized_prompt, prompt_text
from tuneloop.records.trace import Trace

Origin = Literal["reference", "correction", "accepted"]


@dataclass(frozen=True)
class RowReference:
    """The verifiable answer of a row, with the scorer that checks it."""

    answer: str
    origin: Origin
    """`reference` (logged with the trace), `correction` (a user's), `accepted` (a thumbs-up
    answer taken as right)."""
    scorer: str | None = None
    """None: the corpus config's `grpo.scorer`, else the trainer's default."""
    scorer_args: tuple[tuple[str, Any], ...] = ()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"answer": self.answer, "origin": self.origin}
        if self.scorer is not None:
            out["scorer"] = self.scorer
        if self.scorer_args:
            out["scorer_args"] = dict(self.scorer_args)
        return out


@dataclass(frozen=True)
class RowJudgement:
    """The LLM judge's grade of an unlabelled row's answer, with the judge that gave it
    (`judge_cut.py`); written into the row as `judge`."""

    grade: float
    model: str
    """The judge's model id."""
    rubric_sha256: str
    """sha256 of the rubric it graded by."""

    def to_json(self) -> dict[str, Any]:
        return {"grade": self.grade, "model": self.model, "rubric_sha256": self.rubric_sha256}


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
    reference: RowReference | None = None
    """The verifiable answer the trace carries (see module docstring)."""
    judged: RowJudgement | None = None
    """The judge's grade, when the judge cut kept this unlabelled row."""

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
        if self.reference is not None:
            out["reference"] = self.reference.to_json()
        if self.band is not None:
            out["band"] = self.band
            out["pass_rate"] = self.pass_rate
        if self.judged is not None:
            out["judge"] = self.judged.to_json()
        return out


def to_row(trace: Trace) -> Row | None:
    """The SFT row of a trace, or None when it has no assistant message."""
    last = max((i for i, m in enumerate(trace.messages) if m.role == "assistant"), default=-1)
    if last < 0:
        return None
    messages = [m.to_chat() for m in trace.messages[: last + 1]]
    feedback = trace.feedback
    score = feedback.score if feedback else None
    replaced = reference = None
    if feedback is not None and feedback.correction is not None:
        replaced = messages[-1]
        messages[-1] = {"role": "assistant", "content": feedback.correction}
        score = 1.0  # the answer the row teaches is the one the user said is right
        reference = RowReference(feedback.correction, "correction")
    if trace.reference is not None:  # a logged reference is the task's own; it wins
        ref = trace.reference
        args = tuple(sorted(ref.scorer_args.items()))
        reference = RowReference(ref.answer, "reference", ref.scorer, args)
    return Row(
        messages=messages,
        source=trace.source,
        source_id=trace.source_id,
        score=score,
        prompt_key=normalized_prompt(messages),
        trimmed=len(trace.messages) - last - 1,
        replaced=replaced,
        reference=reference,
    )


def row_or_id(trace: Trace) -> Row | tuple[str, str]:
    """A trace's row, or its (source, source id) when it has no assistant message."""
    return to_row(trace) or (trace.source, trace.source_id)


def with_accepted_answer(row: Row, min_score: float) -> Row:
    """`row` with its own final answer as an `accepted` reference when its feedback score is
    ≥ `min_score` and it has no reference yet (and the answer is text)."""
    content = row.messages[-1].get("content")
    if row.reference is not None or row.score is None or row.score < min_score:
        return row
    if not isinstance(content, str) or not content.strip():
        return row
    return replace(row, reference=RowReference(content, "accepted"))


def prompt_row(
    row: Row, scorer: str | None = None, scorer_args: dict[str, Any] | None = None
) -> dict[str, Any] | None:
    """The GRPO prompt row of a row with a reference (None without one, or when what comes
    before its answer is no prompt). The row's own scorer wins over the defaults given."""
    ref, prompt = row.reference, row.messages[:-1]
    if ref is None or not prompt or prompt[-1].get("role") == "assistant":
        return None
    out: dict[str, Any] = {"id": row.source_id, "messages": prompt, "answer": ref.answer}
    name = ref.scorer or scorer
    own = ref.scorer is not None or ref.scorer_args
    args = dict(ref.scorer_args) if own else dict(scorer_args or {})
    if name is not None:
        out["scorer"] = name
    if args:
        out["scorer_args"] = args
    out |= {"source": row.source, "origin": ref.origin}
    if row.band is not None:
        out |= {"band": row.band, "pass_rate": row.pass_rate}
    return out


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


ORIGIN_RANK = {"reference": 0, "correction": 1, "accepted": 2}
"""Which reference a prompt keeps when several rows ask it: a logged one, then a user's."""


def grpo_candidates(rows: list[Row], accept_min_score: float | None) -> list[Row]:
    """Copies of the rows that can be GRPO prompts (a reference, and a prompt before the
    answer), accepting rated answers as references when `accept_min_score` is set."""
    out = []
    for row in rows:
        cand = replace(row)  # bands are set per output; never alias an SFT row
        if accept_min_score is not None:
            cand = with_accepted_answer(cand, accept_min_score)
        if prompt_row(cand) is not None:
            out.append(cand)
    return out


def prompt_duplicates(rows: list[Row]) -> dict[int, str]:
    """index → reason for every prompt row whose normalized prompt an earlier or better
    (`ORIGIN_RANK`) row already asks, whatever its source: one reference per prompt."""
    best: dict[str, int] = {}
    for i, row in enumerate(rows):
        j = best.get(row.prompt_key)
        if j is None or _rank(row) < _rank(rows[j]):
            best[row.prompt_key] = i
    keep = set(best.values())
    return {
        i: f"same prompt as {rows[best[r.prompt_key]].source_id}"
        for i, r in enumerate(rows)
        if i not in keep
    }


def _rank(row: Row) -> int:
    return ORIGIN_RANK[row.reference.origin] if row.reference is not None else len(ORIGIN_RANK)
