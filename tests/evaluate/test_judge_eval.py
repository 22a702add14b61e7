"""An eval scored by an LLM judge (`eval.judge`): grades become scores, an unparsable judge is
a harness error and never a score, a refusing judge stops the eval, and the judge's key is in
no file the eval writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tuneloop.errors import InputError
from tuneloop.evaluate import EvalSettings, evaluate
from tuneloop.records import read_jsonl
from tuneloop.suite import item_prompt_text, load_suite

from ..installed import tuneloop
from ..judge_fixture import honest, write_judge
from .conftest import expected_score

KEY = "sk-judge-Evalkey-0123456789abcdef"


def _judged(suite: Path, out: Path) -> Path:
    rows = [json.loads(line) for line in suite.read_text().splitlines()]
    path = out / "judged.jsonl"
    path.write_text("".join(json.dumps({**r, "scorer": "judge"}) + "\n" for r in rows))
    return path


def _eval(server, suite, out, judge_file):
    settings = EvalSettings(
        n_samples=1, concurrency=4, max_retries=2, backoff_s=0.001, judge=judge_file
    )
    return evaluate(server.url, "fake", suite, out, settings, progress=False)


def test_judge_grades_are_the_scores(fake_server, fake_judge, small_suite, tmp_path, monkeypatch):
    monkeypatch.setenv("JUDGE_EVAL_KEY", KEY)
    judge_file = write_judge(tmp_path / "judge", fake_judge.url, api_key_env="JUDGE_EVAL_KEY")
    suite = _judged(small_suite, tmp_path)
    summary = _eval(fake_server, suite, tmp_path / "run", judge_file)
    assert summary.counts["ok"] == 30
    prompts = {i.id: item_prompt_text(i) for i in load_suite(suite).items}
    rows = read_jsonl(tmp_path / "run" / "samples.jsonl")
    assert {r["item_id"]: r["score"] for r in rows} == {
        i: expected_score(p) for i, p in prompts.items()
    }
    detail = rows[0]["detail"]
    assert detail["judge"] == "fake-judge" and len(detail["rubric_sha256"]) == 64
    assert detail["judge_cost_usd"] == pytest.approx(200 / 1e6)
    assert summary.judge is not None and summary.judge.model == "fake-judge"
    assert summary.judge_cost_usd == pytest.approx(30 * 200 / 1e6)
    for f in (tmp_path / "run").iterdir():
        assert KEY not in f.read_text()
    # the same eval again into a new folder asks the judge nothing: every judgement is cached
    asked = fake_judge.calls
    _eval(fake_server, suite, tmp_path / "again", judge_file)
    assert fake_judge.calls == asked
    assert all(
        r["detail"]["judge_cached"] for r in read_jsonl(tmp_path / "again" / "samples.jsonl")
    )


def test_an_unparsable_judge_is_a_harness_error(fake_server, fake_judge, small_suite, tmp_path):
    fake_judge.answer = lambda content: (200, "A fine answer, I would say.")
    judge_file = write_judge(tmp_path / "judge", fake_judge.url, parse_retries=1)
    suite = _judged(small_suite, tmp_path)
    # some prose among parsable judgements: those samples are harness errors, never scores
    fake_judge.answer = lambda c: (200, "Fine.") if "3" in c.split("RESPONSE:")[1] else honest(c)
    summary = _eval(fake_server, suite, tmp_path / "some", judge_file)
    rows = read_jsonl(tmp_path / "some" / "samples.jsonl")
    bad = [r for r in rows if r["status"] == "harness_error"]
    assert bad and summary.counts["harness_error"] == len(bad) and summary.counts["ok"] > 0
    assert all(r["score"] is None and "JudgeUnparsable" in r["error"] for r in bad)
    # a judge that answers prose to everything is misconfigured: an input error, rows kept
    fake_judge.answer = lambda content: (200, "A fine answer, I would say.")
    judge_file = write_judge(tmp_path / "fresh", fake_judge.url, parse_retries=1)  # no cache
    with pytest.raises(InputError, match="no parsable judgement for any of the 30 samples"):
        _eval(fake_server, suite, tmp_path / "run", judge_file)
    assert len(read_jsonl(tmp_path / "run" / "samples.jsonl")) == 30


def test_a_refusing_judge_stops_the_eval(fake_server, fake_judge, small_suite, tmp_path):
    fake_judge.answer = lambda content: (404, "no such model")
    judge_file = write_judge(tmp_path / "judge", fake_judge.url)
    with pytest.raises(InputError, match="judge refused"):
        _eval(fake_server, _judged(small_suite, tmp_path), tmp_path / "run", judge_file)


def test_a_resume_with_another_rubric_is_refused(fake_server, fake_judge, small_suite, tmp_path):
    judge_file = write_judge(tmp_path / "judge", fake_judge.url)
    suite = _judged(small_suite, tmp_path)
    _eval(fake_server, suite, tmp_path / "run", judge_file)
    (tmp_path / "judge" / "grade.j2").write_text("Stricter.\n{{ prompt }} {{ response }}\n")
    judge_file = write_judge(tmp_path / "judge2", fake_judge.url)
    (tmp_path / "judge2" / "grade.j2").write_text("Stricter.\n{{ prompt }} {{ response }}\n")
    with pytest.raises(InputError, match="existing sample log has judge"):
        _eval(fake_server, suite, tmp_path / "run", judge_file)


@pytest.mark.parametrize("case", ["rubric", "key", "prose"])
def test_bad_judge_input_through_the_installed_script(
    fake_server, fake_judge, small_suite, tmp_path, case
):
    """One clear error, exit 2, no traceback, and the key in no output or file."""
    env = {"JUDGE_BAD_KEY": KEY}
    judge_file = write_judge(tmp_path / "judge", fake_judge.url, api_key_env="JUDGE_BAD_KEY")
    if case == "rubric":
        (tmp_path / "judge" / "grade.j2").unlink()
        needle = "rubric file not found"
    elif case == "key":
        env = {}
        needle = "JUDGE_BAD_KEY is not set or empty"
    else:
        fake_judge.answer = lambda content: (200, f"Looks fine. (key was {KEY})")
        needle = "no parsable judgement"
    out = tmp_path / "run"
    ran = tuneloop(
        "eval", "--endpoint", fake_server.url, "--model", "fake", "--suite",
        _judged(small_suite, tmp_path), "--out", out, "--judge", judge_file,
        "--no-progress", env=env,
    )  # fmt: skip
    ran.assert_input_error(needle, "judge")
    assert KEY not in ran.output
    for f in out.rglob("*") if out.exists() else []:
        assert KEY not in f.read_text()
