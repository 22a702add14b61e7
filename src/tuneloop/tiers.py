"""What a served cascade says about how it answered: the tier, each tier's confidence, latency
and cost — on the wire, in the sample log and in the traffic log alike.

A cascade server (`tuneloop serve CASCADE.json`, `tuneloop.serve.cascade`) answers an ordinary
OpenAI-compatible request and adds, beside `choices`, one field (clients ignore fields they do
not know; the OpenAI Python client keeps it in `model_extra`):

    "tuneloop_cascade": {
      "tier": "small",                     # the tier whose answer this is
      "cost_usd": 1.6e-06,                 # every tier asked, summed
      "route": "threshold",                # or "rule 2" / "default" for a rule router
      "steps": [                           # every tier asked, in order
        {"name": "small", "signal": "mean_logprob", "confidence": -0.08,
         "threshold": -0.35, "kept": true, "latency_s": 0.031,
         "completion_tokens": 4, "cost_usd": 1.6e-06}]}

and the header `x-tuneloop-tier: small`. `confidence` is the value compared with the
threshold: the signal itself, or its calibrated value when the tier has a calibration map
(then `raw` holds the signal). The last tier asked, and a tier a rule chose, keeps without a
test: its `signal`, `confidence` and `threshold` are null.

Plain pydantic models and two names; nothing else of ours is imported, so the sample log,
the eval client, the traffic log and the cascade server all read one definition.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

CASCADE_FIELD = "tuneloop_cascade"
"""The response body's field that carries a `CascadeTrace`."""
TIER_HEADER = "x-tuneloop-tier"
"""The response header that names the tier that answered."""


class TierStep(BaseModel):
    """One tier asked for one request."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    signal: str | None = None
    """The confidence signal the tier hands off on; None when it kept without a test."""
    confidence: float | None = None
    """The value compared with `threshold` (calibrated when the tier has a map)."""
    raw: float | None = None
    """The signal before calibration, when a calibration map was applied."""
    threshold: float | None = None
    kept: bool
    """Whether this tier's answer was returned (False: handed off to the next tier)."""
    latency_s: float
    completion_tokens: int | None = None
    cost_usd: float
    """This tier's completion tokens × its price per token."""


class CascadeTrace(BaseModel):
    """How one request was answered by a cascade (module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tier: str
    """The tier whose answer was returned."""
    cost_usd: float
    """Every tier asked, summed."""
    route: str = "threshold"
    """`threshold` (asked in order, handed off below a threshold), or for a rule router the
    rule that chose the tier (`rule N`, `default`)."""
    steps: list[TierStep]

    @property
    def tier_index(self) -> int:
        """Position of the answering tier among the steps (0 = the first asked)."""
        return [s.name for s in self.steps].index(self.tier)


def read_trace(body: Any) -> CascadeTrace | None:
    """The trace in a parsed response body; None when there is none. A malformed one raises
    ValueError (untrusted output: the caller decides what that means)."""
    if not isinstance(body, dict) or body.get(CASCADE_FIELD) is None:
        return None
    try:
        return CascadeTrace.model_validate(body[CASCADE_FIELD])
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ValueError(f"{CASCADE_FIELD}.{where}: {first['msg']}") from None
