"""The `cascade:` section of loop.yaml: the round's challenger is a cascade with this round's
trained model as one tier, its thresholds composed on a validation slice.

    serve: {challenger: cascade}
    eval: {usd_per_1m: 0.2}                  # the champion's price (a single-model arm)
    cascade:
      tiers:                                 # cheapest first; the last always answers
        - {name: small, model: trained, usd_per_1m: 0.2}
        - {name: big, path: teachers/adder, usd_per_1m: 4.0}
      signal: mean_logprob
      objective: max_accuracy_under_cost
      budget: 1.0e-6                         # $ per item
      slice: dev                             # composed here; never the gate slice
    gate: {cost: {max_usd_per_item: 1.0e-6}}

A tier is `model: trained` (this round's merged model: exactly one tier), `model: base` (the
round's base), `path:` a model folder, or an `endpoint` with `model` its name there. The `compose`
phase evaluates each tier alone on `slice` with logprobs and composes the cascade
(`tuneloop.cascade.compose`: every threshold, the frontier, the objective's choice, sealed
before the post arm is evaluated); the post arm serves the chosen cascade and the gate judges
it against the champion, with `gate.cost` if set. A round from a cascade champion
(`base_model: champion`) gets this section from the champion's descriptor
(`loop.rounds.lineage`): its tunable tier is trained, the others stay.

Models only: `tuneloop.loop.cascade` runs the phase.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from tuneloop.config.base import ConfigPath, SafeName, Section


class CascadeTierConfig(Section):
    name: SafeName
    """The tier's name in the descriptor, the traces and the tables."""
    model: str | None = None
    """`trained` (this round's merged model), `base` (the round's base model), or with
    `endpoint` the model name to request there."""
    path: ConfigPath | None = None
    """A model folder served here (resolved against the YAML's folder)."""
    endpoint: str | None = None
    """An external OpenAI-compatible endpoint (its base URL)."""
    api_key_env: str | None = None
    """The variable holding the endpoint's key."""
    usd_per_1m: float = Field(ge=0)
    """Dollars per million completion tokens."""

    @model_validator(mode="after")
    def _one_source(self) -> CascadeTierConfig:
        own = self.model in ("trained", "base")
        given = [own, self.path is not None, self.endpoint is not None]
        if sum(given) != 1 or (self.endpoint is not None and not self.model):
            raise ValueError(
                f"tier {self.name!r}: give one of `model: trained`, `model: base`, `path: "
                "FOLDER`, or `endpoint: URL` with `model: NAME`"
            )
        return self


class CascadeConfig(Section):
    tiers: list[CascadeTierConfig] = Field(min_length=2)
    """The tiers in order, cheapest first; exactly one is `model: trained`."""
    signal: Literal["mean_logprob", "min_margin", "agreement"] = "mean_logprob"
    """The confidence each tier but the last hands off on (`eval.logprobs` signals, or
    `agreement` among `eval.n_samples` samples)."""
    objective: Literal["max_accuracy_under_cost", "min_cost_non_inferior"] = (
        "max_accuracy_under_cost"
    )
    """How the thresholds are chosen on `slice`: the most accurate setting under `budget`, or
    the cheapest at least as accurate as the best single tier less `epsilon`."""
    budget: float | None = Field(default=None, gt=0)
    """Dollars per item (`max_accuracy_under_cost`)."""
    epsilon: float = Field(default=0.0, ge=0)
    """Accuracy given up against the best single tier (`min_cost_non_inferior`)."""
    slice: str = "dev"
    """The validation slice the thresholds are chosen on; never the gate slice."""
    calibrate: bool = False
    """Map each handing-off tier's signal to P(correct) by an isotonic fit on `slice` before
    choosing (the descriptor carries the maps; thresholds are then probabilities)."""
    champion: ConfigPath | None = None
    """A cascade descriptor the pre arm serves instead of `base_model` (a round from a
    cascade champion sets it: `base_model` is then its tunable tier, what training starts
    from)."""

    @model_validator(mode="after")
    def _one_trained(self) -> CascadeConfig:
        trained = [t.name for t in self.tiers if t.model == "trained"]
        if len(trained) != 1:
            raise ValueError(
                f"exactly one tier is `model: trained` (this round's model); got {trained}"
            )
        names = [t.name for t in self.tiers]
        if len(set(names)) != len(names):
            raise ValueError(f"tier names must be distinct (got {names})")
        if self.objective == "max_accuracy_under_cost" and self.budget is None:
            raise ValueError("objective max_accuracy_under_cost needs budget ($ per item)")
        return self
