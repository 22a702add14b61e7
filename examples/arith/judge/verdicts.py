"""What the demo judge answers, as pure functions: the true verdict, and its known errors.

`server.py` serves these over HTTP; tests import them to know, per input, what the judge will
say and whether that is a mistake.

    true_verdict("What is 3 + 6?", "3 + 6 = 9.")                 # True
    judge_errs(seed=0, question=q, response=r, error_rate=0.1)    # the same answer every time
    grade_answer(rubric_text, seed=0, error_rate=0.1)             # "…\\nSCORE: 1"

The true verdict: the response's final number (found as the `numeric` scorer finds it) equals
the value of the question — the reference's number when the rubric carries one (the judge is
given the answer key), else the question worked out: a symbolic expression (`37 + 45`,
`(2 + 3) * 4`) evaluated with `ast` (never `eval`), or a two-number question in words (the
suite's phrasings and the traffic simulator's stories: "the sum of", "take away", "how many
are left", …). A question it cannot work out has no correct answer: every response fails.

The errors are known: the verdict is flipped for the inputs whose hash of (seed, question,
response) falls below `error_rate`, so the same input always gets the same judgement and a test
can say which judgements are wrong. The question in the hash is the last `user:` block of the
rubric's QUESTION section (how `tuneloop.scorers.judge.prompt_text` renders a conversation),
whitespace collapsed, so `question_key("user: What is 3 + 6?") == "What is 3 + 6?"`.
Pairwise answers are the true preference (the correct answer of the two; TIE when both or
neither are), flipped to a wrong verdict at the error rate, and answered "A" regardless with
probability `position_bias`. A `prose_rate` fraction of answers (hashed with the request's seed,
so a re-ask may parse) end in prose instead of the declared line.
"""

from __future__ import annotations

import ast
import hashlib
import operator
import re
from dataclasses import dataclass

from tuneloop.scorers.numeric import extract_answer, parse_number

MARKERS = ("QUESTION:", "REFERENCE:", "RESPONSE A:", "RESPONSE B:", "RESPONSE:", "END OF INPUT")
"""Lines that open a section of a rubric (the text after a marker on its line belongs to it);
END OF INPUT closes the last one."""

_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}
_EXPRESSION = re.compile(r"[\d(][\d\s+\-*/×÷−().]*[\d)]")
_NUMBER = re.compile(r"\d+")
_SUB_WORDS = re.compile(r"minus|subtract|take away|away|difference|left|get off|fewer", re.I)
_ADD_WORDS = re.compile(r"plus|sum|add|total|more|in all|and", re.I)
_ROLE = re.compile(r"^(system|user|assistant|tool):\s?", re.M)


@dataclass(frozen=True)
class Sections:
    """The parts of a rendered rubric the judge reads; None when the marker is absent."""

    question: str | None
    reference: str | None
    response: str | None
    response_a: str | None
    response_b: str | None


def sections(text: str) -> Sections:
    """Split a rendered rubric at its marker lines (first occurrence of each)."""
    found: dict[str, list[str]] = {}
    current: str | None = None
    for line in text.splitlines():
        marker = next((m for m in MARKERS if line.startswith(m) and m not in found), None)
        if marker == "END OF INPUT":
            current = None
            found[marker] = []
            continue
        if marker is not None:
            current = marker
            found[marker] = [line[len(marker) :].strip()]
        elif current is not None:
            found[current].append(line)

    def part(marker: str) -> str | None:
        return "\n".join(found[marker]).strip() if marker in found else None

    return Sections(
        part("QUESTION:"),
        part("REFERENCE:"),
        part("RESPONSE:"),
        part("RESPONSE A:"),
        part("RESPONSE B:"),
    )


def question_key(question: str) -> str:
    """The question as asked: the last `user:` block of a rendered conversation (or the whole
    text when there is none), whitespace collapsed."""
    blocks = _ROLE.split(question)
    # re.split with one group: [before, role, text, role, text, …]
    users = [blocks[i + 1] for i in range(1, len(blocks) - 1, 2) if blocks[i] == "user"]
    text = users[-1] if users else _ROLE.sub("", question)
    return " ".join(text.split())


def evaluate_expression(text: str) -> float | None:
    """The value of an arithmetic expression (+ − × ÷, parentheses, integers), or None."""
    source = text.replace("×", "*").replace("÷", "/").replace("−", "-")
    try:
        tree = ast.parse(source.strip(), mode="eval")
    except SyntaxError:
        return None
    try:
        return _value(tree.body)
    except (ValueError, ZeroDivisionError, OverflowError):
        return None


