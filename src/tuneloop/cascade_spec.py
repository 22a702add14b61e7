"""A cascade descriptor read for serving: its tiers in order, how each hands off, and the
optional rule router.

    {"kind": "cascade", "name": "arith-cascade",
     "components": [
        {"role": "tier-1", "name": "small", "path": "small/", "usd_per_1m": 0.2,
         "signal": "mean_logprob", "threshold": -0.35, "tunable": true},
        {"role": "tier-2", "name": "big", "endpoint": "https://api.example/v1",
         "model": "big-1", "api_key_env": "BIG_KEY", "usd_per_1m": 8.0}],
     "routing": {"kind": "threshold"}}

A tier is a model folder served here (`path`, relative to the descriptor's file) or an
external OpenAI-compatible endpoint (`endpoint` + `model`, its key in `api_key_env`), with
its price per million completion tokens. Every tier but the last hands off on a confidence
`signal` below its `threshold`: `mean_logprob` (≤ 0) or `min_margin` (≥ 0) from the answer's
token log-probabilities, or `agreement` (the share of `k` samples at `temperature` that say
what the first said, in [0, 1]). A `calibration` map (isotonic, `{x, y}` as
`tuneloop.stats.calibration` fits it on validation items) turns the signal into P(correct)
first; the threshold is then in [0, 1]. At most one tier is `tunable`: the one a round from
this champion trains (`base_model: champion`).

`routing: {kind: rules, rules: [...], default: NAME}` routes before any model answers: the
first rule whose conditions all hold (`max_chars`/`min_chars` of the request's text,
`keywords`: any of them in it, case-insensitive; `tags`: any of them in the request's
`metadata.tag`) names the tier that answers, else `default`; no confidence is asked for.

`kind: workflow` is refused where descriptors are read (`gate/champion.py`). Core: read by
`tuneloop.serving` (a cascade file is served by the cascade backend, `serve/cascade/`), the
loop and `tuneloop compose`; it imports nothing but pydantic and the errors.
"""

from __future__ import annotations

import json
import math
from bisect import bisect_right
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from tuneloop.errors import InputError

Signal = Literal["mean_logprob", "min_margin", "agreement"]

SIGNAL_RANGES: dict[str, tuple[float, float]] = {
    "mean_logprob": (-math.inf, 0.0),
    "min_margin": (0.0, math.inf),
    "agreement": (0.0, 1.0),
}
"""The values each confidence signal can take (a calibrated one: [0, 1])."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Calibration(_Strict):
    """An isotonic map: the signal values fitted and P(correct) at each (non-decreasing)."""

    x: list[float] = Field(min_length=1)
    y: list[float] = Field(min_length=1)

    @model_validator(mode="after")
    def _shape(self) -> Calibration:
        if len(self.x) != len(self.y):
            raise ValueError("x and y must have one length")
        if any(b <= a for a, b in zip(self.x, self.x[1:], strict=False)):
            raise ValueError("x must be sorted and distinct")
        if any(b < a for a, b in zip(self.y, self.y[1:], strict=False)):
            raise ValueError("y must be non-decreasing (an isotonic map)")
        if not all(0.0 <= v <= 1.0 for v in self.y):
            raise ValueError("y must be probabilities in [0, 1]")
        return self

    def apply(self, signal: float) -> float:
        """The calibrated value: linear between fitted points, held beyond them — what
        `tuneloop.stats.calibration.IsotonicMap` computes (`np.interp`), in plain Python so
        that reading a descriptor loads no numpy."""
        x, y = self.x, self.y
        if signal <= x[0]:
            return y[0]
        if signal >= x[-1]:
            return y[-1]
        i = bisect_right(x, signal)  # x[i-1] <= signal < x[i]
        return y[i - 1] + (y[i] - y[i - 1]) * (signal - x[i - 1]) / (x[i] - x[i - 1])


class TierSpec(BaseModel):
    """One tier of a cascade (module docstring)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    name: str
    role: str | None = None
    path: str | None = None
    """A model folder served here (relative paths: to the descriptor's folder)."""
    sha256: str | None = None
    endpoint: str | None = None
    """An external endpoint's base URL."""
    model: str | None = None
    """The model name to request (external), or the identity a log recorded."""
    api_key_env: str | None = None
    usd_per_1m: float = Field(ge=0)
    """Dollars per million completion tokens."""
    signal: Signal | None = None
    threshold: float | None = None
    calibration: Calibration | None = None
    k: int = Field(default=5, ge=2)
    """Samples asked for `agreement`."""
    temperature: float = Field(default=0.7, gt=0)
    """Sampling temperature of the `agreement` samples."""
    tunable: bool = False
    """The tier a round from this champion trains."""

    @property
    def local(self) -> bool:
        return self.path is not None

    def range(self) -> tuple[float, float]:
        """The values this tier's (calibrated) confidence can take."""
        assert self.signal is not None
        return (0.0, 1.0) if self.calibration is not None else SIGNAL_RANGES[self.signal]


