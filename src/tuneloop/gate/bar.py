"""The promotion bar: what a challenger must show, fixed before the post evaluation exists.

A bar is set in `loop.yaml` (the bar keys of the `gate:` section) or in a bar file — YAML or
JSON with the same keys — given to `tuneloop gate --bar FILE`:

    metric: mean            # or pass_at_k
    k: 1                    # for pass_at_k
    margin: 0.02            # minimum practical improvement, on the metric's scale
    alpha: 0.05             # one-sided significance level
    test: permutation       # or sign
    non_inferiority_epsilon: 0.05   # optional: no tag may regress by more than this
    min_items: 30
    max_missing_fraction: 0.02
    scorer: tool_call_valid # optional: judge on this scorer's output (default: the items' own)
    cost:                   # optional: what the challenger's answers may cost (gate.cost)
      max_usd_per_item: 0.0004      # its mean cost per item at most this, and/or
      max_ratio_to_champion: 0.6    # at most this × the champion's on the same items

    sequence: alpha_spending  # optional (gate.sequence): `alpha` is then the whole sequence's

The keys, types, bounds and defaults are `tuneloop.config.BarConfig`'s (one definition for
loop.yaml, bar files and the gate), and `sequence` is `gate.sequence`'s. Unknown keys and
out-of-range values are refused together, each naming the file, key and line. The hash goes
into the verdict and the ledger, so a verdict always says which bar it was judged against.

`Bar` adds the canonical hash and, under a sequence rule, the round's place in the sequence
(`SequenceTerm`: the rule, k, the sequence's α and what the rule's α_k depends on); its
`alpha` is then α_k, and the term is sealed and hashed with it
(`tuneloop.gate.sequence.round_bar` makes that bar).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tuneloop.config import BarConfig, load_yaml_model
from tuneloop.config.gate import SequenceConfig, SequenceRule, sequence_problem
from tuneloop.records import canonical_json, sha256_bytes

FIELDS = tuple(BarConfig.model_fields)
"""The bar's own keys (a sealed bar may carry `sequence` besides)."""


class SequenceTerm(BaseModel):
    """A round's place in the flywheel's sequence (`gate.sequence`): everything its α_k is a
    function of. Sealed with the bar (its `alpha` is α_k) and recorded in the ledger's
    `alpha_spent` table; `tuneloop.gate.sequence.term_alpha` gives α_k back from it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rule: SequenceRule
    """`alpha_spending` or `lord`."""
    k: int = Field(gt=0, strict=True)
    """The round's place in the sequence, 1-based: 1 + the rounds of this ledger sealed under
    the rule before it."""
    total_alpha: float = Field(gt=0, lt=0.5)
    """The whole sequence's α (gate.alpha)."""
    series: Literal["basel", "geometric", "uniform"] | None = None
    """alpha_spending: the declared series."""
    ratio: float | None = None
    """alpha_spending, `geometric` series: its ratio."""
    horizon: int | None = None
    """alpha_spending, `uniform` series: the rounds α is split over."""
    w0: float | None = None
    """lord: the initial wealth (gate.sequence.w0, or α/2)."""
    rejections: tuple[int, ...] | None = None
    """lord: the places k of the earlier rounds of the sequence whose verdict promoted (or
    awaits approval) by the time this bar was sealed."""

    def settings(self) -> SequenceTerm:
        """The rule as declared, without this round's place (what every round of one sequence
        shares)."""
        return self.model_copy(update={"k": 1, "rejections": None})

    def describe(self) -> str:
        """The rule in words: `alpha spending, basel series, flywheel α 0.05`."""
        if self.rule == "lord":
            how = f"LORD++, initial wealth {self.w0:g}"
        elif self.series == "uniform":
            how = f"alpha spending, uniform over {self.horizon} rounds"
        elif self.series == "geometric":
            how = f"alpha spending, geometric series (ratio {self.ratio:g})"
        else:
            how = f"alpha spending, {self.series} series"
        return f"{how}, flywheel α {self.total_alpha:g}"


class Bar(BarConfig):
    """The pre-registered promotion bar (see `tuneloop.gate.rule` for how it is applied)."""

    sequence: SequenceTerm | None = None
    """Under a sequence rule (`gate.sequence`): the round's place in the sequence, and
    `alpha` is its α_k. None: no rule; `alpha` is the round's own."""

    @classmethod
    def of(cls, section: BarConfig) -> Bar:
        """The bar keys of a section (a `GateConfig` also carries the phase's own settings)."""
        return cls.model_validate(section.model_dump(include=set(FIELDS)))

    def to_dict(self) -> dict[str, Any]:
        # `scorer` and `cost` came later: each left out while unset, so a bar sealed before it
        # keeps its hash; a limit of `cost` left unset is left out too, for the same reason
        # should `cost` ever grow a key
        later = {name for name in ("scorer", "cost") if getattr(self, name) is None}
        out = self.model_dump(include=set(FIELDS) - later)
        if self.cost is not None:
            out["cost"] = self.cost.model_dump(exclude_none=True)
        if self.sequence is not None:  # likewise: a bar without a rule keeps its hash
            out["sequence"] = self.sequence.model_dump(mode="json", exclude_none=True)
        return out

    def sha256(self) -> str:
        """Hash of the bar's canonical JSON (recorded with every verdict)."""
        return sha256_bytes(canonical_json(self.to_dict()).encode())


class BarFile(BarConfig):
    """A bar file (`tuneloop gate --bar FILE`): the bar's keys, and `gate.sequence`'s."""

    sequence: SequenceConfig | None = None
    """A sequence rule (as `gate.sequence`): `alpha` is then the whole sequence's α, and the
    round is judged at the α_k the rule gives it in the ledger."""

    @model_validator(mode="after")
    def _sequence_within_alpha(self) -> BarFile:
        problem = sequence_problem(self.alpha, self.sequence)
        if problem:
            raise ValueError(problem)
        return self


def load_bar(path: Path) -> BarFile:
    """Read a bar file (YAML or JSON; JSON is YAML) with the keys of `BarConfig` and an
    optional `sequence`; `Bar.of` it for the bar without a rule, or
    `tuneloop.gate.sequence.round_bar` for the round's bar under it."""
    return load_yaml_model(path, BarFile, "bar file")
