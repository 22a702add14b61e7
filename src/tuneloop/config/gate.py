"""The `gate:` section of loop.yaml: the pre-registered bar (margin, α, test, non-inferiority),
its cost condition (`gate.cost`) and the flywheel's error budget (`gate.sequence`).

A model only, a docstring under each field (as `config.models`); the decision itself is
`tuneloop.gate`'s.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from tuneloop.config.base import ConfigPath, Section


class CostBarConfig(Section):
    """The bar's cost condition (`gate.cost`): what the challenger's answers may cost.

    An arm's figure is its mean cost per item on the gate slice (an item's cost: the mean
    `cost_usd` of its samples; `tuneloop.gate.cost`). Set at least one key; with both, both
    must hold."""

    max_usd_per_item: float | None = Field(default=None, gt=0, strict=True)
    """The challenger's mean cost per item, in dollars, at most this; None: no absolute limit."""
    max_ratio_to_champion: float | None = Field(default=None, gt=0, strict=True)
    """The challenger's mean cost per item at most this × the champion's on the same items
    (0.6: at least 40% cheaper); None: no limit relative to the champion."""

    @model_validator(mode="after")
    def _one_limit(self) -> CostBarConfig:
        if self.max_usd_per_item is None and self.max_ratio_to_champion is None:
            raise ValueError(
                "gate.cost needs max_usd_per_item, max_ratio_to_champion or both; "
                "leave gate.cost out for no cost condition"
            )
        return self


class BarConfig(Section):
    """The pre-registered promotion bar (the gate's `Bar`; a `--bar` file has these keys)."""

    metric: Literal["mean", "pass_at_k"] = "mean"
    """Mean item score (pass@1 estimate) or pass@k."""
    k: int = Field(default=1, gt=0, strict=True)
    """k for pass_at_k; must not exceed the samples per item."""
    margin: float = Field(default=0.0, ge=0, strict=True)
    """Minimum practical improvement Δ (absolute, on the metric's scale)."""
    alpha: float = Field(default=0.05, gt=0, lt=0.5, strict=True)
    """Significance level of the one-sided test, in (0, 0.5) (as the gate's sealed bar); with
    `gate.sequence`, the whole sequence's α, of which each round's bar gets its α_k."""
    test: Literal["permutation", "sign"] = "permutation"
    """Paired test used for significance: `permutation` (paired sign-flip) or `sign`."""
    non_inferiority_epsilon: float | None = Field(default=None, gt=0, strict=True)
    """If set, no tag may regress by more than this with confidence."""
    min_items: int = Field(default=30, gt=0, strict=True)
    """Fewest items the slice must have."""
    max_missing_fraction: float = Field(default=0.02, ge=0, le=1, strict=True)
    """Largest fraction of unscored samples (missing or harness error) in either arm."""
    scorer: str | None = None
    """Judge on this scorer's output (an item's own scorer or one of `eval.metrics`, e.g.
    `tool_call_valid`); None: each item's own scorer."""
    cost: CostBarConfig | None = None
    """A cost condition: the challenger's mean cost per item (the sample rows' `cost_usd`:
    `eval.usd_per_1m`, or what a cascade reports) within an absolute limit and/or a ratio to
    the champion's; sealed with the bar. None: cost is not judged."""


SequenceRule = Literal["alpha_spending", "lord"]
"""How the rounds of one ledger share `gate.alpha` (`gate.sequence.rule`)."""


