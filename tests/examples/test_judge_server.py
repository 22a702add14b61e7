"""The demo judge (`examples/arith/judge/`): its true verdicts, its known error rate over many
inputs, determinism, pairwise answers and position bias, prose, refusals — through the real
server process, with the real rubric templates."""

from __future__ import annotations

import contextlib
import importlib.util
import math
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import httpx
import pytest

from tuneloop.scorers.judge import load_rubric, parse_grade, parse_verdict, prompt_text
from tuneloop.scorers.judge.parse import Unparsable

JUDGE_DIR = Path(__file__).resolve().parents[2] / "examples" / "arith" / "judge"


def _load_verdicts() -> ModuleType:
    spec = importlib.util.spec_from_file_location("arith_judge_verdicts", JUDGE_DIR / "verdicts.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


V = _load_verdicts()
HTTP = httpx.Client(timeout=10)  # one pool: a new client per request costs ~30 ms
GRADE = load_rubric(JUDGE_DIR / "rubric.j2", "grade")
PAIR = load_rubric(JUDGE_DIR / "pairwise.j2", "pairwise")


def start_judge(*args: str, env: dict[str, str] | None = None) -> tuple[subprocess.Popen, str]:
    """The server on a free port (`--port 0`), and its base URL once it answers /health."""
    proc = subprocess.Popen(
        [sys.executable, str(JUDGE_DIR / "server.py"), "--port", "0", *args],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )
    assert proc.stderr is not None
    line = proc.stderr.readline()
    found = re.search(r"on (http://[\d.]+:\d+)", line)
    if found is None:
        proc.kill()
        raise AssertionError(f"the judge did not start: {line}{proc.stderr.read()}")
    url = found.group(1)
    assert httpx.get(f"{url}/health", timeout=5).json() == {"status": "ok"}
    return proc, url


@pytest.fixture(scope="module")
def judges() -> Iterator[Callable[..., str]]:
    """`judges("--error-rate", "0")`: the URL of a server started with those options (one
    process per distinct option list, stopped at the end of the module)."""
    started: dict[tuple[str, ...], tuple[subprocess.Popen, str]] = {}

    def get(*args: str, env: dict[str, str] | None = None) -> str:
        if args not in started:
            started[args] = start_judge(*args, env=env)
        return started[args][1]

    yield get
    for proc, _ in started.values():
        proc.terminate()
        proc.wait(timeout=10)


def ask(
    url: str,
    content: str,
    *,
    model: str = "arith-judge",
    seed: int | None = None,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    body: dict[str, object] = {"model": model, "messages": [{"role": "user", "content": content}]}
    if seed is not None:
        body["seed"] = seed
    return HTTP.post(f"{url}/v1/chat/completions", json=body, headers=headers)


def grade_text(question: str, response: str, reference: str = "") -> str:
    return GRADE.grade(prompt_text([{"role": "user", "content": question}]), response, reference)


def pair_text(question: str, a: str, b: str) -> str:
    return PAIR.pairwise(prompt_text([{"role": "user", "content": question}]), a, b)


def judged(url: str, content: str, seed: int | None = None) -> str:
    reply = ask(url, content, seed=seed)
    assert reply.status_code == 200, reply.text
    return reply.json()["choices"][0]["message"]["content"]


@pytest.mark.parametrize(
    ("question", "value"),
    [
        ("What is 37 + 45?", 82),
        ("What is 45 - 12?", 33),
        ("What is (2 + 3) * 4?", 20),
        ("What is 12 minus 5?", 7),
        ("Subtract 12 from 45.", 33),
        ("How much is 9 take away 4?", 5),
        ("What is the sum of 8 and 7?", 15),
        ("Add 7 and 0.", 7),
        ("Tom has 9 apples and gives 4 of them to his sister. How many are left?", 5),
        ("A shelf holds 12 books and another holds 30. How many books are there in all?", 42),
        ("I am checking my homework. What do you get when you take 3 away from 10?", 7),
        ("Hi! Quick question: what is 6 + 7?", 13),
    ],
)
def test_question_values_of_the_suite_and_traffic_phrasings(question: str, value: int) -> None:
    assert V.question_value(f"user: {question}") == value


def test_expressions_are_parsed_never_run() -> None:
    assert V.evaluate_expression("2 * (3 + 4)") == 14
    assert V.evaluate_expression("__import__('os')") is None
    assert V.evaluate_expression("1 / 0") is None
    assert V.question_value("user: Tell me a joke.") is None
    assert V.question_key("system: Be brief.\n\nuser: What is  2 + 2?") == "What is 2 + 2?"


def test_true_verdict_uses_the_final_number_and_the_reference() -> None:
    assert V.true_verdict("What is 3 + 6?", "3 + 6 = 9")
    assert not V.true_verdict("What is 3 + 6?", "I think 9... no, 8.")
    assert V.true_verdict("What is 3 + 6?", "The answer is 10.", reference="10")  # answer key
    assert not V.true_verdict("Tell me a joke.", "42")  # nothing to check against: a fail


def test_grades_follow_the_rubric_without_errors(judges) -> None:
    url = judges("--error-rate", "0")
    right = ask(url, grade_text("What is 37 + 45?", "37 + 45 = 82. The answer is 82."))
    data = right.json()
    assert parse_grade(data["choices"][0]["message"]["content"]) == 1.0
    usage = data["usage"]
    assert usage["prompt_tokens"] == len(
        grade_text("What is 37 + 45?", "37 + 45 = 82. The answer is 82.").split()
    )
    assert usage["completion_tokens"] > 0
    assert parse_grade(judged(url, grade_text("What is 37 + 45?", "It is 81."))) == 0.0
    assert parse_grade(judged(url, grade_text("Add 4 and 5.", "9", reference="9"))) == 1.0


def _inputs(n: int) -> list[tuple[str, str]]:
    """n distinct (question, response) pairs, about half of the responses right."""
    out = []
    for i in range(n):
        a, b = 10 + i % 53, 3 + i // 53
        wrong = i % 2 == 1
        out.append((f"What is {a} + {b}?", f"The answer is {a + b + (1 if wrong else 0)}."))
    return out


def test_the_error_rate_is_the_configured_one_and_known_per_input(judges) -> None:
    url = judges("--error-rate", "0.1", "--seed", "0")
    inputs = _inputs(400)
    answers = [parse_grade(judged(url, grade_text(q, r))) == 1.0 for q, r in inputs]
    truth = [V.true_verdict(q, r) for q, r in inputs]
    assert sum(truth) == 200
    wrong = [a != t for a, t in zip(answers, truth, strict=True)]
    # each judgement is exactly the one predicted: the errors are known per input
    assert wrong == [V.judge_errs(0, q, r, 0.1) for q, r in inputs]
    # and their count is Binomial(400, 0.1): mean 40, sd 6; 3 sd either side
    assert abs(sum(wrong) - 40) <= 3 * math.sqrt(400 * 0.1 * 0.9), sum(wrong)


def test_judgements_are_deterministic_and_the_seed_picks_the_errors(judges) -> None:
    inputs = _inputs(60)
    one = judges("--error-rate", "0.3", "--seed", "1")
    again = [judged(one, grade_text(q, r)) for q, r in inputs]
    assert again == [judged(one, grade_text(q, r)) for q, r in inputs]
    other = judges("--error-rate", "0.3", "--seed", "2")
    assert again != [judged(other, grade_text(q, r)) for q, r in inputs]


def test_pairwise_prefers_the_right_answer(judges) -> None:
    url = judges("--error-rate", "0")
    q = "What is 20 - 8?"
    assert parse_verdict(judged(url, pair_text(q, "It is 12.", "It is 13."))) == "A"
    assert parse_verdict(judged(url, pair_text(q, "It is 13.", "It is 12."))) == "B"
    assert parse_verdict(judged(url, pair_text(q, "12", "It is 12."))) == "TIE"
    assert parse_verdict(judged(url, pair_text(q, "11", "13"))) == "TIE"


def test_position_bias_answers_a_regardless(judges) -> None:
    always = judges("--error-rate", "0", "--position-bias", "1")
    q = "What is 20 - 8?"
    assert parse_verdict(judged(always, pair_text(q, "It is 13.", "It is 12."))) == "A"
    half = judges("--error-rate", "0", "--position-bias", "0.5")
    pairs = [(f"What is {a} + 1?", "0", str(a + 1)) for a in range(200)]  # B always right
    says_a = sum(parse_verdict(judged(half, pair_text(*p))) == "A" for p in pairs)
    assert abs(says_a - 100) <= 3 * math.sqrt(200 * 0.25), says_a


def test_prose_does_not_parse_and_a_reask_may(judges) -> None:
    always = judges("--prose-rate", "1")
    text = judged(always, grade_text("What is 2 + 2?", "4"))
    with pytest.raises(Unparsable):
        parse_grade(text)
    sometimes = judges("--prose-rate", "0.5", "--error-rate", "0")
    content = grade_text("What is 2 + 2?", "4")
    parsed = []
    for seed in range(40):  # the request seed is in the hash: a re-ask is a new draw
        with contextlib.suppress(Unparsable):
            parsed.append(parse_grade(judged(sometimes, content, seed=seed)))
    assert 5 <= len(parsed) <= 35 and set(parsed) == {1.0}


def test_unknown_model_key_routes_and_health(judges) -> None:
    url = judges("--api-key-env", "DEMO_JUDGE_KEY", env={"DEMO_JUDGE_KEY": "sekrit"})
    content = grade_text("What is 2 + 2?", "4")
    assert ask(url, content).status_code == 401
    auth = {"Authorization": "Bearer sekrit"}
    assert ask(url, content, headers=auth).status_code == 200
    assert ask(url, content, model="gpt-x", headers=auth).status_code == 404
    assert httpx.get(f"{url}/v1/models").json()["data"][0]["id"] == "arith-judge"
    assert httpx.get(f"{url}/stats").json()["requests"] == 1
    assert httpx.post(f"{url}/v1/embeddings", json={}).status_code == 404
    bad = httpx.post(f"{url}/v1/chat/completions", content=b"{", headers=auth)
    assert bad.status_code == 400


def test_a_request_without_the_markers_gets_prose(judges) -> None:
    url = judges("--error-rate", "0")
    with pytest.raises(Unparsable):
        parse_grade(judged(url, "Is 2 + 2 = 4 right?"))


def test_the_demo_judge_file_loads() -> None:
    from tuneloop.scorers.judge import load_judge_spec

    spec = load_judge_spec(JUDGE_DIR / "judge.yaml")
    assert (spec.endpoint, spec.model, spec.mode) == (
        "http://127.0.0.1:8011",
        "arith-judge",
        "grade",
    )
    assert spec.rubric == JUDGE_DIR / "rubric.j2"