def _value(node: ast.AST) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        if isinstance(node.value, bool):
            raise ValueError("not a number: a boolean")
        return float(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        inner = _value(node.operand)
        return -inner if isinstance(node.op, ast.USub) else inner
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _BINARY[type(node.op)](_value(node.left), _value(node.right))
    raise ValueError(f"not arithmetic: {ast.dump(node)[:60]}")


def question_value(question: str) -> float | None:
    """What the question asks for (module docstring), or None when it cannot be worked out."""
    text = question_key(question)
    for candidate in reversed(_EXPRESSION.findall(text)):
        if re.search(r"\d\s*[+\-*/×÷−]\s*[\d(]", candidate):
            value = evaluate_expression(candidate)
            if value is not None:
                return value
    numbers = [int(n) for n in _NUMBER.findall(text)]
    if len(numbers) != 2:
        return None
    if _SUB_WORDS.search(text):
        return float(abs(numbers[0] - numbers[1]))  # the suite's differences are never negative
    if _ADD_WORDS.search(text):
        return float(numbers[0] + numbers[1])
    return None


def is_correct(question: str, response: str, reference: str | None = None) -> bool:
    """Whether the response's final number is the answer (module docstring)."""
    expected = parse_number(reference) if reference else None
    if expected is None:
        expected = question_value(question)
    got, _ = extract_answer(response)
    return expected is not None and got is not None and abs(got - expected) <= 1e-6


def true_verdict(question: str, response: str, reference: str | None = None) -> bool:
    """The verdict a careful grader gives: pass when the answer is correct."""
    return is_correct(question, response, reference)


def _unit(*parts: object) -> float:
    """A number in [0, 1) from a hash of `parts`: the judge's only source of chance."""
    digest = hashlib.sha256("\x00".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def judge_errs(seed: int, question: str, response: str, error_rate: float) -> bool:
    """Whether the judge gets this (question, response) wrong: its known error."""
    return _unit(seed, "grade", question_key(question), response.strip()) < error_rate


def judge_verdict(
    question: str, response: str, reference: str | None, *, seed: int, error_rate: float
) -> bool:
    """What the judge says of a response: the true verdict, flipped where it errs."""
    truth = true_verdict(question, response, reference)
    return truth != judge_errs(seed, question, response, error_rate)


def true_preference(question: str, a: str, b: str) -> str:
    """`A` or `B` when exactly one of the two is correct, else `TIE`."""
    right_a, right_b = is_correct(question, a), is_correct(question, b)
    if right_a == right_b:
        return "TIE"
    return "A" if right_a else "B"


def judge_preference(
    question: str, a: str, b: str, *, seed: int, error_rate: float, position_bias: float = 0.0
) -> str:
    """The judge's pairwise verdict: "A" with probability `position_bias` whatever the
    answers, else the true preference, made wrong at the error rate (A↔B; a TIE becomes A or
    B by the same hash)."""
    key = question_key(question)
    if _unit(seed, "bias", key, a.strip(), b.strip()) < position_bias:
        return "A"
    truth = true_preference(question, a, b)
    chance = _unit(seed, "pairwise", key, a.strip(), b.strip())
    if chance >= error_rate:
        return truth
    if truth == "TIE":
        return "A" if chance < error_rate / 2 else "B"
    return "B" if truth == "A" else "A"


@dataclass(frozen=True)
class Behaviour:
    """How the demo judge errs; the server's command-line options."""

    seed: int = 0
    error_rate: float = 0.1
    prose_rate: float = 0.0
    position_bias: float = 0.0


def answer(rubric: str, behaviour: Behaviour, request_seed: int | None = None) -> str:
    """The judgement of a rendered rubric: a reasoning line, then `SCORE: 0|1` (grade) or
    `VERDICT: A|B|TIE` (pairwise), or prose that parses as neither."""
    s = sections(rubric)
    question = s.question or ""
    if s.response_a is not None and s.response_b is not None:
        kind, pair = "pairwise", f"{s.response_a}\x00{s.response_b}"
    elif s.response is not None:
        kind, pair = "grade", s.response
    else:
        return "I cannot find the question and the answer in this request."
    if _unit(behaviour.seed, "prose", question_key(question), pair, request_seed) < (
        behaviour.prose_rate
    ):
        return "The answer looks reasonable to me overall, though it could say more."
    if kind == "pairwise":
        verdict = judge_preference(
            question,
            s.response_a or "",
            s.response_b or "",
            seed=behaviour.seed,
            error_rate=behaviour.error_rate,
            position_bias=behaviour.position_bias,
        )
        return f"Compared both final answers with the question.\nVERDICT: {verdict}"
    passed = judge_verdict(
        question,
        s.response or "",
        s.reference,
        seed=behaviour.seed,
        error_rate=behaviour.error_rate,
    )
    return f"Checked the final answer against the question.\nSCORE: {1 if passed else 0}"