class SequenceConfig(Section):
    """The flywheel's error budget (`gate.sequence`): one α for the whole sequence of rounds
    that gate in one ledger, shared out round by round (`tuneloop.gate.sequence`; docs/gate.md
    "The flywheel's error budget"). `gate.sequence: alpha_spending` (or `lord`) is short for
    `gate.sequence: {rule: alpha_spending}`."""

    rule: SequenceRule
    """`alpha_spending`: round k gets α_k from `series`, a series declared in advance whose
    sum is at most gate.alpha, so P(any false promotion over every round) ≤ gate.alpha (the
    union bound). `lord`: LORD++ (Ramdas et al. 2017): each round's α is earned back by the
    promotions before it; bounds the false discovery rate at gate.alpha (and, when no
    challenger is truly better, P(any false promotion) ≤ `w0`)."""
    series: Literal["basel", "geometric", "uniform"] = "basel"
    """alpha_spending's series: `basel` α·6/(π²k²), `geometric` α(1 − ratio)·ratio^(k−1), or
    `uniform` α/horizon for the first `horizon` rounds and nothing after."""
    ratio: float = Field(default=0.5, gt=0, lt=1, strict=True)
    """The `geometric` series' ratio, in (0, 1)."""
    horizon: int | None = Field(default=None, gt=0, strict=True)
    """The `uniform` series' number of rounds (required there); round horizon + 1 is refused."""
    w0: float | None = Field(default=None, gt=0, lt=0.5, strict=True)
    """LORD's initial wealth, at most gate.alpha; None: gate.alpha / 2."""

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: object) -> object:
        """`gate.sequence: lord` is `{rule: lord}`."""
        return {"rule": data} if isinstance(data, str) else data

    @model_validator(mode="after")
    def _keys_of_the_rule(self) -> SequenceConfig:
        given = self.model_fields_set
        lord_only, spending_only = {"w0"}, {"series", "ratio", "horizon"}
        wrong = sorted(given & (spending_only if self.rule == "lord" else lord_only))
        if wrong:
            keys = ", ".join(wrong)
            raise ValueError(f"{keys}: not a setting of rule {self.rule!r}")
        if self.rule == "alpha_spending":
            if self.series == "uniform" and self.horizon is None:
                raise ValueError(
                    "horizon: series 'uniform' splits gate.alpha over a declared "
                    "number of rounds; set horizon (e.g. 20)"
                )
            if self.horizon is not None and self.series != "uniform":
                raise ValueError(
                    f"horizon: only the 'uniform' series has one (the series is {self.series!r})"
                )
            if "ratio" in given and self.series != "geometric":
                raise ValueError(
                    f"ratio: only the 'geometric' series has one (the series is {self.series!r})"
                )
        return self


def sequence_problem(alpha: float, sequence: SequenceConfig | None) -> str | None:
    """What is wrong with `sequence` under the sequence's α `alpha` (None: nothing): LORD's
    initial wealth may not exceed it."""
    if sequence is not None and sequence.w0 is not None and sequence.w0 > alpha:
        return (
            f"gate.sequence.w0 ({sequence.w0:g}) is LORD's initial wealth, part of the "
            f"sequence's α: it must be at most gate.alpha ({alpha:g})"
        )
    return None


class GateConfig(BarConfig):
    enabled: bool = True
    """Run the gate phase."""
    adjudicate: Literal["selected", "all"] = "selected"
    """With a `portfolio`: `selected` evaluates only the challenger the sealed selection rule
    chose on the validation slice on the gate slice; `all` evaluates every challenger on the
    gate slice and promotes the cheapest that passes the bar with α split by Holm."""
    slice: str = "gate"
    """Suite slice the decision is made on; looked at once."""
    ledger: ConfigPath | None = None
    """SQLite ledger of consumed slices, champions and verdicts; None = <workdir>/ledger.db."""
    require_approval: bool = False
    """Stop at 'awaiting approval' instead of promoting."""
    allow_slice_reuse: bool = False
    """Permit adjudicating on a consumed slice (recorded in the verdict)."""
    seed: int = 0
    """Seed of the gate's resampling (permutation p-values, bootstrap bounds); the gate's own,
    so changing `report.seed` does not change a verdict."""
    sequence: SequenceConfig | None = None
    """The flywheel's error budget: a rule that shares gate.alpha out among the rounds that
    gate in this ledger (`alpha_spending` or `lord`; see SequenceConfig), so gate.alpha
    bounds the whole sequence, and each round's sealed bar carries its own α_k. None: every
    round is tested at gate.alpha, and nothing bounds the chance of a false promotion over
    many rounds."""

    @model_validator(mode="after")
    def _sequence_within_alpha(self) -> GateConfig:
        problem = sequence_problem(self.alpha, self.sequence)
        if problem:
            raise ValueError(problem)
        return self
