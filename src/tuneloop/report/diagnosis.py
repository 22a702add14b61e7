"""Regression diagnosis: why each item that got worse, or that the challenger still fails, did.

    d = diagnose(pre, post, item_ids, threshold, current_suite(path, revision))   # pure

`report/build.compare` computes it into delta.json's `diagnosis` (`record.Diagnosis`); delta.md,
the capstone's report.md and report.html show it as "Why items got worse" (`markdown.py`,
`page.py`). Run the tests with `pytest tests/report/test_diagnosis.py`.

Which items: those whose challenger item score is below the champion's (*got worse*), and
those the challenger gets wrong (*still fails*: item score below the delta report's
threshold) — the same rule and the same score grid (`samplelog.score_grid`) as the flips. A
sample *passes* when its score is ≥ 0.5 (the pass@k rule). Each item gets the first cause
that fits, checked in this order:

1. `floor` — no sample of either arm passes: the item is beyond both models, not something
   training broke. Checked first, so an item neither model ever solved never reads as drift.
2. `infra` — a challenger sample has no score from a completion: `missing` (no completion
   after every retry, or absent from the log) or `harness_error` (the scorer failed).
3. `length` — a failing challenger sample (scored, below 0.5) stopped at max_tokens
   (finish_reason `length`).
4. `format` — a failing challenger answer holds the reference value by a lenient re-reading
   (`report/lenient.py`): the scorer rejected its shape, not its value. Needs the suite (for
   the reference and `scorer_args`), read only when its revision is the logs'; without it, or
   for a scorer with no lenient reading (tool calls, tests, agents, judges), the answer is
   counted "format not checked" and the item falls through.
5. `drift` — none of these: complete, scored, wrong answers; the model's answers moved.

Deliberately one cause per item, so the counts add up to the items diagnosed; the lenient
re-score (how often the scorer itself is the problem) is counted over every failing challenger
answer of the diagnosed items, whatever cause their item got. Completions are untrusted model
output: kept as plain text, cut at EXCERPT_CHARS, escaped where rendered.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tuneloop.report.delta import CORRECT_THRESHOLD, Log
from tuneloop.report.flips import CurrentSuite, cut, reference_text
from tuneloop.report.lenient import lenient_pass
from tuneloop.report.record import (
    CAUSES,
    Cause,
    CauseCount,
    DiagnosedItem,
    Diagnosis,
    DiagnosisExample,
    LenientRescore,
    TagCauses,
)
from tuneloop.samplelog import SampleRow, score_grid
from tuneloop.suite import SuiteItem, item_prompt_text

EXCERPT_CHARS = 300
"""Longest prompt, reference or answer kept in an example; the rest is cut with a note."""
EXAMPLES = 3
"""Examples kept per cause."""

MEANING: dict[Cause, str] = {
    "floor": "no sample of either model passed",
    "infra": "a challenger sample is missing after retries, or its scorer failed",
    "length": "a failing challenger answer stopped at max_tokens",
    "format": "a failing challenger answer holds the reference value; the scorer rejected it",
    "drift": "complete, scored, wrong answers: the model's answers moved",
}
"""What each cause means, in a few words (both pages' tables)."""


@dataclass(frozen=True)
class Tally:
    """What one item's challenger samples were, counted."""

    checked: int = 0
    """Failing answers re-read leniently."""
    holds: int = 0
    """Of them, answers that hold the reference."""
    unchecked: int = 0
    """Failing answers with no lenient reading."""
    missing: int = 0
    """Samples missing (after retries, or absent from the log)."""
    errors: int = 0
    """Samples whose scorer failed (harness errors)."""
    truncated: int = 0
    """Failing samples that stopped at max_tokens."""


@dataclass(frozen=True)
class Finding:
    """One item's cause, with the figures behind it and the answer that shows it."""

    cause: Cause
    reason: str
    shown: SampleRow | None
    """The challenger sample shown as the example's answer (None: no sample in the log)."""
    tally: Tally


def _see(found: Sequence[tuple[DiagnosedItem, Finding]]) -> str:
    """`see `a`, `b`, `c` and 4 more`: the first items of a cause, by id."""
    ids = ", ".join(f"`{e.item_id}`" for e, _ in found[:EXAMPLES])
    more = len(found) - EXAMPLES
    return f"see {ids}" + (f" and {more} more" if more > 0 else "")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _passes(rows: Sequence[SampleRow]) -> int:
    return sum(r.value >= CORRECT_THRESHOLD for r in rows)


def _lenient(failing: Sequence[SampleRow], item: SuiteItem | None) -> list[bool | None]:
    """Each failing answer re-read leniently (None: not checked). An agent's answer is its
    trajectory's, which no lenient reading covers."""
    if item is None:
        return [None] * len(failing)
    return [
        None
        if r.agent is not None
        else lenient_pass(r.scorer or item.scorer, item.raw, r.completion or "")
        for r in failing
    ]


def _infra_reason(lost: Sequence[SampleRow], t: Tally, n: int) -> str:
    parts = [f"{t.missing} of {n} samples missing after retries"] if t.missing else []
    if t.errors:
        parts.append(f"{t.errors} of {n} samples with a harness error")
    last = next((r.error for r in reversed(lost) if r.error), None)
    return ", ".join(parts) + (f": {cut(last, 120)}" if last else "")


def _tally(post: Sequence[SampleRow], read: Sequence[bool | None], n_samples: int) -> Tally:
    status = Counter(r.status for r in post)
    failing = [r for r in post if r.status == "ok" and r.value < CORRECT_THRESHOLD]
    return Tally(
        checked=sum(x is not None for x in read),
        holds=sum(x is True for x in read),
        unchecked=sum(x is None for x in read),
        missing=status["missing"] + max(0, n_samples - len(post)),
        errors=status["harness_error"],
        truncated=sum(r.finish_reason == "length" for r in failing),
    )


def classify(
    pre: Sequence[SampleRow],
    post: Sequence[SampleRow],
    n_samples: int,
    max_tokens: int,
    item: SuiteItem | None,
) -> Finding:
    """The first cause that fits one item (module docstring), from both arms' samples of it."""
    post = sorted(post, key=lambda r: r.sample_index)
    failing = [r for r in post if r.status == "ok" and r.value < CORRECT_THRESHOLD]
    read = _lenient(failing, item)
    t = _tally(post, read, n_samples)
    n, first = n_samples, post[0] if post else None
    a, b = _passes(pre), _passes(post)
    if a == 0 and b == 0:
        return Finding("floor", f"no sample of either model passed (0 of {n} each)", first, t)
    lost = [r for r in post if r.status != "ok"]
    if t.missing or t.errors:
        return Finding("infra", _infra_reason(lost, t, n), lost[0] if lost else first, t)
    truncated = [r for r in failing if r.finish_reason == "length"]
    if truncated:
        why = f"{len(truncated)} of {n} samples hit max_tokens {max_tokens}"
        return Finding("length", why, truncated[0], t)
    holding = [r for r, ok in zip(failing, read, strict=True) if ok]
    if holding and item is not None:
        ref = cut(reference_text(item.raw), 40)
        why = (
            f"{len(holding)} of {len(failing)} failing answers hold the reference `{ref}` "
            f"(scorer `{holding[0].scorer or item.scorer}` rejected them)"
        )
        return Finding("format", why, holding[0], t)
    why = f"champion {a} of {n} samples pass, challenger {b} of {n}"
    if t.unchecked:
        why += f"; format not checked ({_unchecked_why(failing, item)})"
    return Finding("drift", why, failing[0] if failing else first, t)


def _unchecked_why(failing: Sequence[SampleRow], item: SuiteItem | None) -> str:
    if item is None:
        return "the suite is not available"
    if any(r.agent is not None for r in failing):
        return "an agent's answer"
    return f"scorer `{failing[0].scorer or item.scorer}` has no lenient reading of this item"


def _answer_text(row: SampleRow | None) -> str:
    if row is None:
        return "(no sample in the log)"
    if row.status != "ok" or row.completion is None:
        return f"({row.status}: {row.error or 'no completion'})"
    return row.completion


def _example(entry: DiagnosedItem, finding: Finding, item: SuiteItem | None) -> DiagnosisExample:
    return DiagnosisExample(
        item_id=entry.item_id,
        prompt=cut(item_prompt_text(item), EXCERPT_CHARS) if item is not None else "",
        reference=cut(reference_text(item.raw), EXCERPT_CHARS) if item is not None else "",
        answer=cut(_answer_text(finding.shown), EXCERPT_CHARS),
        reason=entry.reason,
    )


def _by_item(rows: Sequence[SampleRow], keep: set[str]) -> dict[str, list[SampleRow]]:
    out: dict[str, list[SampleRow]] = {}
    for r in rows:
        if r.item_id in keep:
            out.setdefault(r.item_id, []).append(r)
    return out


def diagnose(
    pre: Log,
    post: Log,
    item_ids: Sequence[str],
    threshold: float,
    suite: CurrentSuite,
) -> Diagnosis:
    """The diagnosis of the challenger (`post`) against the champion (`pre`) on `item_ids`;
    `threshold` is the delta report's (`flips.threshold`). Pure: the suite is read by the
    caller (`flips.current_suite`)."""
    summary, n = pre[0], pre[0].sampling.n_samples
    pre_scores = score_grid(pre[1], item_ids, n, "pre").values.mean(axis=1)
    post_scores = score_grid(post[1], item_ids, n, "post").values.mean(axis=1)
    keep = set(item_ids)
    pre_rows, post_rows = _by_item(pre[1], keep), _by_item(post[1], keep)
    items = suite.suite.by_id() if suite.suite is not None else {}
    found: list[tuple[DiagnosedItem, Finding]] = []
    for i, item_id in enumerate(item_ids):
        a, b = float(pre_scores[i]), float(post_scores[i])
        if not (b < a or b < threshold):
            continue
        mine, theirs = pre_rows.get(item_id, []), post_rows.get(item_id, [])
        finding = classify(mine, theirs, n, summary.sampling.max_tokens, items.get(item_id))
        tags = sorted({t for r in (*mine, *theirs) for t in r.tags})
        entry = DiagnosedItem(
            item_id=item_id,
            tags=tags,
            cause=finding.cause,
            worse=b < a,
            pre_score=a,
            post_score=b,
            reason=finding.reason,
        )
        found.append((entry, finding))
    rescore = _rescore(found, suite.note)
    return Diagnosis(
        threshold=threshold,
        sample_threshold=CORRECT_THRESHOLD,
        max_tokens=summary.sampling.max_tokens,
        n_items=len(item_ids),
        worse=sum(e.worse for e, _ in found),
        still_failing=sum(e.post_score < threshold for e, _ in found),
        causes=[_cause(c, found, items, rescore, summary.sampling.max_tokens) for c in CAUSES],
        per_tag=_per_tag([e for e, _ in found]),
        rescore=rescore,
        items=[e for e, _ in found],
    )


def _rescore(found: Sequence[tuple[DiagnosedItem, Finding]], note: str | None) -> LenientRescore:
    return LenientRescore(
        checked=sum(f.tally.checked for _, f in found),
        holds_reference=sum(f.tally.holds for _, f in found),
        not_checked=sum(f.tally.unchecked for _, f in found),
        not_checked_items=sum(e.cause == "drift" and f.tally.unchecked > 0 for e, f in found),
        note=None if note is None else f"format not judged: {note}",
    )


def _cause(
    cause: Cause,
    found: Sequence[tuple[DiagnosedItem, Finding]],
    items: Mapping[str, SuiteItem],
    rescore: LenientRescore,
    max_tokens: int,
) -> CauseCount:
    mine = [(e, f) for e, f in found if e.cause == cause]
    return CauseCount(
        cause=cause,
        items=len(mine),
        worse=sum(e.worse for e, _ in mine),
        suggestion=suggestion(cause, mine, rescore, max_tokens) if mine else "",
        examples=[_example(e, f, items.get(e.item_id)) for e, f in mine[:EXAMPLES]],
    )


def _per_tag(entries: Sequence[DiagnosedItem]) -> list[TagCauses]:
    out = []
    for tag in sorted({t for e in entries for t in e.tags}):
        counts = Counter(e.cause for e in entries if tag in e.tags)
        out.append(TagCauses(tag=tag, counts={c: counts.get(c, 0) for c in CAUSES}))
    return out


def suggestion(
    cause: Cause,
    found: Sequence[tuple[DiagnosedItem, Finding]],
    rescore: LenientRescore,
    max_tokens: int,
) -> str:
    """One line for `cause`, with its figures and what to do; `found` are its items."""
    k = _plural(len(found), "item")
    if cause == "floor":
        held = sum(f.tally.holds > 0 for _, f in found)
        also = (
            f"; {held} of them hold the reference in a shape the scorer rejects: check the "
            "scorer and `scorer_args`"
            if held
            else ""
        )
        return (
            f"{k} never solved by any sample of either model: beyond both models rather than "
            f"broken by training; check the references, or leave them to a stronger teacher{also}"
        )
    if cause == "infra":
        missing, errors = (
            sum(f.tally.missing for _, f in found),
            sum(f.tally.errors for _, f in found),
        )
        return (
            f"{k} lost challenger samples to the harness ({missing} missing after retries, "
            f"{errors} harness errors): not a model outcome; fix the endpoint or the scorer "
            "and re-run the eval before reading these as regressions"
        )
    if cause == "length":
        cut_off = sum(f.tally.truncated for _, f in found)
        return (
            f"{_plural(cut_off, 'answer')} on {k} stopped at max_tokens {max_tokens}: raise "
            f"`eval.max_tokens`, or train towards shorter answers; {_see(found)}"
        )
    if cause == "format":
        held = sum(f.tally.holds for _, f in found)
        return (
            f"{_plural(held, 'answer')} on {k} contained the reference value but failed the "
            f"scorer's format: {_see(found)}, or loosen `scorer_args` (or the scorer's answer "
            "extraction)"
        )
    worse = sum(e.worse for e, _ in found)
    why = "the suite is not available" if rescore.note else "no lenient reading of their scorer"
    unchecked = (
        f"; {rescore.not_checked_items} of them not checked for format ({why})"
        if rescore.not_checked_items
        else ""
    )
    return (
        f"{k} answered wrongly with complete, scored answers ({worse} of them got worse): what "
        f"training changed in the model's answers; read the examples and the flips{unchecked}"
    )
