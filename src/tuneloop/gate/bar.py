"""The promotion bar: what a challenger must show, fixed before the post evaluation exists.

A bar is set in `loop.yaml` (the `gate:` section; the loop unpacks it into a `Bar`) or in a
bar file — YAML or JSON with the same keys — given to `tuneloop gate --bar FILE`:

    metric: mean            # or pass_at_k
    k: 1                    # for pass_at_k
    margin: 0.02            # minimum practical improvement, on the metric's scale
    alpha: 0.05             # one-sided significance level
    test: permutation       # or sign
    non_inferiority_epsilon: 0.05   # optional: no tag may regress by more than this
    min_items: 30
    max_missing_fraction: 0.02

Unknown keys and out-of-range values are refused together, each naming the file and key.
The bar's canonical hash goes into the verdict and the ledger, so a verdict always says
which bar it was judged against.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuneloop.config import read_yaml
from tuneloop.errors import InputError
from tuneloop.records import canonical_json, sha256_bytes
from tuneloop.registry import did_you_mean

METRICS = ("mean", "pass_at_k")
TESTS = ("permutation", "sign")


@dataclass(frozen=True)
class Bar:
    """The pre-registered promotion bar (see `tuneloop.gate.rule` for how it is applied)."""

    metric: str = "mean"
    """`mean` (mean item score, the pass@1 estimate) or `pass_at_k`."""
    k: int = 1
    """k for `pass_at_k`; must not exceed the samples per item."""
    margin: float = 0.0
    """Minimum practical improvement: the point Δ must reach it."""
    alpha: float = 0.05
    """Significance level of the one-sided paired test (challenger > champion)."""
    test: str = "permutation"
    """`permutation` (paired sign-flip test) or `sign` (exact sign test on item wins/losses)."""
    non_inferiority_epsilon: float | None = None
    """If set, every tag's one-sided (1-alpha) lower bound on Δ must exceed -epsilon."""
    min_items: int = 30
    """Fewest items the slice must have."""
    max_missing_fraction: float = 0.02
    """Largest fraction of unscored samples (missing or harness error) in either arm."""

    def __post_init__(self) -> None:
        problems = bar_problems(dataclasses.asdict(self))
        if problems:
            raise InputError("invalid bar: " + "; ".join(problems))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def sha256(self) -> str:
        """Hash of the bar's canonical JSON (recorded with every verdict)."""
        return sha256_bytes(canonical_json(self.to_dict()).encode())


def bar_problems(values: dict[str, Any]) -> list[str]:
    """Every problem with a bar's values, as `key: expected …, got …` strings."""
    out: list[str] = []

    def bad(key: str, expected: str) -> None:
        out.append(f"{key}: expected {expected}, got {values.get(key)!r}")

    if values.get("metric") not in METRICS:
        bad("metric", " or ".join(METRICS))
    if values.get("test") not in TESTS:
        bad("test", " or ".join(TESTS))
    if not _is_int(values.get("k")) or values["k"] < 1:
        bad("k", "an integer ≥ 1")
    if not _is_int(values.get("min_items")) or values["min_items"] < 1:
        bad("min_items", "an integer ≥ 1")
    if not _is_num(values.get("margin")) or values["margin"] < 0:
        bad("margin", "a number ≥ 0")
    if not _is_num(values.get("alpha")) or not 0 < values["alpha"] < 0.5:
        bad("alpha", "a number in (0, 0.5)")
    fraction = values.get("max_missing_fraction")
    if not _is_num(fraction) or not 0 <= float(fraction or 0) <= 1:
        bad("max_missing_fraction", "a number in [0, 1]")
    eps = values.get("non_inferiority_epsilon")
    if eps is not None and (not _is_num(eps) or eps <= 0):
        bad("non_inferiority_epsilon", "a number > 0 or null")
    return out


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


FIELDS = tuple(f.name for f in dataclasses.fields(Bar))


def bar_from_mapping(data: dict[str, Any], where: str) -> Bar:
    """Build a Bar from a mapping; unknown keys and bad values raise one InputError."""
    problems = [
        f"{key}: unknown key{did_you_mean(str(key), FIELDS)}" for key in data if key not in FIELDS
    ]
    values = {**dataclasses.asdict(Bar()), **{k: v for k, v in data.items() if k in FIELDS}}
    problems += bar_problems(values)
    if problems:
        raise InputError(
            f"{where}: {len(problems)} error(s) in the bar\n  " + "\n  ".join(problems)
        )
    return Bar(**values)


def load_bar(path: Path) -> Bar:
    """Read a bar file (YAML or JSON; JSON is YAML) with the keys of `Bar`."""
    data, _ = read_yaml(path, "bar file")
    return bar_from_mapping(data, str(path))
