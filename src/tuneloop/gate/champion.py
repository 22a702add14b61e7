"""Champion descriptors: what is in service, as data.

A descriptor says what the champion *is* — one checkpoint (`single`), or an architecture of
several parts (`cascade`: try components in order and escalate) — so that a promotion records
a whole system, not a bare path. `workflow` (components wired by roles into a fixed graph) is
named so that it is refused with a clear error, not accepted and ignored: it is not supported
yet. Each version in the
ledger holds one descriptor; promotion adds a version, nothing is overwritten.

    {"kind": "single", "path": "runs/loop/merge/model", "sha256": "…",
     "model": "merged@sha256:…", "run_id": "loop-20261129-…", "archive": "archive/loop-…"}

    {"kind": "cascade", "name": "…", "components": [
        {"name": "small", "path": "small/", "usd_per_1m": 0.2, "signal": "mean_logprob",
         "threshold": -0.37, "tunable": true},
        {"name": "large", "model": "gpt-large", "endpoint": "https://…", "usd_per_1m": 4.0}]}

A cascade whose tiers carry prices is checked as `tuneloop.cascade_spec` reads it for serving
(signals, thresholds in range, calibration maps, one tunable tier), so the ledger never holds
a cascade that cannot be served.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from tuneloop.cascade_spec import read_cascade
from tuneloop.errors import InputError


class Component(BaseModel):
    """One part of a cascade or workflow."""

    model_config = ConfigDict(extra="allow")

    role: str | None = None
    """What the part does in the architecture (`draft`, `fallback`, `tier-1`, …)."""
    path: str | None = None
    """Checkpoint folder, when the part is a local model."""
    sha256: str | None = None
    """Hash of the checkpoint folder."""
    model: str | None = None
    """Served model name, when the part is an endpoint."""


class ChampionDescriptor(BaseModel):
    """A versioned description of the model (or system of models) in service."""

    model_config = ConfigDict(extra="allow")

    kind: Literal["single", "cascade", "workflow"] = "single"
    """`single` checkpoint, or an architecture of `components`."""
    path: str | None = None
    """The checkpoint folder (single)."""
    sha256: str | None = None
    """sha256 of the checkpoint folder (single)."""
    model: str | None = None
    """Model identity as served and logged (`name@sha256:…`)."""
    components: list[Component] = []
    """The parts of a cascade or workflow, in order."""
    run_id: str | None = None
    """The loop run that produced it."""
    archive: str | None = None
    """Where that run is archived."""

    @model_validator(mode="after")
    def _shape(self) -> ChampionDescriptor:
        if self.kind == "workflow":
            raise ValueError(
                "kind: workflow (a fixed multi-step graph) is not supported yet; a champion "
                "is a single model or a cascade"
            )
        if self.kind == "single" and not (self.path or self.model):
            raise ValueError("a single-model descriptor needs 'path' or 'model'")
        if self.kind != "single" and not self.components:
            raise ValueError(f"a {self.kind} descriptor needs at least one component")
        if self.kind == "cascade" and _served(self):  # a cascade that can be served
            try:
                read_cascade(self.model_dump(mode="json", exclude_none=True), "descriptor")
            except InputError as err:
                raise ValueError(str(err).removeprefix("descriptor: ")) from None
        return self


def _served(d: ChampionDescriptor) -> bool:
    """Whether the cascade's parts say how it is served (tiers with prices; `cascade_spec`),
    rather than being a plain component list recorded before cascades were served."""
    keys = ("usd_per_1m", "signal", "threshold")
    return any(k in (c.model_extra or {}) for c in d.components for k in keys)


def parse_descriptor(data: dict[str, Any], where: str) -> ChampionDescriptor:
    """Validate a descriptor mapping; errors name `where` and the field."""
    try:
        return ChampionDescriptor.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "(descriptor)"
        raise InputError(f"{where}: champion descriptor {loc}: {first['msg']}") from None


def describe(descriptor: dict[str, Any]) -> str:
    """A one-line summary for tables and the experiment log."""
    kind = descriptor.get("kind", "single")
    if kind == "single":
        name = descriptor.get("model") or descriptor.get("path") or "?"
        digest = descriptor.get("sha256")
        return f"{name}" + (f" ({digest[:12]})" if digest else "")
    parts = ", ".join(
        str(c.get("role", "?")) + "=" + str(c.get("model") or c.get("path") or "?")
        for c in descriptor.get("components", [])
    )
    return f"{kind}[{parts}]"
