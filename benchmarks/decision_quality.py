"""Measured decision quality of the gate rule against two common peers, on simulated rounds.

Run:  .venv/bin/python benchmarks/decision_quality.py [--rounds 2000] [--items 100]
          [--samples 4] [--beta-a 0.5] [--beta-b 0.5] [--alpha 0.05] [--seed 0]

Simulation. Each round draws a fresh gate slice of `--items` items whose true champion
pass rates p_i ~ Beta(a, b) (the default Beta(0.5, 0.5) piles items near 0 and 1, as real
eval suites do), and `--samples` Bernoulli samples per item per arm. A/A rounds: the
challenger has exactly the champion's p_i (only sampling noise differs), so any promotion is
a false promotion. A/B rounds: the challenger's rates are expit(logit p_i + s), with s chosen
so that the mean true improvement equals the MDE the report would state for this slice
(`tuneloop.stats.min_detectable_effect`, one-sided α, power 0.8, with the sd of item
differences a report would observe at that effect, from a 200,000-item pilot).

Methods, all applied to the same simulated item scores in each round:
- **tuneloop gate** — `tuneloop.gate.rule.decide` with margin 0 and each paired test
  (permutation; sign). Called on arrays, not files. The permutation test is exact here (item
  means of m binary samples lie on a 1/m lattice), so no resample count is involved.
- **lm-eval comparator** — the unpaired z-test of lm-eval's `scripts/model_comparator.py`:
  z = (acc_B − acc_A) / √(se_A² + se_B²), se = sd(item scores)/√n, two-sided p; promote when
  z > 0 and p < α.
- **MLflow MetricThreshold** — point-estimate gate: promote iff mean_B ≥ mean_A + threshold
  (`min_absolute_change`), with threshold 0 and 0.02.

Printed: the false-promotion rate (A/A), the power at the reported MDE (A/B), and the items
each method needs for 80% power at that same effect (simulated on a grid of slice sizes and
interpolated in log n), with the Monte Carlo standard error of the rates.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

import numpy as np
from rich.console import Console
from rich.progress import Progress
from rich.table import Table
from scipy.special import expit, logit
from scipy.stats import norm

from tuneloop.gate import Bar, decide
from tuneloop.stats import items_needed, min_detectable_effect

Method = Callable[[np.ndarray, np.ndarray, float], bool]
GRID = (10, 25, 50, 75, 100, 150, 200, 300, 400, 600, 800, 1200, 1600)


def ours(test: str) -> Method:
    def gate(a: np.ndarray, b: np.ndarray, alpha: float) -> bool:
        bar = Bar(alpha=alpha, test=test, min_items=1)
        return decide(a, b, bar=bar, bound=False).promote

    return gate


def lm_eval_z(a: np.ndarray, b: np.ndarray, alpha: float) -> bool:
    n = len(a)
    se = math.sqrt(a.var(ddof=1) / n + b.var(ddof=1) / n)
    if se == 0:
        return False
    z = (b.mean() - a.mean()) / se
    return bool(z > 0 and 2 * norm.sf(abs(z)) < alpha)


def threshold(t: float) -> Method:
    def gate(a: np.ndarray, b: np.ndarray, alpha: float) -> bool:
        return bool(b.mean() >= a.mean() + t - 1e-12)

    return gate


METHODS: dict[str, Method] = {
    "tuneloop gate (permutation)": ours("permutation"),
    "tuneloop gate (sign)": ours("sign"),
    "lm-eval z-test (unpaired)": lm_eval_z,
    "MLflow threshold ≥ +0": threshold(0.0),
    "MLflow threshold ≥ +0.02": threshold(0.02),
}


def draw_round(
    rng: np.random.Generator, n: int, m: int, a: float, b: float, shift: float
) -> tuple[np.ndarray, np.ndarray]:
    """One round's item scores (mean of m binary samples) for champion and challenger."""
    p = rng.beta(a, b, size=n)
    q = p if shift == 0 else expit(logit(np.clip(p, 1e-9, 1 - 1e-9)) + shift)
    return rng.binomial(m, p) / m, rng.binomial(m, q) / m


def true_delta(shift: float, a: float, b: float, rng: np.random.Generator) -> float:
    p = np.clip(rng.beta(a, b, size=400_000), 1e-9, 1 - 1e-9)
    return float((expit(logit(p) + shift) - p).mean())


