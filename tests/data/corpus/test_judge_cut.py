"""The judge cut (`judge:` in corpus.yaml): unlabelled traffic rows kept by an LLM judge's
grade after the cheap steps, with the judge's errors counted apart, the cut in the funnel and
provenance, and every grade on its row."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.data.conftest import exchange, write_jsonl
from tuneloop.data.corpus import build_corpus, load_corpus_config
from tuneloop.data.corpus.judge_cut import Grade, cut
from tuneloop.errors import InputError
from tuneloop.records import CorpusProvenance, read_record

from ...judge_fixture import write_judge

COST = (100 * 1.0 + 10 * 10.0) / 1e6  # the fake judge's usage at the judge file's price


def arithmetic(content: str) -> tuple[int, str]:
    """Grades "What is a + b?" answers right (1) or wrong (0); prose about jokes."""
    if "joke" in content:
        return 200, "Very funny, no score from me."
    a, b = map(int, re.search(r"What is (\d+) ?\+ ?(\d+)", content).groups())
    said = re.search(r"^RESPONSE: (.*)$", content, re.M).group(1).strip()
    return 200, "Checked.\nSCORE: " + ("1" if said == str(a + b) else "0")


def _traffic(tmp_path: Path) -> None:
    write_jsonl(
        tmp_path / "log.jsonl",
        [
            exchange(1, "What is 3 + 6?", "9"),  # a suite item: decontaminated, never judged
            exchange(2, "What is 5 + 5?", "10"),  # unlabelled, graded 1: kept
            exchange(3, "What is 7 + 7?", "15"),  # unlabelled, graded 0: dropped
            exchange(4, "What is 8 + 1?", "9", "up"),  # rated: the filter keeps it, unjudged
            exchange(5, "What is 2 + 2?", "5", "down"),  # rated: the filter drops it
            exchange(6, "Tell me a joke", "Knock knock."),  # the judge cannot grade it
            exchange(7, "what is 5+5 ?", "10"),  # a duplicate of r2: dedup drops it
        ],
    )


def _config(tmp_path: Path, judge_file: Path, extra: str = "") -> Path:
    cfg = tmp_path / "corpus.yaml"
    cfg.write_text(
        "sources:\n  - {path: log.jsonl, name: prod}\n"
        "decontaminate: {suites: [suite.jsonl]}\n"
        f"judge: {{file: {judge_file}{extra}}}\n"
    )
    return cfg


@pytest.fixture
def judged(tmp_path, tiny_suite, fake_judge):
    fake_judge.answer = arithmetic
    _traffic(tmp_path)
    judge_file = write_judge(tmp_path / "judge", fake_judge.url, parse_retries=0)
    return _config(tmp_path, judge_file), judge_file


def test_unlabelled_rows_are_kept_by_grade_after_the_cheap_steps(judged, fake_judge, tmp_path):
    cfg, judge_file = judged
    result = build_corpus(cfg, tmp_path / "out", progress=False)
    rows = {r["source_id"]: r for r in map(json.loads, result.sft_path.open())}
    assert sorted(rows) == ["r2", "r4"]
    assert "judge" not in rows["r4"]  # a labelled row is not the judge's
    mark = rows["r2"]["judge"]
    assert (mark["grade"], mark["model"]) == (1.0, "fake-judge")
    assert re.fullmatch(r"[0-9a-f]{64}", mark["rubric_sha256"])

    # only what survived filter, dedup and decontamination was shown to the judge
    asked = [b["messages"][0]["content"] for b in fake_judge.bodies]
    assert len(asked) == 3
    assert not any("3 + 6" in c or "2 + 2" in c or "5+5" in c for c in asked)
    assert all("REFERENCE: \n" in c for c in asked)  # traffic has no reference

    counts = result.counts
    assert list(counts)[-3:] == ["judge_errors", "judge", "shuffle"]
    assert (counts["decontaminate"], counts["judge_errors"], counts["judge"]) == (4, 3, 2)
    removed = [json.loads(line) for line in (tmp_path / "out" / "removed.jsonl").open()]
    why = {r["source_id"]: (r["step"], r["reason"]) for r in removed}
    assert why["r3"] == ("judge", "judge grade 0 < judge.min_grade 0.5")
    assert why["r6"][0] == "judge_errors" and "JudgeUnparsable" in why["r6"][1]
    assert why["r1"][0] == "decontaminate" and why["r5"][0] == "filter"

    prov = read_record(result.provenance_path, CorpusProvenance)
    cut_ = prov.judge
    assert cut_ is not None
    assert (cut_.asked, cut_.kept, cut_.below_grade, cut_.errors) == (3, 1, 1, 1)
    assert cut_.model == "fake-judge" and cut_.rubric_sha256 == mark["rubric_sha256"]
    assert cut_.min_grade == 0.5 and cut_.file == str(judge_file)
    assert cut_.cost_usd == pytest.approx(2 * COST) == cut_.cost_usd_this_run
    assert prov.removed_by_step["judge"] == prov.removed_by_step["judge_errors"] == 1


def test_a_rebuild_asks_the_judge_only_what_it_could_not_grade(judged, fake_judge, tmp_path):
    cfg, _ = judged
    build_corpus(cfg, tmp_path / "out", progress=False)
    first = fake_judge.calls
    again = build_corpus(cfg, tmp_path / "again", progress=False)
    assert fake_judge.calls == first + 1  # the unparsable one; the grades are cached
    cut_ = read_record(again.provenance_path, CorpusProvenance).judge
    assert cut_ is not None and cut_.cached == 2
    assert cut_.cost_usd == pytest.approx(2 * COST) and cut_.cost_usd_this_run == 0


def test_min_grade_and_the_pure_cut() -> None:
    grades = [Grade(0.9, None, False), Grade(0.6, None, False), Grade(None, None, False, "x")]
    errors, below = cut(grades, 0.7)
    assert errors == {2: "judge error: x"} and below == {1: "judge grade 0.6 < judge.min_grade 0.7"}


def test_the_funnel_line_of_corpus_build(judged, tmp_path):
    cfg, _ = judged
    tuneloop = Path(sys.executable).with_name("tuneloop")
    done = subprocess.run(
        [str(tuneloop), "corpus", "build", str(cfg), "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert (
        "judged: 3 asked, 1 kept, 1 dropped below grade 0.5, 1 judge errors, $0.0004" in done.stdout
    )
    assert "judge_errors: 3  judge: 2" in done.stdout


def test_a_refusing_judge_stops_the_build_with_nothing_written(judged, fake_judge, tmp_path):
    cfg, _ = judged
    fake_judge.answer = lambda content: (401, "bad key")
    with pytest.raises(InputError, match="judge.file: judge refused"):
        build_corpus(cfg, tmp_path / "out", progress=False)
    assert not (tmp_path / "out" / "sft.jsonl").exists()


def test_judge_file_problems_are_named_by_key(tmp_path, tiny_suite, fake_judge):
    _traffic(tmp_path)
    with pytest.raises(InputError, match="judge.file: .*nope.yaml: judge file not found"):
        build_corpus(_config(tmp_path, tmp_path / "nope.yaml"), tmp_path / "out", progress=False)
    bad = _config(tmp_path, tmp_path / "nope.yaml", ", min_grade: 2")
    with pytest.raises(InputError) as err:  # a schema error hides no missing input
        load_corpus_config(bad)
    assert "judge.min_grade (line 4)" in str(err.value) and "judge.file (line 4)" in str(err.value)
    pairwise = write_judge(tmp_path / "pairwise", fake_judge.url, mode="pairwise")
    with pytest.raises(InputError, match="judge.file: .*mode pairwise; the corpus cut needs"):
        build_corpus(_config(tmp_path, pairwise), tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists()


def test_the_ray_executor_cuts_the_same_rows(judged, tmp_path):
    """The judge cut runs on the driver, after the per-row steps Ray did: the same bytes."""
    pytest.importorskip("ray")
    cfg, _ = judged
    build_corpus(cfg, tmp_path / "local", progress=False)
    build_corpus(cfg, tmp_path / "ray", progress=False, executor="ray")
    for name in ("sft.jsonl", "removed.jsonl", "traces.jsonl"):
        assert (tmp_path / "local" / name).read_bytes() == (tmp_path / "ray" / name).read_bytes()
    cut_ = read_record(tmp_path / "ray" / "provenance.json", CorpusProvenance).judge
    assert cut_ is not None and (cut_.asked, cut_.kept, cut_.cached) == (3, 1, 2)
