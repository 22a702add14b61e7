"""The regression diagnosis: each cause from constructed logs, the order the causes are checked
in, the lenient re-score, "format not checked", the counts per tag, and both pages."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from tuneloop.config import ReportConfig
from tuneloop.records import append_jsonl, read_record, write_record
from tuneloop.report import compare
from tuneloop.report.delta import Log
from tuneloop.report.diagnosis import EXCERPT_CHARS, diagnose
from tuneloop.report.flips import CurrentSuite, current_suite
from tuneloop.report.html import render_html
from tuneloop.report.markdown import diagnosis_lines, render_markdown
from tuneloop.report.page import compare_page
from tuneloop.report.record import CAUSES, DeltaReport, Diagnosis
from tuneloop.samplelog import EvalSummary, SampleRow, SamplingParams
from tuneloop.suite import load_suite

N = 2
"""Samples per item in these logs."""
MAX_TOKENS = 8

ITEMS: list[dict[str, Any]] = [
    {"id": "floor", "prompt": "What is 3 + 4?", "answer": "7", "tags": ["math"]},
    {"id": "infra", "prompt": "What is 1 + 2?", "answer": "3", "tags": ["math"]},
    {"id": "length", "prompt": "What is 2 + 3?", "answer": "5", "tags": ["math", "long"]},
    {"id": "format", "prompt": "What is 6 × 7?", "answer": "42", "tags": ["math"]},
    {"id": "drift", "prompt": "What is 5 + 5?", "answer": "10", "tags": ["math"]},
    {"id": "fine", "prompt": "What is 1 + 1?", "answer": "2", "tags": ["math"]},
    {"id": "word", "prompt": "Capital of France?", "answer": "Paris", "scorer": "exact"},
    {"id": "tool", "prompt": "Call f.", "answer": {"a": 1}, "scorer": "json", "tags": ["tools"]},
]
"""One item per cause, one that is fine, a text item and one whose scorer has no lenient
reading; `write_suite` gives the logs their revision."""

Sample = tuple[float | None, str] | tuple[float | None, str, str]
"""(score, completion[, finish_reason]); a None score is a `missing` row, -1 a harness error."""


def write_suite(tmp: Path, items: Sequence[dict[str, Any]] = ITEMS) -> Path:
    path = tmp / "suite.jsonl"
    path.write_text("".join(json.dumps(i) + "\n" for i in items), encoding="utf-8")
    return path


def _row(item: dict[str, Any], j: int, sample: Sample, revision: str, model: str) -> SampleRow:
    score, text, *finish = sample
    status = "ok" if score is not None and score >= 0 else "missing" if score is None else "error"
    status = "harness_error" if status == "error" else status
    return SampleRow(
        suite_revision=revision,
        item_id=item["id"],
        sample_index=j,
        model=model,
        seed=j,
        completion=text if status == "ok" else None,
        finish_reason=(finish[0] if finish else "stop") if status != "missing" else None,
        score=score if status == "ok" else None,
        scorer=item.get("scorer", "numeric"),
        status=status,  # type: ignore[arg-type]
        error=None if status == "ok" else "HTTP 503 after 3 retries",
        tags=item.get("tags", []),
    )


def make_log(
    suite: Path, samples: dict[str, list[Sample]], model: str, items: Sequence[dict] = ITEMS
) -> Log:
    """A loaded log (summary, rows) of `samples` on the suite at `suite`."""
    revision = load_suite(suite).revision
    by_id = {i["id"]: i for i in items}
    rows = [
        _row(by_id[item_id], j, s, revision, model)
        for item_id, values in samples.items()
        for j, s in enumerate(values)
    ]
    summary = EvalSummary(
        suite_path=str(suite),
        suite_revision=revision,
        item_ids=[i["id"] for i in items],
        model=model,
        endpoint="http://127.0.0.1:1/v1",
        sampling=SamplingParams(n_samples=N, temperature=1.0, max_tokens=MAX_TOKENS),
    )
    return summary, rows


PRE: dict[str, list[Sample]] = {
    "floor": [(0.0, "6"), (0.0, "8")],
    "infra": [(1.0, "3"), (1.0, "3")],
    "length": [(1.0, "5"), (1.0, "5")],
    "format": [(1.0, "42"), (1.0, "42")],
    "drift": [(1.0, "10"), (1.0, "10")],
    "fine": [(1.0, "2"), (1.0, "2")],
    "word": [(1.0, "Paris"), (1.0, "paris")],
    "tool": [(1.0, '{"a": 1}'), (1.0, '{"a": 1}')],
}
POST: dict[str, list[Sample]] = {
    "floor": [(0.0, "6"), (None, "")],  # never solved, and a sample lost: floor wins
    "infra": [(1.0, "3"), (None, "")],  # still right on average, but a sample lost
    "length": [(0.0, "Let me think step by", "length"), (1.0, "5")],
    "format": [(0.0, "42 is what I get. Check: 6 * 7"), (1.0, "42")],
    "drift": [(0.0, "11"), (0.0, "<script>alert(1)</script>")],
    "fine": [(1.0, "2"), (1.0, "2")],
    "word": [(0.0, "The capital is Paris."), (0.0, "Parisian")],
    "tool": [(0.0, '{"a": 2}'), (0.0, "no")],
}


def _diagnose(tmp: Path, suite: CurrentSuite | None = None) -> Diagnosis:
    path = write_suite(tmp)
    pre, post = make_log(path, PRE, "m0"), make_log(path, POST, "m1")
    found = suite or current_suite(str(path), pre[0].suite_revision)
    return diagnose(pre, post, pre[0].item_ids, 0.5, found)


def _by_id(d: Diagnosis) -> dict[str, Any]:
    return {i.item_id: i for i in d.items}


def test_each_item_gets_its_cause(tmp_path: Path) -> None:
    d = _diagnose(tmp_path)
    causes = {i.item_id: i.cause for i in d.items}
    assert causes == {
        "floor": "floor",
        "infra": "infra",
        "length": "length",
        "format": "format",
        "drift": "drift",
        "word": "format",
        "tool": "drift",
    }  # `fine` is neither worse nor failing
    items = _by_id(d)
    assert items["length"].reason == f"1 of {N} samples hit max_tokens {MAX_TOKENS}"
    assert items["format"].reason.startswith("1 of 1 failing answers hold the reference `42`")
    assert items["infra"].reason == "1 of 2 samples missing after retries: HTTP 503 after 3 retries"
    assert items["drift"].reason == "champion 2 of 2 samples pass, challenger 0 of 2"
    assert items["infra"].worse and items["infra"].post_score == 0.5  # worse, not failing
    assert (d.n_items, d.worse, d.still_failing, d.diagnosed) == (8, 6, 4, 7)
    assert [c.cause for c in d.causes] == list(CAUSES)
    assert {c.cause: c.items for c in d.causes} == {
        "floor": 1,
        "infra": 1,
        "length": 1,
        "format": 2,
        "drift": 2,
    }


def test_the_first_cause_that_fits_wins(tmp_path: Path) -> None:
    """floor before infra (above); infra before length; length before format; format before
    drift."""
    path = write_suite(tmp_path)
    pre = make_log(path, {k: [(1.0, "x"), (1.0, "x")] for k in ("infra", "length", "format")}, "a")
    post = make_log(
        path,
        {
            "infra": [(-1, ""), (0.0, "thinking", "length")],
            "length": [(0.0, "so 5 then", "length"), (0.0, "5.0 apples")],
            "format": [(0.0, "42.0"), (0.0, "43")],
        },
        "b",
    )
    ids = ["infra", "length", "format"]
    d = diagnose(pre, post, ids, 0.5, current_suite(str(path), pre[0].suite_revision))
    assert [(i.item_id, i.cause) for i in d.items] == [
        ("infra", "infra"),
        ("length", "length"),
        ("format", "format"),
    ]
    assert _by_id(d)["infra"].reason.startswith("1 of 2 samples with a harness error")


@pytest.mark.parametrize(
    ("answer", "text", "holds"),
    [
        ("42", "The answer is 42.", True),
        ("42", "42.0", True),
        (42, "so x = 42 apples", True),
        ("42", "142", False),
        ("42", "1.42", False),
        ("42", "-42", False),
        ("4200", "about 4,200 in all", True),
        ("3/4", "it is 0.75", True),
    ],
)
def test_the_lenient_number_is_a_whole_token(answer: Any, text: str, holds: bool) -> None:
    from tuneloop.report.lenient import lenient_pass

    assert lenient_pass("numeric", {"answer": answer}, text) is holds


def test_lenient_readings_follow_the_scorer() -> None:
    from tuneloop.report.lenient import lenient_pass

    tolerant = {"answer": "100", "scorer_args": {"rel_tol": 0.05}}
    assert lenient_pass("numeric", tolerant, "roughly 103 of them") is True
    assert lenient_pass("numeric", {"answer": "100"}, "roughly 103 of them") is False
    assert lenient_pass("numeric", {"answer": "many"}, "42") is None  # nothing to look for
    assert lenient_pass("exact", {"answer": "Paris"}, "It is PARIS, France.") is True
    assert lenient_pass("exact", {"answer": ["Rome", "Paris"]}, "paris") is True
    assert lenient_pass("exact", {"answer": "Paris"}, "Parisian") is False
    assert lenient_pass("regex", {"pattern": "x", "answer": "b"}, "a, b, c") is True
    assert lenient_pass("regex", {"pattern": "x"}, "anything") is None  # a pattern, no value
    for scorer in ("json", "python_tests", "choice", "not_a_scorer", None):
        assert lenient_pass(scorer, {"answer": "B"}, "B") is None


def test_the_lenient_rescore_and_format_not_checked(tmp_path: Path) -> None:
    d = _diagnose(tmp_path)
    r = d.rescore
    # failing answers: floor 6; length "Let me…"; format "42 is…"; drift 11 and <script>;
    # word "…Paris." and "Parisian" (numeric and exact: checked); tool ×2 (json: not checked)
    assert (r.checked, r.holds_reference, r.not_checked, r.not_checked_items) == (7, 2, 2, 1)
    assert r.share == pytest.approx(2 / 7) and r.note is None
    tool = _by_id(d)["tool"]
    assert tool.cause == "drift"
    assert "format not checked (scorer `json` has no lenient reading of this item)" in tool.reason
    drift = next(c for c in d.causes if c.cause == "drift")
    assert "1 of them not checked for format (no lenient reading of their scorer)" in (
        drift.suggestion
    )


def test_without_the_suite_format_is_not_judged(tmp_path: Path) -> None:
    gone = _diagnose(
        tmp_path, CurrentSuite(None, "the suite `x.jsonl` named by the logs is not here")
    )
    assert {i.item_id: i.cause for i in gone.items}["format"] == "drift"
    assert gone.rescore.checked == 0 and gone.rescore.not_checked == 9
    assert (
        gone.rescore.note == "format not judged: the suite `x.jsonl` named by the logs is not here"
    )
    assert "format not checked (the suite is not available)" in _by_id(gone)["format"].reason
    example = next(c for c in gone.causes if c.cause == "drift").examples[0]
    assert example.prompt == "" and example.reference == ""
    # a suite changed since the evaluation is not read either
    revision = load_suite(write_suite(tmp_path)).revision
    (tmp_path / "other").mkdir()
    changed = current_suite(str(write_suite(tmp_path / "other", ITEMS[:-1])), revision)
    assert changed.suite is None and "has changed since the evaluation" in (changed.note or "")


def test_counts_per_tag(tmp_path: Path) -> None:
    d = _diagnose(tmp_path)
    tags = {t.tag: t.counts for t in d.per_tag}
    assert list(tags) == ["long", "math", "tools"]  # untagged items count only overall
    assert tags["math"] == {"floor": 1, "infra": 1, "length": 1, "format": 1, "drift": 1}
    assert tags["long"] == {"floor": 0, "infra": 0, "length": 1, "format": 0, "drift": 0}
    assert tags["tools"]["drift"] == 1 and sum(tags["tools"].values()) == 1


def test_suggestions_and_examples_carry_the_figures(tmp_path: Path) -> None:
    d = _diagnose(tmp_path)
    by = {c.cause: c for c in d.causes}
    assert by["format"].suggestion.startswith(
        "2 answers on 2 items contained the reference value but failed the scorer's format: "
        "see `format`, `word`, or loosen `scorer_args`"
    )
    assert by["length"].suggestion.startswith(
        "1 answer on 1 item stopped at max_tokens 8: raise `eval.max_tokens`"
    )
    assert "1 missing after retries, 0 harness errors" in by["infra"].suggestion
    assert by["floor"].suggestion.startswith("1 item never solved by any sample of either model")
    example = by["format"].examples[0]
    assert (example.item_id, example.prompt, example.reference) == (
        "format",
        "What is 6 × 7?",
        "42",
    )
    assert example.answer == "42 is what I get. Check: 6 * 7"  # the answer that holds it
    assert by["length"].examples[0].answer == "Let me think step by"
    assert by["infra"].examples[0].answer == "(missing: HTTP 503 after 3 retries)"


def test_long_answers_are_cut_in_examples(tmp_path: Path) -> None:
    path = write_suite(tmp_path)
    pre = make_log(path, {"drift": [(1.0, "10"), (1.0, "10")]}, "a")
    post = make_log(path, {"drift": [(0.0, "9" * (EXCERPT_CHARS + 7)), (0.0, "9")]}, "b")
    d = diagnose(pre, post, ["drift"], 0.5, current_suite(str(path), pre[0].suite_revision))
    assert d.causes[-1].examples[0].answer.endswith("[7 more characters not shown]")


def _write(folder: Path, log: Log) -> Path:
    summary, rows = log
    append_jsonl(folder / "samples.jsonl", [r.to_json() for r in rows])
    write_record(folder / "summary.json", summary)
    return folder


def test_compare_writes_the_diagnosis_and_both_pages_show_it(tmp_path: Path) -> None:
    path = write_suite(tmp_path)
    pre = _write(tmp_path / "pre", make_log(path, PRE, "m0"))
    post = _write(tmp_path / "post", make_log(path, POST, "m1"))
    out = tmp_path / "out"
    report = compare(pre, post, out, ReportConfig(n_resamples=200), figures=False)
    assert json.loads((out / "delta.json").read_text())["schema"] == "tuneloop.delta/2"
    back = read_record(out / "delta.json", DeltaReport)
    assert back == report and back.diagnosis is not None and back.diagnosis.count("format") == 2
    md = (out / "delta.md").read_text()
    assert "## Why items got worse (diagnosis)" in md
    assert "| format | 2 | 2 |" in md and "### Causes per tag" in md
    assert "| math | 1 | 1 | 1 | 1 | 1 |" in md
    assert "- **format**: 2 answers on 2 items contained the reference value" in md
    assert "2 of 7 failing answers checked hold the reference value (28.6%)" in md
    assert "  - challenger `11`" in md  # the drift item's first failing answer

    html = render_html(compare_page(report, pre, post))
    assert '<section id="diagnosis">' in html and '<a href="#diagnosis">' in html
    assert '<tr data-cause="format"><td><code>format</code></td><td class="num">2</td>' in html
    assert "2 of 7 failing answers checked hold the reference value" in html
    assert '<table id="cause-tags">' in html and '<table id="diagnosed-items">' in html


def test_a_completion_with_a_script_is_text_in_both_pages(tmp_path: Path) -> None:
    path = write_suite(tmp_path)
    script = "<script>alert(1)</script>"
    posted: dict[str, list[Sample]] = {**POST, "drift": [(0.0, script), (0.0, "11")]}
    pre = _write(tmp_path / "pre", make_log(path, PRE, "m0"))
    post = _write(tmp_path / "post", make_log(path, posted, "m1"))
    report = compare(pre, post, tmp_path / "out", ReportConfig(n_resamples=200), figures=False)
    html = render_html(compare_page(report, pre, post))
    assert script not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert html.count("<script>") == 1  # the page's own
    md = "\n".join(diagnosis_lines(report.diagnosis))
    assert f"  - challenger `{script}`" in md  # a code span: shown as text


def test_a_report_without_a_diagnosis_says_so(tmp_path: Path) -> None:
    path = write_suite(tmp_path)
    pre = _write(tmp_path / "pre", make_log(path, PRE, "m0"))
    post = _write(tmp_path / "post", make_log(path, POST, "m1"))
    report = compare(pre, post, tmp_path / "out", ReportConfig(n_resamples=200), figures=False)
    old = report.model_copy(update={"diagnosis": None})  # a delta.json from before it
    assert old.to_json()["schema"] == "tuneloop.delta/1" and "diagnosis" not in old.to_json()
    assert "Why items got worse" not in render_markdown(old)
    html = render_html(compare_page(old, pre, post))
    assert "not measured: the delta report predates the diagnosis" in html


def test_the_round_s_report_md_and_html_show_it(html_round: Path) -> None:
    """A real round (tests/report/htmlround.py): the capstone's pages carry the section with
    the delta report's counts."""
    delta = read_record(html_round / "report" / "delta.json", DeltaReport)
    d = delta.diagnosis
    assert d is not None and sum(c.items for c in d.causes) == d.diagnosed > 0
    # wrong answers are the wrong number (`i` for `i + 1`): never the scorer's format
    assert d.count("floor") > 0 and d.count("drift") > 0 and d.count("format") == 0
    md = (html_round / "capstone" / "report.md").read_text()
    assert "## Why items got worse (diagnosis)" in md
    assert f"| drift | {d.count('drift')} |" in md
    html = (html_round / "capstone" / "report.html").read_text()
    assert '<section id="diagnosis">' in html
    row = f'<tr data-cause="drift"><td><code>drift</code></td><td class="num">{d.count("drift")}<'
    assert row in html
