"""The flips of a delta report as rows a person reads: item, prompt, both answers, scores.

An item *flips* when it is right in one arm and wrong in the other, "right" meaning an item
score (the mean of its samples; missing and errors count 0) ≥ the delta report's threshold —
the same rule and the same score grid (`samplelog.score_grid`) that counted the report's flips,
so the number of rows here equals `DeltaReport.flips`; report.html says so when it does not.
Prompts come from the suite file the logs name, only when its revision is the logs' revision.
Completions are model output: they are kept as plain text here and escaped where rendered.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from tuneloop.errors import InputError
from tuneloop.samplelog import SampleRow, load_sample_log, score_grid
from tuneloop.suite import Suite, item_prompt_text, load_suite

MAX_CHARS = 2000
"""Longest completion, prompt or trajectory shown in a row; the rest is cut with a note."""


@dataclass(frozen=True)
class ArmAnswer:
    """What one arm answered for one item."""

    score: float
    """The item score (mean over samples)."""
    text: str
    """The first sample's completion (or trajectory), cut at MAX_CHARS."""
    finish: str
    """Finish reasons over the samples, e.g. `stop` or `stop×3, length×1`."""
    samples: int
    """Samples of this item in the log."""


@dataclass(frozen=True)
class FlipRow:
    """One flipped item."""

    item_id: str
    direction: str
    """`fixed` (wrong → right) or `broken` (right → wrong)."""
    tags: tuple[str, ...]
    prompt: str
    reference: str
    pre: ArmAnswer
    post: ArmAnswer


@dataclass(frozen=True)
class Flips:
    """Every flipped item of a comparison, fixed first."""

    rows: list[FlipRow]
    threshold: float
    note: str | None = None
    """Why prompts are not shown, when they are not."""


def cut(text: str, limit: int = MAX_CHARS) -> str:
    """`text`, cut at `limit` characters with a note saying how many more there were."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text) - limit} more characters not shown]"


def _trajectory(row: SampleRow) -> str:
    """An agent sample as text: each turn, its tool calls and their results."""
    assert row.agent is not None
    lines = []
    for m in row.agent.messages:
        role = str(m.get("role", "?"))
        content = m.get("content")
        text = content if isinstance(content, str) else ""
        calls = m.get("tool_calls") or []
        names = [
            str((c.get("function") or {}).get("name", "?")) for c in calls if isinstance(c, dict)
        ]
        lines.append(f"[{role}] {text}" + (f" → calls {', '.join(names)}" if names else ""))
    lines.append(f"[stop: {row.agent.stop}, {row.agent.turns} turns]")
    return "\n".join(lines)


def _answer(rows: list[SampleRow], score: float) -> ArmAnswer:
    rows = sorted(rows, key=lambda r: r.sample_index)
    first = next((r for r in rows if r.status == "ok"), rows[0] if rows else None)
    if first is None:
        text = "(no sample in the log)"
    elif first.agent is not None:
        text = _trajectory(first)
    elif first.completion is None:
        text = f"({first.status}: {first.error or 'no completion'})"
    else:
        text = first.completion
    reasons = Counter(r.finish_reason or ("—" if r.status != "ok" else "unknown") for r in rows)
    finish = ", ".join(k if n == 1 else f"{k}×{n}" for k, n in sorted(reasons.items()))
    return ArmAnswer(score=score, text=cut(text), finish=finish, samples=len(rows))


class CurrentSuite(NamedTuple):
    """The suite the logs were evaluated on, when it is here unchanged; else why not."""

    suite: Suite | None
    """The suite; None when it is not here or has changed since the evaluation."""
    note: str | None
    """Why it is None (e.g. "the suite `suite.jsonl` named by the logs is not here")."""


def current_suite(path: str, revision: str) -> CurrentSuite:
    """The suite at `path` (as the logs name it), only when its revision is `revision`."""
    p = Path(path)
    if not p.is_file():
        return CurrentSuite(None, f"the suite `{path}` named by the logs is not here")
    try:
        suite = load_suite(p)
    except InputError as err:
        return CurrentSuite(None, str(err))
    if suite.revision != revision:
        return CurrentSuite(None, f"`{path}` has changed since the evaluation (revision)")
    return CurrentSuite(suite, None)


def reference_text(raw: dict) -> str:
    """An item's reference as text (its `answer`, `target` or `reference`, a non-string one
    as JSON; else empty)."""
    for key in ("answer", "target", "reference"):
        if key in raw:
            value = raw[key]
            return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return ""


def read_flips(
    pre_log: Path,
    post_log: Path,
    item_ids: Sequence[str] | None,
    threshold: float,
    scorer: str | None = None,
) -> Flips:
    """The flipped items of two sample logs on `item_ids` (None: every item of the logs)."""
    pre_summary, pre_rows = load_sample_log(pre_log, scorer)
    _, post_rows = load_sample_log(post_log, scorer)
    wanted = set(item_ids) if item_ids is not None else None
    ids = [i for i in pre_summary.item_ids if wanted is None or i in wanted]
    n = pre_summary.sampling.n_samples
    pre_scores = score_grid(pre_rows, ids, n, str(pre_log)).values.mean(axis=1)
    post_scores = score_grid(post_rows, ids, n, str(post_log)).values.mean(axis=1)
    by_item: dict[tuple[str, str], list[SampleRow]] = {}
    for arm, rows in (("pre", pre_rows), ("post", post_rows)):
        for r in rows:
            by_item.setdefault((arm, r.item_id), []).append(r)
    suite, why = current_suite(pre_summary.suite_path, pre_summary.suite_revision)
    note = f"prompts not shown: {why}" if why is not None else None
    items = suite.by_id() if suite is not None else {}
    out = []
    for i, item_id in enumerate(ids):
        a, b = float(pre_scores[i]), float(post_scores[i])
        if (a >= threshold) == (b >= threshold):
            continue
        pre = by_item.get(("pre", item_id), [])
        item = items.get(item_id)
        out.append(
            FlipRow(
                item_id=item_id,
                direction="fixed" if b >= threshold else "broken",
                tags=tuple(pre[0].tags) if pre else (),
                prompt=cut(item_prompt_text(item)) if item is not None else "",
                reference=reference_text(item.raw) if item is not None else "",
                pre=_answer(pre, a),
                post=_answer(by_item.get(("post", item_id), []), b),
            )
        )
    out.sort(key=lambda r: r.direction != "fixed")
    return Flips(rows=out, threshold=threshold, note=note)
