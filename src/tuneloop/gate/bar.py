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

The keys, types, bounds and defaults are `tuneloop.config.BarConfig`'s (one definition for
loop.yaml, bar files and the gate); `Bar` only adds the canonical hash. Unknown keys and
out-of-range values are refused together, each naming the file, key and line. The hash goes
into the verdict and the ledger, so a verdict always says which bar it was judged against.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tuneloop.config import BarConfig, load_yaml_model
from tuneloop.records import canonical_json, sha256_bytes

FIELDS = tuple(BarConfig.model_fields)


class Bar(BarConfig):
    """The pre-registered promotion bar (see `tuneloop.gate.rule` for how it is applied)."""

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
        return out

    def sha256(self) -> str:
        """Hash of the bar's canonical JSON (recorded with every verdict)."""
        return sha256_bytes(canonical_json(self.to_dict()).encode())


def load_bar(path: Path) -> Bar:
    """Read a bar file (YAML or JSON; JSON is YAML) with the keys of `BarConfig`."""
    return load_yaml_model(path, Bar, "bar file")
