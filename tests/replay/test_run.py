"""The replay phase against fake teachers: scores, rows in the trainers' shapes, the report,
faults (5xx and timeouts are missing, never failures; malformed answers score 0 with the
reason), resume without paying twice, and keys never written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tuneloop.config.replay import ReplayConfig
from tuneloop.records import read_jsonl, read_record
from tuneloop.records.replay import ReplayReport
from tuneloop.replay import replay
from tuneloop.train.data import Row, dpo_rows, sft_rows

PAIRS = [(1, 2), (2, 2), (3, 4), (5, 5), (10, 7), (8, 8)]  # totals 3 4 7 10 17 16: 3 even


def _traces(tmp_path: Path, kit, wrong_original: set[int] = frozenset()) -> Path:
    traces = [
        kit.arith_trace(i, a, b, original_right=i not in wrong_original)
        for i, (a, b) in enumerate(PAIRS)
    ]
    return kit.write_traces(tmp_path / "traces.jsonl", traces)


def _settings(**kw) -> ReplayConfig:
    return ReplayConfig(concurrency=4, **kw)


def test_scores_rows_and_report(tmp_path, teachers_server, kit) -> None:
    traces = _traces(tmp_path, kit, wrong_original={0})
    teachers = kit.write_teachers(
        tmp_path / "teachers.yaml",
        teachers_server.url,
        [
            {"name": "right", "price": {"input_per_1m": 1.0, "output_per_1m": 10.0}},
            {"name": "cheap", "model": "right", "price": {"input_per_1m": 0.5}},
            {"name": "even", "price": {"input_per_1m": 5.0}},
            {"name": "wrong"},
        ],
    )
    out = tmp_path / "out"
    result = replay(traces, teachers, out, _settings())
    report = read_record(out / "report.json", ReplayReport)
    assert report == result.report
    by = {t.name: t for t in report.teachers}
    assert (by["right"].passed, by["right"].scored, by["right"].pass_rate) == (6, 6, 1.0)
    assert (by["even"].passed, by["wrong"].passed) == (3, 0)
    low, high = by["even"].wilson_ci
    assert low < 0.5 < high
    # cost from usage: 100 prompt + 10 completion tokens a call
    assert by["right"].cost_usd == pytest.approx(6 * (100 * 1.0 + 10 * 10.0) / 1e6)
    assert by["cheap"].cost_usd == pytest.approx(6 * 100 * 0.5 / 1e6)
    assert by["right"].latency_mean_s > 0 and by["right"].prompt_tokens == 600
    agree = {(g.a, g.b): g for g in report.agreement}
    assert agree[("right", "cheap")].rate == 1.0 and agree[("right", "wrong")].rate == 0.0
    assert agree[("right", "even")].agree == 3 and agree[("right", "even")].steps == 6

    sft = read_jsonl(out / "sft.jsonl")
    assert len(sft) == report.sft_rows == 6
    assert {r["teacher"] for r in sft} == {"cheap"}  # tie on score → the cheaper call
    assert sft_rows([Row("x", r) for r in sft])  # the SFT trainer reads them
    dpo = read_jsonl(out / "dpo.jsonl")
    assert dpo_rows([Row("x", r) for r in dpo])  # the DPO trainer reads them
    # per step: `wrong` always fails; `even` fails 3 steps with the very answer `wrong` gave
    # (one pair per distinct rejected message); the original fails step 0
    assert len(dpo) == report.dpo_pairs == 6 + 1
    original = [p for p in dpo if p["rejected_from"] == "original"]
    assert [p["source_id"] for p in original] == ["arith/t0#2|original"]
    assert original[0]["rejected"][0]["content"] == "The answer is 6."
    assert (report.original_scored, report.original_passed) == (6, 5)
    assert report.cost_per_usable_row == pytest.approx(report.cost_usd / 13)
    assert "Replay report" in (out / "report.md").read_text()


def test_5xx_and_timeouts_are_missing_not_failures(tmp_path, teachers_server, kit) -> None:
    traces = _traces(tmp_path, kit)
    fast = {"max_retries": 1, "backoff_s": 0.01}
    teachers = kit.write_teachers(
        tmp_path / "teachers.yaml",
        teachers_server.url,
        [
            {"name": "right"},
            {"name": "error500", **fast},
            {"name": "slow", "timeout_s": 0.3, **fast},
        ],
    )
    report = replay(traces, teachers, tmp_path / "out", _settings()).report
    by = {t.name: t for t in report.teachers}
    for name in ("error500", "slow"):
        t = by[name]
        assert (t.missing, t.scored, t.passed, t.pass_rate, t.wilson_ci) == (6, 0, 0, None, None)
        assert t.cost_usd == 0
    assert teachers_server.state.calls_for("error500") == 6 * 2  # retried once each
    rows = read_jsonl(tmp_path / "out" / "calls.jsonl")
    errors = {r["error"] for r in rows if r["teacher"] == "error500"}
    assert all("HTTP 500" in e for e in errors)
    assert any("timed out" in r["error"] for r in rows if r["teacher"] == "slow")
    assert by["right"].pass_rate == 1.0 and report.sft_rows == 6


def test_malformed_output_scores_zero_with_the_reason(tmp_path, teachers_server, kit) -> None:
    traces = _traces(tmp_path, kit)
    teachers = kit.write_teachers(
        tmp_path / "teachers.yaml",
        teachers_server.url,
        [{"name": "malformed"}, {"name": "non_string"}, {"name": "right"}],
    )
    report = replay(traces, teachers, tmp_path / "out", _settings()).report
    by = {t.name: t for t in report.teachers}
    for name in ("malformed", "non_string"):
        assert (by[name].scored, by[name].passed, by[name].malformed) == (6, 0, 6)
        assert by[name].pass_rate == 0.0 and by[name].missing == 0
    rows = {
        (r["teacher"], r["step"], r["trace"]): r
        for r in read_jsonl(tmp_path / "out" / "calls.jsonl")
    }
    bad = rows[("non_string", 2, "arith/t0")]
    assert bad["status"] == "malformed" and bad["score"] == 0.0
    assert bad["error"] == "content is int, not text (and no tool calls)"
    assert "not a chat completion" in rows[("malformed", 2, "arith/t0")]["error"]
    # a malformed answer is never the rejected side of a pair (it is no message)
    dpo = read_jsonl(tmp_path / "out" / "dpo.jsonl")
    assert dpo == []


def test_resume_pays_only_for_calls_not_finished(tmp_path, teachers_server, kit) -> None:
    """A first run loses every call of one teacher (500s, no retries); the rerun asks only
    those again, and the report shows no cost paid twice."""
    traces = _traces(tmp_path, kit)
    price = {"input_per_1m": 2.0, "output_per_1m": 20.0}
    path = tmp_path / "teachers.yaml"
    kit.write_teachers(
        path,
        teachers_server.url,
        [{"name": "right", "price": price}, {"name": "flaky", "price": price, "max_retries": 0}],
    )
    out = tmp_path / "out"
    first = replay(traces, path, out, _settings()).report
    state = teachers_server.state
    assert (state.calls_for("right"), state.calls_for("flaky")) == (6, 6)
    by = {t.name: t for t in first.teachers}
    assert by["flaky"].missing == 6 and by["right"].calls_this_run == 6

    second = replay(traces, path, out, _settings()).report
    assert (state.calls_for("right"), state.calls_for("flaky")) == (6, 12)  # right not again
    by2 = {t.name: t for t in second.teachers}
    call_cost = (100 * 2.0 + 10 * 20.0) / 1e6
    assert by2["right"].calls_this_run == 0 and by2["right"].cost_usd_this_run == 0
    assert by2["flaky"].calls_this_run == 6 and by2["flaky"].missing == 0
    assert second.calls_reused == 6 and second.calls_this_run == 6
    assert second.cost_usd == pytest.approx(12 * call_cost)
    assert second.cost_usd_this_run == pytest.approx(6 * call_cost)

    rows = read_jsonl(out / "sft.jsonl")
    third = replay(traces, path, out, _settings()).report  # finished: nothing to pay
    assert read_jsonl(out / "sft.jsonl") == rows and len(rows) == 6
    assert (state.calls_for("right"), state.calls_for("flaky")) == (6, 12)
    assert third.calls_this_run == 0 and third.cost_usd_this_run == 0
    assert third.cost_usd == pytest.approx(second.cost_usd)

    # a changed teacher (sampling) is a new request: asked again, old rows not reused
    kit.write_teachers(
        path,
        teachers_server.url,
        [{"name": "right", "price": price, "sampling": {"max_tokens": 7}}, {"name": "flaky"}],
    )
    fourth = replay(traces, path, out, _settings()).report
    assert state.calls_for("right") == 12 and state.calls_for("flaky") == 12
    assert fourth.calls_this_run == 6


def test_sampling_a_seeded_subset(tmp_path, teachers_server, kit) -> None:
    traces = _traces(tmp_path, kit)
    teachers = kit.write_teachers(tmp_path / "t.yaml", teachers_server.url, [{"name": "right"}])
    a = replay(traces, teachers, tmp_path / "a", _settings(sample_fraction=0.5, seed=3)).report
    b = replay(traces, teachers, tmp_path / "b", _settings(sample_fraction=0.5, seed=3)).report
    assert b.steps_planned == a.steps_planned
    capped = replay(traces, teachers, tmp_path / "c", _settings(max_steps=2)).report
    assert a.steps_available == 6 and 0 < a.steps_planned < 6
    ids = lambda d: [r["source_id"] for r in read_jsonl(d / "sft.jsonl")]  # noqa: E731
    assert ids(tmp_path / "a") == ids(tmp_path / "b")
    assert capped.steps_planned == 2


def test_keys_never_written(tmp_path, teachers_server, kit, monkeypatch) -> None:
    """The `echo` teacher puts the Authorization header in a 500 body, then in its answer."""
    key = "sk-test-NOTAREALKEY-0123456789abcdef"
    monkeypatch.setenv("ECHO_KEY", key)
    traces = _traces(tmp_path, kit)
    teachers = kit.write_teachers(
        tmp_path / "teachers.yaml",
        teachers_server.url,
        [{"name": "echo", "api_key_env": "ECHO_KEY", "max_retries": 0}],
    )
    out = tmp_path / "out"
    replay(traces, teachers, out, _settings())  # 500s echoing the key: missing rows
    replay(traces, teachers, out, _settings())  # answers repeating the key
    assert not any(key in json.dumps(r) for r in teachers_server.state.requests)  # header only
    written = {p.name: p.read_text() for p in out.iterdir() if p.is_file()}
    assert {"calls.jsonl", "sft.jsonl", "report.json", "report.md"} <= set(written)
    for name, text in written.items():
        assert key not in text, name
    assert (
        "HTTP 500" in written["calls.jsonl"]
        and "bad auth Bearer <SECRET>" in written["calls.jsonl"]
    )
    assert "You sent Bearer <SECRET>" in written["sft.jsonl"]