def shift_for(delta: float, a: float, b: float, seed: int) -> float:
    """Logit shift whose mean true improvement is `delta` (bisection, common random numbers)."""
    lo, hi = 0.0, 5.0
    for _ in range(40):
        mid = (lo + hi) / 2
        if true_delta(mid, a, b, np.random.default_rng(seed)) < delta:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def reported_mde(args: argparse.Namespace) -> tuple[float, float, float]:
    """The MDE a report on this slice would state, at the effect it describes (fixed point).

    The report computes the MDE from the sd of the observed item differences, which under an
    improvement is a little larger than under A/A; iterate sd → MDE → shift → sd to agree.
    """
    shift = 0.0
    for _ in range(4):
        rng = np.random.default_rng(args.seed + 99)
        champ, chall = draw_round(rng, 200_000, args.samples, args.beta_a, args.beta_b, shift)
        sd_diff = float((chall - champ).std(ddof=1))
        mde = min_detectable_effect(args.items, sd_diff, args.alpha, 0.8, two_sided=False)
        shift = shift_for(mde, args.beta_a, args.beta_b, args.seed)
    return sd_diff, mde, shift


def rates(
    n: int,
    m: int,
    args: argparse.Namespace,
    shift: float,
    seed: int,
    progress: Progress,
    label: str,
) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    hits = dict.fromkeys(METHODS, 0)
    task = progress.add_task(label, total=args.rounds)
    for _ in range(args.rounds):
        champ, chall = draw_round(rng, n, m, args.beta_a, args.beta_b, shift)
        for name, method in METHODS.items():
            hits[name] += method(champ, chall, args.alpha)
        progress.advance(task)
    progress.remove_task(task)
    return {name: h / args.rounds for name, h in hits.items()}


def crossing(powers: list[float], grid: tuple[int, ...], target: float = 0.8) -> str:
    """Smallest n reaching `target` power, interpolated in log n between grid points."""
    for i, pw in enumerate(powers):
        if pw >= target:
            if i == 0:
                return f"≤ {grid[0]}"
            lo, hi = powers[i - 1], pw
            frac = (target - lo) / (hi - lo) if hi > lo else 1.0
            n = math.exp(math.log(grid[i - 1]) + frac * (math.log(grid[i]) - math.log(grid[i - 1])))
            return f"≈ {round(n)}"
    return f"> {grid[-1]}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=2000)
    ap.add_argument("--items", type=int, default=100)
    ap.add_argument("--samples", type=int, default=4)
    ap.add_argument("--beta-a", type=float, default=0.5)
    ap.add_argument("--beta-b", type=float, default=0.5)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--grid-rounds", type=int, default=1000, help="rounds per grid point")
    args = ap.parse_args()
    console = Console(width=130)
    n, m = args.items, args.samples

    sd_diff, mde, shift = reported_mde(args)
    console.print(
        f"slice {n} items × {m} samples, p ~ Beta({args.beta_a:g}, {args.beta_b:g}), "
        f"α = {args.alpha:g}; sd of item differences {sd_diff:.4f}; reported one-sided "
        f"MDE at 80% power = {mde:.4f} (logit shift {shift:.3f})"
    )
    with Progress(console=console, transient=True) as progress:
        aa = rates(n, m, args, 0.0, args.seed + 1, progress, "A/A rounds")
        ab = rates(n, m, args, shift, args.seed + 2, progress, "A/B rounds at the MDE")
        grid_args = argparse.Namespace(**{**vars(args), "rounds": args.grid_rounds})
        curve = {name: [] for name in METHODS}  # type: dict[str, list[float]]
        for size in GRID:
            power = rates(size, m, grid_args, shift, args.seed + 3 + size, progress, f"n = {size}")
            for name in METHODS:
                curve[name].append(power[name])

    se_aa = math.sqrt(args.alpha * (1 - args.alpha) / args.rounds)
    table = Table(
        "method",
        f"false promotion (A/A, goal ≤ {args.alpha:g})",
        f"power at MDE {mde:.3f} (goal ≥ 0.8)",
        "items for 80% power",
        title=f"Decision quality, {args.rounds} A/A + {args.rounds} A/B rounds "
        f"(MC s.e. at α ≈ {se_aa:.3f}); grid {args.grid_rounds} rounds/size",
    )
    for name in METHODS:
        table.add_row(name, f"{aa[name]:.3f}", f"{ab[name]:.3f}", crossing(curve[name], GRID))
    console.print(table)
    formula = items_needed(mde, sd_diff, args.alpha, 0.8, two_sided=False)
    console.print(f"normal-approximation items for 80% power at this effect: {formula}")
    ratio = aa["MLflow threshold ≥ +0"] / max(aa["tuneloop gate (permutation)"], 1 / args.rounds)
    console.print(
        f"false-promotion ratio, MLflow threshold ≥ +0 vs tuneloop gate (permutation): {ratio:.1f}×"
    )


if __name__ == "__main__":
    main()
