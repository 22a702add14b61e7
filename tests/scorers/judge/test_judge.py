"""The judge against a fake endpoint: grading, both-order pairwise under position bias, the
harness-error path, retries, refusals, the cache and its resume after kill -9, bad input."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time

import pytest

from tuneloop.errors import InputError
from tuneloop.scorers.judge import (
    JudgeRefused,
    JudgeUnavailable,
    JudgeUnparsable,
    load_judge,
    preference,
)

from ...judge_fixture import honest, write_judge

Q = [{"role": "user", "content": "What is 2 + 2?"}]


def test_grade_and_its_provenance(fake_judge, tmp_path):
    judge = load_judge(write_judge(tmp_path, fake_judge.url))
    right = judge.grade(Q, "It is 4.", reference="4")
    wrong = judge.grade(Q, "It is 5.", reference="4")
    assert (right.value, wrong.value) == (1.0, 0.0)
    assert right.cost_usd == pytest.approx((100 * 1.0 + 10 * 10.0) / 1e6)
    assert not right.cached and right.attempts == 1
    sent = fake_judge.bodies[0]
    assert (
        sent["model"] == "fake-judge" and "user: What is 2 + 2?" in sent["messages"][0]["content"]
    )
    assert (
        judge.identity.rubric_sha256
        == hashlib.sha256((tmp_path / "grade.j2").read_bytes()).hexdigest()
    )


def test_the_cache_asks_nothing_twice(fake_judge, tmp_path):
    path = write_judge(tmp_path, fake_judge.url)
    load_judge(path).grade(Q, "4", reference="4")
    again = load_judge(path).grade(Q, "4", reference="4")  # a new process would see the same file
    assert again.cached and again.value == 1.0 and again.cost_usd is not None
    assert fake_judge.calls == 1


def _biased(content: str) -> tuple[int, str]:
    """Honest, except that for half the pairs (by a hash of the request) it answers "A"."""
    if int(hashlib.sha256(content.encode()).hexdigest(), 16) % 2:
        return 200, "The first one.\nVERDICT: A"
    return honest(content)


def test_both_orders_cancel_position_bias(fake_judge, tmp_path):
    fake_judge.answer = _biased
    judge = load_judge(write_judge(tmp_path, fake_judge.url, mode="pairwise"))
    pairs = [
        (str(i), str(i + 1 if i % 2 else i - 1)) for i in range(200)
    ]  # candidate better on odd i
    single = both = wrong = 0
    for base, cand in pairs:
        p = judge.compare(Q, baseline=base, candidate=cand)
        truth = "candidate" if float(cand) > float(base) else "baseline"
        single += (p.orders[0] == "A") != (truth == "baseline")  # one order alone: wrong?
        both += p.outcome != "tie"
        wrong += p.outcome not in ("tie", truth)
    # asked once, the bias is a systematic error in the baseline's favour (~1/4 of all pairs)
    assert 30 <= single <= 70
    # asked in both orders it never points the wrong way: the bias only turns verdicts into ties
    assert wrong == 0 and both > 50


def test_preference_table():
    assert preference("B", "A") == "candidate"
    assert preference("A", "B") == "baseline"
    assert {preference(x, y) for x, y in [("A", "A"), ("B", "B"), ("TIE", "A"), ("B", "TIE")]} == {
        "tie"
    }


def test_prose_is_re_asked_then_a_harness_error(fake_judge, tmp_path):
    fake_judge.answer = lambda content: (200, "I think this answer is quite good overall.")
    judge = load_judge(write_judge(tmp_path, fake_judge.url, parse_retries=2))
    with pytest.raises(JudgeUnparsable, match="3 tries"):
        judge.grade(Q, "4", reference="4")
    assert fake_judge.calls == 3
    assert len({b["seed"] for b in fake_judge.bodies}) == 3  # each re-ask is a new request
    assert len(judge.cache) == 0  # an unparsable answer is never remembered


def test_a_second_try_that_parses_is_the_judgement(fake_judge, tmp_path):
    answers = iter([(200, "Looks right to me!"), (200, "SCORE: 0.75")])
    fake_judge.answer = lambda content: next(answers)
    got = load_judge(write_judge(tmp_path, fake_judge.url)).grade(Q, "4")
    assert got.value == 0.75 and got.attempts == 2


def test_transport_failures_are_retried(fake_judge, tmp_path):
    answers = iter([(503, "busy"), (429, "slow down"), (200, "SCORE: 1")])
    fake_judge.answer = lambda content: next(answers)
    assert load_judge(write_judge(tmp_path, fake_judge.url)).grade(Q, "4").value == 1.0
    fake_judge.answer = lambda content: (503, "down")
    with pytest.raises(JudgeUnavailable, match="after 1 retries"):
        load_judge(write_judge(tmp_path / "b", fake_judge.url, max_retries=1)).grade(Q, "5")


def test_a_refusal_names_the_judge_and_never_the_key(fake_judge, tmp_path, monkeypatch):
    monkeypatch.setenv("JUDGE_TEST_KEY", "sk-judge-Secret-0123456789abcdef")
    fake_judge.answer = lambda content: (401, "bad key sk-judge-Secret-0123456789abcdef")
    judge = load_judge(write_judge(tmp_path, fake_judge.url, api_key_env="JUDGE_TEST_KEY"))
    with pytest.raises(JudgeRefused) as err:
        judge.grade(Q, "4")
    assert "fake-judge" in str(err.value) and "Secret-0123" not in str(err.value)
    assert fake_judge.bodies[0]["_auth"] == "Bearer sk-judge-Secret-0123456789abcdef"


@pytest.mark.parametrize(
    "edit, message",
    [
        ({"rubric": "missing.j2"}, "rubric file not found"),
        ({"api_key_env": "TUNELOOP_UNSET_JUDGE_KEY"}, "TUNELOOP_UNSET_JUDGE_KEY is not set"),
        ({"endpoint": "ftp://x"}, "endpoint"),
        ({"mode": "vote"}, "mode"),
    ],
)
def test_bad_judge_files_are_one_clear_error(tmp_path, edit, message):
    path = write_judge(tmp_path, "http://127.0.0.1:9")
    text = path.read_text()
    for key, value in edit.items():
        lines = [line for line in text.splitlines() if not line.startswith(f"{key}:")]
        text = "\n".join(lines + [f"{key}: {value}"]) + "\n"
    path.write_text(text)
    with pytest.raises(InputError, match=message) as err:
        load_judge(path)
    assert str(path) in str(err.value)


def test_a_rubric_with_an_unknown_variable_fails_at_load(tmp_path):
    path = write_judge(tmp_path, "http://127.0.0.1:9")
    (tmp_path / "grade.j2").write_text("Grade {{ answer_text }}\n")
    with pytest.raises(InputError, match="grade.j2.*answer_text"):
        load_judge(path)


_WORKER = """
import sys
from pathlib import Path
from tuneloop.scorers.judge import load_judge
judge = load_judge(Path(sys.argv[1]))
for i in range(40):
    judge.grade([{"role": "user", "content": f"q{i}"}], str(i), reference=str(i))
    print(i, flush=True)
"""


def test_judgements_survive_kill_9_and_resume(fake_judge, tmp_path):
    def slow(content: str) -> tuple[int, str]:
        time.sleep(0.02)
        return honest(content)

    fake_judge.answer = slow
    path = write_judge(tmp_path, fake_judge.url)
    proc = subprocess.Popen(
        [sys.executable, "-c", _WORKER, str(path)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    for _ in range(10):
        proc.stdout.readline()
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    asked_before = fake_judge.calls
    assert 10 <= asked_before < 40
    judge = load_judge(path)
    got = [
        judge.grade([{"role": "user", "content": f"q{i}"}], str(i), reference=str(i))
        for i in range(40)
    ]
    assert all(g.value == 1.0 for g in got)
    assert sum(g.cached for g in got) >= 10
    assert fake_judge.calls - asked_before == sum(not g.cached for g in got)  # nothing asked twice
