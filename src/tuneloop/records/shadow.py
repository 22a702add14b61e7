"""The records of shadow evaluation: the pairs the proxy stores, its mirror's state, the report.

Core records (they need nothing but this package), so that the proxy that writes the pairs
(`serve/proxy/mirror.py`) and the report that judges them (`tuneloop.shadow`) never import
each other (docs/design.md, §3).

- `ShadowPair` (`tuneloop.shadow_pair/1`): one line of `<log-dir>/shadow/pairs.jsonl` — a
  live request mirrored to the challenger: its prompt messages, the champion's answer (what
  the user got) and the challenger's (never served), or the challenger's error. Scrubbed
  with the traffic log's scrubber before it reaches the disk.
- `ShadowState` (`tuneloop.shadow_state/1`): `<log-dir>/shadow/state.json`, the mirror's
  settings and counts, rewritten atomically while it runs and at shutdown.
- `ShadowReport` (`tuneloop.shadow_report/1`): `shadow-report.json`, the judged pairs'
  paired preference with its CI — diagnostic evidence beside the gate, never a promotion.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from tuneloop.records.base import Record
from tuneloop.records.judge import JudgeIdentity

SHADOW_FOLDER = "shadow"
"""Under the proxy's `--log-dir`."""
PAIRS_FILE = "pairs.jsonl"
STATE_FILE = "state.json"
REPORT_JSON = "shadow-report.json"
REPORT_MD = "shadow-report.md"


class _Row(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ShadowAnswer(_Row):
    """One side's answer to a mirrored request."""

    text: str | None
    """The assistant message's text (choice 0); None when this side failed."""
    error: str | None = None
    """Why there is no text (an HTTP status, a timeout, an unreadable body); None otherwise."""
    latency_s: float
    """Seconds from the request's arrival (champion) or the mirror's send (challenger) to the
    answer's last byte."""
    prompt_tokens: int | None = None
    """`usage.prompt_tokens`, when the server reported it."""
    completion_tokens: int | None = None
    """`usage.completion_tokens`, when the server reported it."""
    finish_reason: str | None = None
    """Choice 0's `finish_reason`."""


class ShadowPair(Record):
    """One mirrored request and both answers (a line of `pairs.jsonl`)."""

    KIND: ClassVar[str] = "shadow_pair"
    VERSION: ClassVar[int] = 1

    request_id: str
    """The champion's completion id (what the traffic log and feedback name it by), else
    `sha256:<first 16 hex of the request hash>`."""
    request_sha256: str
    """sha256 of the request body as the user sent it (what the sample is drawn from)."""
    timestamp: str
    """When the champion's answer was complete (ISO 8601, UTC)."""
    model: str | None
    """The model name the user asked for."""
    challenger_model: str
    """The name the challenger was asked for (`--shadow-model`)."""
    streamed: bool
    """Whether the user's request streamed (the challenger is always asked without)."""
    messages: list[dict[str, Any]]
    """The prompt: the request's `messages`, scrubbed."""
    champion: ShadowAnswer
    """What the user got."""
    challenger: ShadowAnswer
    """What the challenger answered (never served), or its error."""


class ShadowCounts(_Row):
    """What the mirror did with the chat-completion requests it saw."""

    mirrored: int = 0
    """Pairs stored with the challenger's answer."""
    failed: int = 0
    """Pairs stored with the challenger's error instead (timeout, 5xx, unreadable body)."""
    skipped_busy: int = 0
    """Sampled, but `--shadow-concurrency` mirrors were already in flight."""
    skipped_sampled_out: int = 0
    """Not in the sample (`--shadow-fraction`)."""
    skipped_unusable: int = 0
    """Sampled, but the champion's answer was not a complete 200 with text, or the request
    was not a JSON chat request."""
    lost: int = 0
    """Pairs that could not be written (the disk refused; the first error is in the log)."""
    in_flight: int = 0
    """Mirrors waiting for the challenger now."""


class ShadowState(Record):
    """`<log-dir>/shadow/state.json`: the mirror's settings and counts."""

    KIND: ClassVar[str] = "shadow_state"
    VERSION: ClassVar[int] = 1

    updated: str
    """When this was written (ISO 8601, UTC)."""
    challenger: str
    """The shadow upstream's base URL."""
    challenger_model: str
    """The model name the challenger is asked for."""
    fraction: float
    """The share of chat-completion requests sampled."""
    seed: int
    """The sample's seed (with the request's hash it decides membership)."""
    concurrency: int
    """Most mirrors in flight at once."""
    counts: ShadowCounts
    """What the mirror did so far."""


class ShadowReport(Record):
    """`shadow-report.json`: the paired preference of the challenger over the champion."""

    KIND: ClassVar[str] = "shadow_report"
    VERSION: ClassVar[int] = 1

    created: str
    """When the report was written (ISO 8601, UTC)."""
    pairs_file: str
    """The `pairs.jsonl` read."""
    pairs_sha256: str
    """Its sha256 at reading: the evidence."""
    challenger_models: list[str]
    """The challenger names among the judged pairs."""
    champion_models: list[str]
    """The model names users asked for among the judged pairs."""
    n_pairs: int
    """Pairs read (up to `--max-pairs`)."""
    n_judged: int
    """Pairs the judge gave a preference on: the n of every figure below."""
    n_challenger_errors: int
    """Pairs skipped because the challenger failed (no answer to judge)."""
    n_judge_errors: int
    """Pairs skipped because the judge's answer stayed unparsable or it stayed unreachable."""
    wins: int
    """Pairs where the judge preferred the challenger in both orders."""
    ties: int
    """Pairs judged a tie, or where the two orders disagreed."""
    losses: int
    """Pairs where the judge preferred the champion in both orders."""
    preference: float | None
    """(wins + ties/2) / n_judged; None when nothing was judged."""
    ci_low: float | None
    ci_high: float | None
    """The preference's interval (`ci_method`)."""
    confidence: float
    """The interval's confidence level."""
    ci_method: str
    """How the interval was computed."""
    sign_test_p: float | None
    """Exact two-sided sign test of wins against losses (ties left out)."""
    judge: JudgeIdentity
    """Who judged: model, endpoint, mode, rubric sha256."""
    judge_cost_usd: float | None
    """What the priced judgements cost (a cached one is priced as first asked); None when
    no judgement reported its usage."""
    judge_cached: int
    """Judgements served from the judge's cache."""
    banner: str
    """What this report is for: diagnostic evidence beside the gate, never a promotion."""
