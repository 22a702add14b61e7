"""The eval runner against a fake OpenAI server: rows, scores, seeds, errors, resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from tuneloop.config import SlicingConfig
from tuneloop.errors import InputError, PhaseFailed
from tuneloop.evaluate import EvalSettings, evaluate
from tuneloop.evaluate.plan import sample_seed
from tuneloop.records import read_jsonl
from tuneloop.samplelog import load_sample_log
from tuneloop.suite import item_prompt_text, load_suite

FAST = EvalSettings(n_samples=2, concurrency=4, max_retries=3, backoff_s=0.001)


def run(server, suite: Path, out: Path, settings: EvalSettings = FAST, **kw):
    return evaluate(server.url, "fake", suite, out, settings, progress=False, **kw)


def test_every_key_scored_from_the_server(fake_server, small_suite, tmp_path, kit) -> None:
    summary = run(fake_server, small_suite, tmp_path / "pre")
    loaded, rows = load_sample_log(tmp_path / "pre")
    suite = load_suite(small_suite)
    prompts = {i.id: item_prompt_text(i) for i in suite.items}
    assert loaded == summary
    assert len(rows) == 60 and {(r.item_id, r.sample_index) for r in rows} == {
        (i.id, k) for i in suite.items for k in range(2)
    }
    for row in rows:
        assert row.status == "ok" and row.score == kit.expected_score(prompts[row.item_id])
        assert row.seed == sample_seed(0, row.item_id, row.sample_index)
        assert row.completion_tokens == 5 and row.tags[0] == "add"
    assert summary.counts == {"expected": 60, "ok": 60, "harness_error": 0, "missing": 0}
    expected_mean = sum(kit.expected_score(p) for p in prompts.values()) / 30
    assert summary.mean_score == pytest.approx(expected_mean)
    assert summary.suite_revision == suite.revision and summary.retries == 0


def test_pre_and_post_send_identical_seeds(fake_server, small_suite, tmp_path) -> None:
    run(fake_server, small_suite, tmp_path / "pre")
    first = sorted(fake_server.state.seeds)
    fake_server.state.seeds.clear()
    run(fake_server, small_suite, tmp_path / "post", model_identity="fake@sha256:abc")
    assert sorted(fake_server.state.seeds) == first
    assert len({seed for _, seed in first}) == 60  # distinct per (item, sample)


def test_untrusted_output_is_a_harness_error(fake_server, small_suite, tmp_path) -> None:
    fake_server.state.malformed.add("What is 7 + 13?")
    fake_server.state.non_string.add("What is 14 + 26?")
    summary = run(fake_server, small_suite, tmp_path / "out")
    _, rows = load_sample_log(tmp_path / "out")
    bad = {r.item_id: r for r in rows if r.status == "harness_error"}
    assert set(bad) == {"add-0001", "add-0002"}
    assert "not a string" in (bad["add-0002"].error or "")
    assert all(r.score is None and r.value == 0.0 for r in bad.values())
    assert summary.counts["harness_error"] == 4 and summary.retries == 0


def test_exhausted_retries_become_missing_then_resume_fills(fake_server, small_suite, tmp_path):
    fake_server.state.error_rate = 0.5
    out = tmp_path / "out"
    settings = EvalSettings(n_samples=2, concurrency=4, max_retries=0)
    first = run(fake_server, small_suite, out, settings)
    assert 0 < first.counts["missing"] < 60 and first.counts["ok"] + first.counts["missing"] == 60
    missing = [r for r in read_jsonl(out / "samples.jsonl") if r["status"] == "missing"]
    assert all("HTTP 500" in r["error"] and r["score"] is None for r in missing)

    fake_server.state.error_rate = 0.0
    fake_server.state.requests = 0
    second = run(fake_server, small_suite, out, settings)
    assert fake_server.state.requests == first.counts["missing"]  # only the missing keys
    assert second.counts == {"expected": 60, "ok": 60, "harness_error": 0, "missing": 0}
    lines = read_jsonl(out / "samples.jsonl")
    assert len(lines) == 60  # compacted: each key exactly once
    assert len({(r["item_id"], r["sample_index"]) for r in lines}) == 60


def test_resume_repairs_a_torn_line(fake_server, small_suite, tmp_path) -> None:
    out = tmp_path / "out"
    run(fake_server, small_suite, out)
    samples = out / "samples.jsonl"
    lines = samples.read_text().splitlines(keepends=True)
    samples.write_text("".join(lines[:40]) + lines[40][:25])  # killed mid-append
    fake_server.state.requests = 0
    summary = run(fake_server, small_suite, out)
    assert fake_server.state.requests == 20
    assert summary.counts["ok"] == 60 and len(read_jsonl(samples)) == 60


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"settings": EvalSettings(n_samples=2, temperature=0.7)}, "sampling params"),
        ({"model_identity": "other"}, "model"),
        ({"settings": FAST.model_copy(update={"slice": "dev"})}, "slice"),
    ],
)
def test_resume_refuses_other_settings(fake_server, small_suite, tmp_path, change, message):
    out = tmp_path / "out"
    run(fake_server, small_suite, out)
    with pytest.raises(InputError, match=message):
        run(fake_server, small_suite, out, **change)


def test_resume_refuses_rows_of_another_suite(fake_server, small_suite, tmp_path) -> None:
    out = tmp_path / "out"
    run(fake_server, small_suite, out)
    (out / "summary.json").unlink()
    data = [json.loads(line) for line in small_suite.read_text().splitlines()]
    data[0]["answer"] = "999"
    small_suite.write_text("".join(json.dumps(r) + "\n" for r in data))
    with pytest.raises(InputError, match=r"samples.jsonl:1: row is from suite revision"):
        run(fake_server, small_suite, out)


def test_refused_endpoint_stops_with_input_error(fake_server, small_suite, tmp_path) -> None:
    fake_server.state.refuse = True
    with pytest.raises(InputError, match="HTTP 404"):
        run(fake_server, small_suite, tmp_path / "out")
    assert fake_server.state.requests < 60


def test_slices_and_unknown_slice(fake_server, small_suite, tmp_path) -> None:
    slicing = SlicingConfig(slices={"dev": 0.5, "gate": 0.5})

    def on(name: str, out: Path):
        settings = FAST.model_copy(update={"slice": name})
        return run(fake_server, small_suite, out, settings, slicing=slicing)

    dev, gate = on("dev", tmp_path / "dev"), on("gate", tmp_path / "gate")
    assert set(dev.item_ids).isdisjoint(gate.item_ids)
    assert len(dev.item_ids) + len(gate.item_ids) == 30
    with pytest.raises(InputError, match="did you mean 'gate'"):
        on("gat", tmp_path / "x")


def test_bad_settings_are_reported_together() -> None:
    with pytest.raises(ValidationError, match=r"(?s)n_samples.*greater than 0.*top_p"):
        EvalSettings(n_samples=0, top_p=2.0)


def test_unreachable_endpoint_fails_closed(small_suite, tmp_path) -> None:
    import socket

    with socket.socket() as s:  # a port with nothing listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    settings = EvalSettings(concurrency=8, max_retries=1, backoff_s=0.001)
    with pytest.raises(PhaseFailed, match="no request to .* succeeded .*connect"):
        evaluate(
            f"http://127.0.0.1:{port}", "m", small_suite, tmp_path / "o", settings, progress=False
        )
    summary, rows = load_sample_log(tmp_path / "o")
    assert summary.counts["missing"] == 30 and all(r.status == "missing" for r in rows)


def test_a_price_makes_every_answered_row_carry_its_cost(
    fake_server, small_suite, tmp_path
) -> None:
    priced = FAST.model_copy(update={"usd_per_1m": 2.0})
    summary = run(fake_server, small_suite, tmp_path / "priced", priced)
    assert summary.usd_per_1m == 2.0
    assert json.loads((tmp_path / "priced" / "summary.json").read_text())["schema"] == (
        "tuneloop.eval_summary/5"
    )
    _, rows = load_sample_log(tmp_path / "priced")
    # the fake server reports 5 completion tokens per answer: 5 × $2 per million
    assert {r.cost_usd for r in rows if r.status == "ok"} == {1e-5}
    plain = run(fake_server, small_suite, tmp_path / "plain")
    assert plain.usd_per_1m is None
    assert all(r.cost_usd is None for r in load_sample_log(tmp_path / "plain")[1])
