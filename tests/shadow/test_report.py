"""`tuneloop shadow report` (`shadow/report.py`, `report_md.py`, `command.py`): win/tie/loss
counting with a fake judge, the skipped pairs, the record and its page, and bad input as the
installed script reports it (one line, exit 2, nothing written)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from tuneloop.errors import InputError
from tuneloop.records import read_record
from tuneloop.records.judge import JudgeIdentity
from tuneloop.records.shadow import ShadowAnswer, ShadowPair, ShadowReport
from tuneloop.scorers.judge import JudgeUnparsable, Preference
from tuneloop.shadow import BANNER, read_pairs, render, shadow_report, write_report
from tuneloop.stats import sign_test

from ..installed import tuneloop
from ..judge_fixture import FakeJudge, fake_judge, write_judge

__all__ = ["fake_judge"]  # the fixture, imported for pytest


def pair(i: int, champion: str, challenger: str | None) -> ShadowPair:
    error = None if challenger is not None else "HTTP 500: down"
    return ShadowPair(
        request_id=f"chatcmpl-{i}",
        request_sha256=f"{i:064x}",
        timestamp="2026-12-02T10:00:00.000Z",
        model="champion",
        challenger_model="chal-v2",
        streamed=False,
        messages=[{"role": "user", "content": f"question {i}"}],
        champion=ShadowAnswer(text=champion, latency_s=0.1, completion_tokens=3),
        challenger=ShadowAnswer(text=challenger, error=error, latency_s=0.2),
    )


def write_pairs(log_dir: Path, pairs: Sequence[ShadowPair], tail: str = "") -> Path:
    path = log_dir / "shadow" / "pairs.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = "".join(json.dumps(p.to_json()) + "\n" for p in pairs)
    path.write_text(lines + tail)
    return path


class WordJudge:
    """Prefers the answer that says `good`; a tie otherwise; `garbled` is unparsable."""

    identity = JudgeIdentity(
        model="word-judge",
        endpoint="http://127.0.0.1:1",
        mode="pairwise",
        rubric_sha256="ab" * 32,
        pass_threshold=0.5,
    )

    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []

    def compare(
        self, messages: Sequence[Mapping[str, Any]], baseline: str, candidate: str
    ) -> Preference:
        self.asked.append((baseline, candidate))
        if "garbled" in candidate:
            raise JudgeUnparsable("judge 'word-judge' gave no parsable judgement")
        if "good" in candidate and "good" not in baseline:
            return Preference("candidate", ("B", "A"), 0.01, False)
        if "good" in baseline and "good" not in candidate:
            return Preference("baseline", ("A", "B"), 0.01, True)
        return Preference("tie", ("A", "A"), 0.01, False)


MIX = [
    ("meh", "good"),
    ("meh", "good"),
    ("meh", "good"),
    ("meh", "meh"),
    ("good", "good"),
    ("good", "meh"),
    ("meh", None),  # the challenger failed
    ("meh", "garbled"),  # the judge could not judge
]


def test_wins_ties_losses_and_the_skipped_pairs_are_counted(tmp_path: Path) -> None:
    path = write_pairs(tmp_path, [pair(i, a, b) for i, (a, b) in enumerate(MIX)])
    judge = WordJudge()
    seen: list[tuple[int, int]] = []
    report = shadow_report(path, judge, progress=lambda done, total: seen.append((done, total)))
    assert (report.wins, report.ties, report.losses) == (3, 2, 1)
    assert (report.n_pairs, report.n_judged) == (8, 6)
    assert (report.n_challenger_errors, report.n_judge_errors) == (1, 1)
    assert report.preference == pytest.approx((3 + 2 / 2) / 6)
    assert report.sign_test_p == pytest.approx(sign_test(3, 1)) == pytest.approx(0.625)
    low, high, rate = report.ci_low, report.ci_high, report.preference
    assert low is not None and high is not None and rate is not None
    assert 0 <= low < rate < high <= 1
    assert report.judge_cost_usd == pytest.approx(0.06) and report.judge_cached == 1
    assert report.judge.model == "word-judge" and report.judge.mode == "pairwise"
    assert report.challenger_models == ["chal-v2"] and report.champion_models == ["champion"]
    assert report.banner == BANNER and "never a promotion" in BANNER
    assert judge.asked[0] == ("meh", "good")  # champion is the baseline, challenger the candidate
    assert seen[-1] == (7, 7)  # the failed challenger is never sent to the judge


def test_max_pairs_caps_what_the_judge_is_asked(tmp_path: Path) -> None:
    path = write_pairs(tmp_path, [pair(i, a, b) for i, (a, b) in enumerate(MIX)])
    judge = WordJudge()
    report = shadow_report(path, judge, max_pairs=2)
    assert len(judge.asked) == 2 and report.n_judged == 2 and report.wins == 2
    assert report.n_pairs == 8 and report.n_challenger_errors == 1


def test_all_wins_and_nothing_judged(tmp_path: Path) -> None:
    path = write_pairs(tmp_path, [pair(i, "meh", "good") for i in range(10)])
    report = shadow_report(path, WordJudge())
    assert (report.preference, report.ci_low, report.ci_high) == (1.0, 1.0, 1.0)
    assert report.sign_test_p == pytest.approx(2 / 2**10)
    empty = write_pairs(tmp_path / "e", [pair(0, "meh", None)])
    none = shadow_report(empty, WordJudge())
    assert none.n_judged == 0 and none.preference is None and none.ci_low is None
    assert none.sign_test_p is None and "not measured" in render(none)


def test_the_record_and_the_page_are_written_and_read_back(tmp_path: Path) -> None:
    path = write_pairs(tmp_path, [pair(i, a, b) for i, (a, b) in enumerate(MIX)])
    report = shadow_report(path, WordJudge())
    write_report(report, tmp_path / "out")
    again = read_record(tmp_path / "out" / "shadow-report.json", ShadowReport)
    assert again == report
    page = (tmp_path / "out" / "shadow-report.md").read_text()
    assert BANNER in page and "3 / 2 / 1" in page and "0.667" in page


def test_a_line_being_written_waits_and_a_bad_line_is_named(tmp_path: Path) -> None:
    torn = '{"schema": "tuneloop.shadow_pair/1", "request_id": "x'
    path = write_pairs(tmp_path, [pair(0, "meh", "good")], tail=torn)
    assert len(read_pairs(path).pairs) == 1
    path.write_text(json.dumps(pair(0, "a", "b").to_json()) + "\nnot json\n")
    with pytest.raises(InputError, match=r"pairs.jsonl:2: invalid JSON"):
        read_pairs(path)
    path.write_text(json.dumps({**pair(0, "a", "b").to_json(), "messages": "x"}) + "\n")
    with pytest.raises(InputError, match=r"pairs.jsonl:1: field 'messages'"):
        read_pairs(path)


def test_the_installed_command_judges_with_a_real_judge_file(
    tmp_path: Path, fake_judge: FakeJudge
) -> None:
    """The fake judge prefers the larger number; the challenger's is larger twice."""
    answers = [("3", "5"), ("3", "9"), ("4", "4"), ("7", "1")]
    write_pairs(
        tmp_path / "t", [pair(i, f"it is {a}", f"it is {b}") for i, (a, b) in enumerate(answers)]
    )
    judge = write_judge(tmp_path / "j", fake_judge.url, mode="pairwise")
    out = tmp_path / "out"
    ran = tuneloop("shadow", "report", "--log-dir", tmp_path / "t", "--judge", judge, "--out", out)
    assert ran.code == 0, ran.output
    assert "judged 4/4 pairs" in ran.stderr and "diagnostic" in ran.stdout
    report = read_record(out / "shadow-report.json", ShadowReport)
    assert (report.wins, report.ties, report.losses) == (2, 1, 1)
    # both orders of each pair; the tie's two orders read the same, so the second is cached
    assert fake_judge.calls == 7
    assert report.judge_cost_usd == pytest.approx(8 * (100 * 1.0 + 10 * 10.0) / 1e6)


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, fake_judge: FakeJudge) -> None:
    out = tmp_path / "out"
    judge = write_judge(tmp_path / "j", fake_judge.url, mode="pairwise")
    base = ("shadow", "report", "--out", out)
    ran = tuneloop(*base, "--log-dir", tmp_path / "none", "--judge", judge)
    ran.assert_input_error("shadow/pairs.jsonl", "tuneloop proxy")
    write_pairs(tmp_path / "t", [pair(0, "it is 1", "it is 2")])
    logs = ("--log-dir", tmp_path / "t")
    tuneloop(*base, *logs, "--judge", tmp_path / "nope.yaml").assert_input_error("nope.yaml")
    grader = write_judge(tmp_path / "g", fake_judge.url, mode="grade")
    tuneloop(*base, *logs, "--judge", grader).assert_input_error("pairwise")
    fake_judge.answer = lambda content: (401, "bad key")
    tuneloop(*base, *logs, "--judge", judge).assert_input_error(str(judge), "401")
    assert not out.exists() or not any(out.iterdir())
