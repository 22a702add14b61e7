"""The traffic simulator's schedule: who asks what, when, in which words; and its tally.

Pure and deterministic (no I/O but reading the suite files to exclude): `plan(n, seed)` is the
list of requests a simulation makes, `SimResult` counts what happened. `simulate_traffic.py`
runs a plan against a server or writes it as a scripted traffic log; run that, not this.

The drift schedule (`PHASES`): the n requests are cut into three equal phases by index, and
each question's style is drawn with that phase's weights (styles and templates are
`make_flywheel_suite.STYLES`):

    phase    symbolic  words  chatty  story   mean prompt length   mean words
    launch     0.55     0.40   0.05    0.00    ~19 characters       ~5.7
    spread     0.30     0.35   0.20    0.15    ~34                  ~8.1
    shift      0.10     0.20   0.30    0.40    ~51                  ~11.4

so the prompt-length and tag distributions of the traffic move away from what the suite's
common wordings look like, which is what the flywheel's drift trigger (PSI) watches. The phase
is a function of the request's index out of n, not of the clock: a run cut short by its time
limit stays in the early phases, so size n to what the server answers in that time.

Questions never ask a fact of `suite.jsonl` or `flywheel_suite.jsonl` (in any wording, a sum
in either order; `make_flywheel_suite.fact`): traffic becomes training data, and the gate
slices must stay unseen. A user rates an answer or not by a coin tossed in advance, whatever
the answer, so the schedule does not depend on the model.
"""

from __future__ import annotations

import functools
import random
import sys
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # sibling scripts, also when imported by the tests

import make_data as md  # noqa: E402
import make_flywheel_suite as mfs  # noqa: E402

LOOPBACK_HOSTS = ("127.0.0.1", "localhost")
DEFAULT_SUITES = (HERE / "suite.jsonl", HERE / "flywheel_suite.jsonl")


@dataclass(frozen=True)
class Phase:
    name: str
    weights: dict[str, float]
    """Probability of each style (`make_flywheel_suite.STYLE_ORDER`) in this phase."""


PHASES = (
    Phase("launch", {"symbolic": 0.55, "words": 0.40, "chatty": 0.05, "story": 0.0}),
    Phase("spread", {"symbolic": 0.30, "words": 0.35, "chatty": 0.20, "story": 0.15}),
    Phase("shift", {"symbolic": 0.10, "words": 0.20, "chatty": 0.30, "story": 0.40}),
)


@dataclass(frozen=True)
class Ask:
    """One scheduled request: who asks what, in which phase, and whether they will rate it."""

    index: int
    phase: str
    user: str
    question: mfs.Question
    rate: bool
    """Whether this user sends feedback (decided in advance, whatever the answer)."""

    @property
    def style(self) -> str:
        return self.question.style

    @property
    def prompt(self) -> str:
        return self.question.prompt


@dataclass
class PhaseStats:
    name: str
    requests: int = 0
    answered: int = 0
    correct: int = 0
    prompt_chars: int = 0
    styles: Counter[str] = field(default_factory=Counter)

    @property
    def accuracy(self) -> float | None:
        return self.correct / self.answered if self.answered else None


