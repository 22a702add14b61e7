"""The replay phase's records: one `ReplayCall` per (trace, step, teacher), and the report.

`calls.jsonl` is the replay's resumable log: a row is appended (and fsynced) as each teacher
call finishes, so a replay killed at any point resumes without paying again for a call whose
row is there. `report.json` (`ReplayReport`) is written last, from the calls alone.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from tuneloop.records.base import Record

CallStatus = Literal["ok", "malformed", "missing", "unscored", "scorer_error"]


class ReplayCall(Record):
    """One teacher's answer to one replayed assistant step."""

    KIND = "replay_call"
    VERSION = 1

    trace: str
    """The trace's key, `<source>/<source_id>`."""
    step: int
    """Index in the trace's messages of the assistant message replayed."""
    teacher: str
    """The teacher's name in the teachers file."""
    model: str
    """The model id requested."""
    request_hash: str
    """sha256 of the request sent (without the key): a row answers only the same request,
    so a changed teacher, sampling or prefix is a new call, never a reused one."""
    status: CallStatus
    """`ok` (scored), `malformed` (a 200 that is not an answer: scored 0, `error` says why),
    `missing` (retries exhausted or refused: not scored, never a failure), `unscored` (no
    verifier and no judge), `scorer_error` (the scorer raised: not scored)."""
    response: dict[str, Any] | None = None
    """The teacher's assistant message (`role`, `content`, `tool_calls`)."""
    finish_reason: str | None = None
    """As the teacher reported it."""
    score: float | None = None
    """In [0, 1]; None when not scored."""
    passed: bool | None = None
    """score ≥ the replay's pass threshold; None when not scored."""
    scorer: str | None = None
    """The verifier's or judge's registered name."""
    detail: dict[str, Any] = {}
    """What the scorer extracted and why it scored as it did."""
    error: str | None = None
    """Why the call is malformed, missing or unscored (redacted)."""
    prompt_tokens: int | None = None
    """From the response's `usage`."""
    completion_tokens: int | None = None
    """From the response's `usage`."""
    cost_usd: float | None = None
    """Tokens × the teacher's price; None without usage."""
    latency_s: float | None = None
    """Seconds from request to complete response (the successful attempt)."""


class TeacherReport(BaseModel):
    """One teacher's figures over the planned steps."""

    model_config = ConfigDict(extra="forbid")

    name: str
    """Teacher name."""
    model: str
    """Model id requested."""
    planned: int
    """Steps this teacher was asked to answer."""
    scored: int
    """Calls with a score (`ok` and `malformed`): the pass rate's denominator."""
    passed: int
    """Scored calls that passed."""
    pass_rate: float | None
    """passed / scored; None when nothing was scored."""
    wilson_ci: tuple[float, float] | None
    """95% Wilson interval of the pass rate (Wilson 1927)."""
    missing: int
    """Calls without an answer after every retry: not in the denominator."""
    malformed: int
    """Answers that were not a completion: scored 0 (in the denominator)."""
    unscored: int
    """Answers to steps with no verifier and no judge."""
    scorer_errors: int
    """Answers whose scorer raised: not in the denominator."""
    prompt_tokens: int
    """Sum over calls that reported usage."""
    completion_tokens: int
    """Sum over calls that reported usage."""
    calls_without_usage: int
    """Answered calls whose response had no usage (their cost is unknown, counted as 0)."""
    cost_usd: float
    """Cost of every answered call in the log."""
    calls_this_run: int
    """Calls answered by this invocation (the rest were reused from the log)."""
    cost_usd_this_run: float
    """Cost of the calls answered by this invocation."""
    latency_mean_s: float | None
    """Mean latency of answered calls."""
    latency_p95_s: float | None
    """95th percentile latency of answered calls (nearest rank)."""


class Agreement(BaseModel):
    """How often two teachers pass or fail the same steps alike."""

    model_config = ConfigDict(extra="forbid")

    a: str
    """First teacher."""
    b: str
    """Second teacher."""
    steps: int
    """Steps both teachers were scored on."""
    agree: int
    """Of those, steps where both passed or both failed."""
    rate: float | None
    """agree / steps; None when no step was scored by both."""


class JudgedSteps(BaseModel):
    """What the step judge (`replay.judge`) scored: the planned steps without a verifier."""

    model_config = ConfigDict(extra="forbid")

    scorer: str
    """The judge's registered scorer name (`judge`: the LLM judge)."""
    mode: str | None
    """The LLM judge's mode, `grade` or `pairwise`; None for any other scorer."""
    model: str | None
    """The LLM judge's model id; None for any other scorer."""
    rubric_sha256: str | None
    """sha256 of the LLM judge's rubric; None for any other scorer."""
    steps: int
    """Planned steps without a verifier: the judge's."""
    calls_scored: int
    """Teacher answers to those steps that the judge scored."""
    originals_scored: int
    """Original responses to those steps with a verdict (grade: graded; pairwise: faced at
    least one scored teacher answer)."""
    errors: int
    """Judgements that could not be had (teacher answers and originals; `scorer_error`):
    never a score, never a row."""
    cost_usd: float
    """What the judgements cost to make (the LLM judge's `judge_cost_usd`, cached ones
    included; 0 for a scorer that reports none)."""
    sft_rows: int
    """SFT rows written from judged steps."""
    dpo_pairs: int
    """DPO pairs written from judged steps."""


class ReplayReport(Record):
    """`report.json` of a replay: pass rates, agreement, tokens, cost, latency, yield."""

    KIND = "replay_report"
    VERSION = 1

    traces: str
    """The traces file replayed."""
    teachers_file: str
    """The teachers file."""
    steps_available: int
    """Assistant steps in the replayed traces."""
    steps_planned: int
    """Steps sampled for replay."""
    sample_fraction: float
    """As configured."""
    max_steps: int | None
    """As configured."""
    seed: int
    """As configured."""
    judge: str | None
    """Scorer for steps without a verifier."""
    judged: JudgedSteps | None = None
    """What that judge scored and what came of it; None without a judge."""
    pass_threshold: float
    """A score at least this passes."""
    teachers: list[TeacherReport]
    """Per teacher, in the teachers file's order."""
    agreement: list[Agreement]
    """Every pair of teachers."""
    original_scored: int
    """Original trace responses that were scored (the step had a verifier or a judge; a step
    judged pairwise: the original faced a scored teacher answer, and passed when none beat
    it)."""
    original_passed: int
    """Of those, how many passed."""
    sft_rows: int
    """Distillation rows written."""
    dpo_pairs: int
    """Preference pairs written."""
    tie_rule: str
    """How the SFT row's response is chosen among passing ones."""
    cost_usd: float
    """Every answered call in the log."""
    cost_usd_this_run: float
    """The calls answered by this invocation; 0 for a rerun of a finished replay."""
    calls_this_run: int
    """Calls answered by this invocation."""
    calls_reused: int
    """Calls taken from the log of an earlier (interrupted) invocation, not paid again."""
    reused_from: dict[str, int] = {}
    """Of those, the calls copied from other replays' logs (a redone loop phase's quarantined
    folder), per log path; the rest were already in this folder's log."""
    cost_per_sft_row: float | None
    """cost_usd / sft_rows."""
    cost_per_usable_row: float | None
    """cost_usd / (sft_rows + dpo_pairs)."""