class Rule(_Strict):
    tier: str
    max_chars: int | None = Field(default=None, ge=0)
    min_chars: int | None = Field(default=None, ge=0)
    keywords: list[str] = []
    tags: list[str] = []


class Routing(_Strict):
    kind: Literal["threshold", "rules"] = "threshold"
    rules: list[Rule] = []
    default: str | None = None


class CascadeSpec(BaseModel):
    """A cascade ready to serve: its tiers in order and its routing."""

    model_config = ConfigDict(frozen=True)

    name: str
    tiers: list[TierSpec]
    routing: Routing
    descriptor_sha256: str
    """sha256 of the descriptor's canonical JSON: the cascade's identity in logs."""

    @property
    def identity(self) -> str:
        return f"{self.name}@sha256:{self.descriptor_sha256}"

    def tier(self, name: str) -> TierSpec:
        return next(t for t in self.tiers if t.name == name)


def read_cascade(descriptor: dict[str, Any], where: str, base: Path | None = None) -> CascadeSpec:
    """The cascade in a descriptor, checked (InputError naming `where` and the tier); local
    paths made absolute against `base` (the descriptor file's folder)."""
    from tuneloop.records import canonical_json, sha256_bytes

    if descriptor.get("kind") != "cascade":
        raise InputError(f"{where}: kind {descriptor.get('kind', 'single')!r} is not a cascade")
    raw = descriptor.get("components")
    if not isinstance(raw, list) or len(raw) < 2:
        raise InputError(f"{where}: a cascade needs at least two tiers under 'components'")
    tiers = []
    for i, c in enumerate(raw):
        label = f"{where}: tier {i + 1}"
        if not isinstance(c, dict):
            raise InputError(f"{label}: expected a mapping")
        c = {**c, "name": c.get("name") or c.get("role")}
        label = f"{where}: tier {c['name']!r}"
        try:
            tier = TierSpec.model_validate(c)
        except ValidationError as err:
            first = err.errors()[0]
            loc = ".".join(str(p) for p in first["loc"]) or "(tier)"
            raise InputError(f"{label}: {loc}: {first['msg']}") from None
        if (tier.path is None) == (tier.endpoint is None):
            raise InputError(f"{label}: give either 'path' (a model folder) or 'endpoint'")
        if tier.endpoint is not None and not tier.model:
            raise InputError(f"{label}: an endpoint tier needs 'model' (the name to request)")
        if tier.path is not None and base is not None and not Path(tier.path).is_absolute():
            tier = tier.model_copy(update={"path": str((base / tier.path).resolve())})
        tiers.append(tier)
    names = [t.name for t in tiers]
    if len(set(names)) != len(names):
        raise InputError(f"{where}: tier names must be distinct (got {names})")
    if sum(t.tunable for t in tiers) > 1:
        raise InputError(f"{where}: at most one tier is tunable")
    routing = _routing(descriptor.get("routing"), names, where)
    if routing.kind == "threshold":
        for tier in tiers[:-1]:
            _check_hand_off(tier, where)
    digest = sha256_bytes(canonical_json(descriptor).encode())
    name = descriptor.get("name") or "cascade"
    return CascadeSpec(name=str(name), tiers=tiers, routing=routing, descriptor_sha256=digest)


def load_cascade(path: Path) -> CascadeSpec:
    """A cascade descriptor file (JSON), read with `read_cascade`."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as err:
        raise InputError(f"{path}: cannot read a cascade descriptor: {err}") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: a cascade descriptor is a JSON object")
    return read_cascade(data, str(path), base=Path(path).resolve().parent)


def is_cascade_file(model: str | Path) -> bool:
    """Whether `model` names a cascade descriptor file rather than a model folder."""
    path = Path(model)
    if path.suffix != ".json" or not path.is_file():
        return False
    try:
        return json.loads(path.read_text()).get("kind") == "cascade"
    except (OSError, ValueError, AttributeError):
        return False


def _check_hand_off(tier: TierSpec, where: str) -> None:
    label = f"{where}: tier {tier.name!r}"
    if tier.signal is None or tier.threshold is None:
        raise InputError(
            f"{label}: every tier but the last needs 'signal' ({', '.join(SIGNAL_RANGES)}) "
            "and 'threshold'"
        )
    low, high = tier.range()
    if not low <= tier.threshold <= high:
        what = "calibrated " if tier.calibration is not None else ""
        raise InputError(
            f"{label}: threshold {tier.threshold:g} is outside {what}{tier.signal}'s range "
            f"[{low:g}, {high:g}]"
        )


def _routing(raw: Any, names: list[str], where: str) -> Routing:
    try:
        routing = Routing.model_validate(raw or {})
    except ValidationError as err:
        first = err.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "(routing)"
        raise InputError(f"{where}: routing.{loc}: {first['msg']}") from None
    if routing.kind == "rules":
        if routing.default is None:
            raise InputError(f"{where}: routing.default: a rule router needs a default tier")
        for named in [routing.default, *(r.tier for r in routing.rules)]:
            if named not in names:
                raise InputError(f"{where}: routing names tier {named!r}, not one of {names}")
    return routing