@dataclass
class SimResult:
    """What a simulation did; `summary()` is the one line the command prints."""

    requests: int = 0
    failures: int = 0
    feedback_sent: int = 0
    feedback_not_found: int = 0
    """Feedback answered 404: the server has no feedback endpoint (counted, not fatal)."""
    feedback_failed: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    """Why requests failed: the error class (and HTTP status) → count."""
    seconds: float = 0.0
    stopped_by: str = "count"
    """`count` (all n requests made) or `time` (the deadline came first)."""
    phases: dict[str, PhaseStats] = field(
        default_factory=lambda: {p.name: PhaseStats(p.name) for p in PHASES}
    )

    def summary(self) -> str:
        acc = ", ".join(
            f"{s.name} {_fmt(s.accuracy)} ({s.answered}/{s.requests})"
            for s in self.phases.values()
            if s.requests
        )
        errors = f"errors {dict(sorted(self.errors.items()))}; " if self.errors else ""
        return (
            f"simulate: {self.requests} requests, {self.failures} failed; feedback "
            f"{self.feedback_sent} sent, {self.feedback_not_found} not found (404), "
            f"{self.feedback_failed} failed; accuracy seen {acc or 'none'}; {errors}"
            f"{self.seconds:.1f} s, stopped by {self.stopped_by}"
        )

    def as_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k not in ("phases", "errors")}
        out["errors"] = dict(sorted(self.errors.items()))
        out["phases"] = {
            name: {
                "requests": s.requests,
                "answered": s.answered,
                "correct": s.correct,
                "accuracy": s.accuracy,
                "mean_prompt_chars": s.prompt_chars / s.requests if s.requests else None,
                "styles": dict(sorted(s.styles.items())),
            }
            for name, s in self.phases.items()
        }
        return out


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def check_loopback(url: str) -> str:
    """`url` if its host is 127.0.0.1 or localhost over http(s); else ValueError."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or parts.hostname not in LOOPBACK_HOSTS:
        raise ValueError(
            f"--base-url {url!r}: the traffic simulator only talks to a server on this machine "
            f"(http://127.0.0.1:PORT/v1 or http://localhost:PORT/v1)"
        )
    return url


def phase_of(index: int, n: int) -> Phase:
    """Phase k covers request indices [k·n/3, (k+1)·n/3)."""
    return PHASES[min(index * len(PHASES) // max(n, 1), len(PHASES) - 1)]


def suite_facts(paths: Iterable[Path] = DEFAULT_SUITES) -> set[mfs.Fact]:
    """The facts (problems, either order of a sum) of suite files, in any wording of
    `make_flywheel_suite.STYLES`."""
    found = set()
    for path in paths:
        for item in md.read_items(Path(path)):
            question = mfs.parse_question(mfs.user_prompt(item))
            found.add(mfs.fact(question.problem))
    return found


def draw_problem(rng: random.Random, exclude: set[mfs.Fact]) -> md.Problem:
    """A problem as users ask them (3 in 4 with a 2-digit operand), never a fact in `exclude`."""
    while True:
        p = md.sample_problem(rng, rng.choice(md.OPS), 2 if rng.random() < 0.75 else 1)
        if mfs.fact(p) not in exclude:
            return p


def plan(
    n: int,
    seed: int,
    feedback_rate: float = 0.5,
    exclude: set[mfs.Fact] | None = None,
    users: int = 8,
) -> list[Ask]:
    """The `n` requests of a simulation, in order; a function of its arguments only."""
    if n < 0 or not 0 <= feedback_rate <= 1 or users < 1:
        raise ValueError("need n >= 0, 0 <= feedback_rate <= 1 and users >= 1")
    exclude = suite_facts() if exclude is None else exclude
    rng = random.Random(seed)
    asks = []
    for i in range(n):
        phase = phase_of(i, n)
        style = rng.choices(mfs.STYLE_ORDER, [phase.weights[s] for s in mfs.STYLE_ORDER])[0]
        p = draw_problem(rng, exclude)
        question = mfs.Question(p, style, rng.randrange(len(mfs.STYLES[style][p.op])))
        user = f"sim-user-{rng.randrange(users)}"
        asks.append(Ask(i, phase.name, user, question, rate=rng.random() < feedback_rate))
    return asks


@functools.cache
def _numeric() -> Any:
    from tuneloop.registry import scorers

    return scorers.get("numeric")()


def is_correct(answer: str, completion: str) -> bool:
    """The suite's own `numeric` scorer decides, so "correct" means the same everywhere."""
    return _numeric()({"answer": answer}, completion).value == 1.0


def record(result: SimResult, ask: Ask, correct: bool | None) -> None:
    """Count one finished request (`correct` None: the request failed)."""
    stats = result.phases[ask.phase]
    result.requests += 1
    stats.requests += 1
    stats.prompt_chars += len(ask.prompt)
    stats.styles[ask.style] += 1
    if correct is None:
        result.failures += 1
        return
    stats.answered += 1
    stats.correct += int(correct)


def feedback_body(completion_id: str, answer: str, correct: bool) -> dict[str, str]:
    body = {"completion_id": completion_id, "verdict": "up" if correct else "down"}
    if not correct:
        body["correction"] = answer
    return body
