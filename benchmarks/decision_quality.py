"""Measured decision quality of the gate rule against two common peers, on simulated rounds.

Run:  .venv/bin/python benchmarks/decision_quality.py [--rounds 2000] [--items 100]
          [--samples 4] [--beta-a 0.5] [--beta-b 0.5] [--alpha 0.05] [--seed 0]
          [--portfolio 4] [--validation-items 100] [--portfolio-test permutation]
          [--portfolio-only] [--sequence-flywheels 1000] [--sequence-rounds 20]
          [--sequence-test permutation] [--sequence-only]

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

Portfolio case (issue 30; `--portfolio K`, default 4, 0 skips it; `--portfolio-only` runs
only it). A round trains K challengers and must promote at most one. Each round draws a
validation slice of `--validation-items` items and a gate slice of `--items` items, both
fresh and independent (p_i ~ Beta(a, b), `--samples` samples per item per arm, as above).
Two cases, `--rounds` rounds each: all K challengers equal to the champion in truth (A/A for
every one: any promotion is false), and one of them, at a random position, better by a mean
+5 points (logit shift from `shift_for`), the others equal. Three ways to decide, on the same
draws in each round, the gate being `decide` with `Bar(alpha, test=--portfolio-test,
min_items=1)`, margin 0, exactly as above:
1. **best validation mean → fresh gate** (tuneloop's `portfolio:` with `selection.rule:
   best_mean` and `gate.adjudicate: selected`): every challenger is evaluated on the
   validation slice only; the best validation mean is selected (ties to the lower index: the
   costs are equal here) and only it is gated, once, on the gate slice.
2. **naive: best gate mean at α**: every challenger is evaluated on the gate slice, and
   the best gate mean is promoted if its one-sided test passes at α, uncorrected.
3. **adjudicate all, Holm** (tuneloop's `gate.adjudicate: all`): every challenger is
   gated on the gate slice; the K one-sided p-values (the rule's `stats["p_value"]`) are
   adjusted by `tuneloop.stats.holm_adjust`, and a challenger passes when its adjusted p is
   < α (strict, as the gate's significance condition; the exact p-values here are multiples
   of 2^-N, so at α = 0.05 `≤` gives the same counts) and its Δ > 0; the first that passes
   (equal costs: the lower index) is promoted.
Printed, with the Monte Carlo standard error of each rate: the false-promotion rate (all
equal), and in the +5-point case the rate of promoting the improved challenger (power) and of
promoting a wrong one.

Why method 1 stays ≤ α: selection reads only the validation slice, which shares no items and
no samples with the gate slice. Conditional on whichever challenger was selected, its gate
scores are a fresh draw, so the gate judges one pre-selected challenger exactly as in the
single-challenger A/A rounds above; selection on validation cannot inflate its error. Method
2 takes the maximum of K noisy comparisons on the slice that also judges them, so its error
grows toward 1 − (1 − α)^K (a little less: the K comparisons share the champion's scores).
Method 3 controls the family-wise error at α by Holm's argument, at the cost of power (the
smallest p must be below α/K). The section takes about 4 s at the defaults on 2 cores with
the exact permutation test (the whole script about 22 s without the sequence case, 43 s
with it), so `--portfolio-test sign` is there for comparison, not for speed.

Sequence case (issue 32; `--sequence-flywheels N`, default 1000, 0 skips it;
`--sequence-rounds R`, default 20; `--sequence-only` runs only it). Each gate is sound alone,
but a flywheel gates every round: over 20 rounds with no real improvement, P(any false
promotion) ≈ 1 − 0.95^20 = 64%. Each simulated flywheel runs R rounds; each round draws a
fresh gate slice (`--items` items, `--samples` samples per item per arm, p_i ~ Beta(a, b), as
above) and every method decides on those same scores with `decide` and `Bar(alpha=α_k,
test=--sequence-test, min_items=1)`, margin 0. Three ways to set α_k
(`tuneloop.stats.sequence`):
1. **no rule**: every round at α.
2. **alpha spending (basel)**: α_k = α·6/(π²k²), which sums to α over all rounds ever, so
   P(any false promotion) ≤ α by the union bound.
3. **LORD++** (Ramdas et al. 2017) with W0 = α/2, the default γ of the onlineFDR package,
   and the flywheel's own earlier promotions as its rejections; under the global null it
   keeps P(any false promotion) ≤ W0·Σ_{t ≤ R} γ_t (0.0035 for R = 20).
Two cases, N flywheels each: no true effect in any round (every promotion is false), and a
true +5 points in every round (logit shift from `shift_for`). Printed, with Monte Carlo
standard errors taken over flywheels (the rounds of one flywheel are not independent under
LORD++): P(any false promotion) and the mean number of false promotions a flywheel; the mean
per-round power at +5 points (the fraction of rounds promoted), its ratio to no rule's, and
the power at rounds 1, R/2 and R (alpha spending's decays with its level). The exact
permutation test is fast enough here (about 0.2 ms a decision on 2 cores): the section takes
about 21 s at the defaults (6 × 20,000 decisions), the whole script about 45 s.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable

import numpy as np
from rich.console import Console
from rich.progress import Progress
from rich.table import Table
from scipy.special import expit, logit
from scipy.stats import norm

from tuneloop.gate import Bar, decide
from tuneloop.stats import (
    holm_adjust,
    items_needed,
    lord_alpha,
    lord_gammas,
    min_detectable_effect,
    spending_alpha,
    spent_alpha,
)

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


PORTFOLIO_METHODS = (
    "1. best validation mean → fresh gate",
    "2. naive: best gate mean at α",
    "3. adjudicate all, Holm",
)


def challenger_rates(p: np.ndarray, shifts: np.ndarray) -> np.ndarray:
    """(K × items) true pass rates: expit(logit p + shift), exactly p where the shift is 0."""
    moved = expit(logit(np.clip(p, 1e-9, 1 - 1e-9))[None, :] + shifts[:, None])
    return np.where(shifts[:, None] == 0, p[None, :], moved)


def portfolio_round(
    rng: np.random.Generator, args: argparse.Namespace, shifts: np.ndarray, bar: Bar
) -> tuple[int, int, int, int]:
    """One portfolio round: the challenger each method promotes (-1: none), and the one the
    validation slice selected."""
    m, a, b = args.samples, args.beta_a, args.beta_b
    p_val = rng.beta(a, b, size=args.validation_items)
    validation = rng.binomial(m, challenger_rates(p_val, shifts)) / m
    p_gate = rng.beta(a, b, size=args.items)
    champion = rng.binomial(m, p_gate) / m
    # Every challenger's gate scores are drawn; method 1 reads only the selected one's, which
    # the validation draw above cannot influence (common random numbers across methods).
    gate = rng.binomial(m, challenger_rates(p_gate, shifts)) / m
    decisions = [decide(champion, row, bar=bar, bound=False) for row in gate]

    selected = int(np.argmax(validation.mean(axis=1)))  # ties: the lower index
    one = selected if decisions[selected].promote else -1

    best = int(np.argmax(gate.mean(axis=1)))
    naive = best if decisions[best].promote else -1

    adjusted = holm_adjust([d.stats["p_value"] for d in decisions])
    passed = [
        j for j, d in enumerate(decisions) if adjusted[j] < args.alpha and d.stats["delta"] > 0
    ]
    holm = passed[0] if passed else -1
    return one, naive, holm, selected


def portfolio(args: argparse.Namespace, console: Console) -> None:
    """The portfolio case: K challengers, all equal to the champion or one of them +5 points."""
    k = args.portfolio
    t0 = time.perf_counter()
    bar = Bar(alpha=args.alpha, test=args.portfolio_test, min_items=1)
    shift = shift_for(0.05, args.beta_a, args.beta_b, args.seed)
    rounds = args.rounds
    false = [0] * len(PORTFOLIO_METHODS)
    right = [0] * len(PORTFOLIO_METHODS)
    wrong = [0] * len(PORTFOLIO_METHODS)
    picked_good = 0
    with Progress(console=console, transient=True) as progress:
        rng = np.random.default_rng(args.seed + 20_001)
        task = progress.add_task(f"portfolio of {k}, all equal", total=rounds)
        for _ in range(rounds):
            *promoted, _ = portfolio_round(rng, args, np.zeros(k), bar)
            for i, j in enumerate(promoted):
                false[i] += j >= 0
            progress.advance(task)
        progress.remove_task(task)
        rng = np.random.default_rng(args.seed + 20_002)
        task = progress.add_task(f"portfolio of {k}, one +5 points", total=rounds)
        for _ in range(rounds):
            good = int(rng.integers(k))
            shifts = np.zeros(k)
            shifts[good] = shift
            *promoted, selected = portfolio_round(rng, args, shifts, bar)
            picked_good += selected == good
            for i, j in enumerate(promoted):
                right[i] += j == good
                wrong[i] += j >= 0 and j != good
            progress.advance(task)
        progress.remove_task(task)
    seconds = time.perf_counter() - t0

    def rate(hits: int) -> str:
        r = hits / rounds
        return f"{r:.3f} ± {math.sqrt(r * (1 - r) / rounds):.3f}"

    table = Table(
        "method",
        "false promotion, all equal",
        "power, one +5 pt",
        "wrong promotion, one +5 pt",
        title=f"Portfolio of {k} challengers, α = {args.alpha:g} (goal: false promotion ≤ α), "
        f"{rounds} rounds per case, rate ± MC s.e.",
        caption=f"validation {args.validation_items} items, gate {args.items} items, "
        f"{args.samples} samples per item per arm, {args.portfolio_test} test",
    )
    for i, name in enumerate(PORTFOLIO_METHODS):
        table.add_row(name, rate(false[i]), rate(right[i]), rate(wrong[i]))
    console.print(table)
    bound = 1 - (1 - args.alpha) ** k
    console.print(
        f"+5 points = logit shift {shift:.3f}; the validation slice selected the improved "
        f"challenger in {picked_good / rounds:.3f} of rounds\n1 − (1 − α)^{k} = {bound:.3f} "
        f"(method 2's rough ceiling); portfolio case: {seconds:.1f} s"
    )


SEQUENCE_METHODS = (
    "no rule: every round at α",
    "alpha spending (basel)",
    "LORD++ (W0 = α/2)",
)


def sequence_level(method: int, k: int, alpha: float, promoted: list[int]) -> float:
    """Round k's level (1-based) under each method; `promoted`: this method's earlier
    promotions in this flywheel (LORD++'s rejections)."""
    if method == 0:
        return alpha
    if method == 1:
        return spending_alpha(k, alpha, "basel")
    return lord_alpha(k, alpha, promoted, w0=alpha / 2)


def flywheel(rng: np.random.Generator, args: argparse.Namespace, shift: float) -> np.ndarray:
    """One simulated flywheel: (methods × rounds) promotions, every method deciding on the
    same fresh gate slice each round (common random numbers)."""
    rounds = args.sequence_rounds
    promoted = np.zeros((len(SEQUENCE_METHODS), rounds), dtype=bool)
    for k in range(1, rounds + 1):
        champ, chall = draw_round(rng, args.items, args.samples, args.beta_a, args.beta_b, shift)
        for i in range(len(SEQUENCE_METHODS)):
            earlier = [int(j) + 1 for j in np.flatnonzero(promoted[i, : k - 1])]
            level = sequence_level(i, k, args.alpha, earlier)
            bar = Bar(alpha=level, test=args.sequence_test, min_items=1)
            promoted[i, k - 1] = decide(champ, chall, bar=bar, bound=False).promote
    return promoted


def sequence(args: argparse.Namespace, console: Console) -> None:
    """The sequence case: N flywheels of R rounds, with no true effect and +5 points."""
    n, rounds, alpha = args.sequence_flywheels, args.sequence_rounds, args.alpha
    t0 = time.perf_counter()
    shift = shift_for(0.05, args.beta_a, args.beta_b, args.seed)
    # (flywheels × methods × rounds) promotions in each case
    null = np.zeros((n, len(SEQUENCE_METHODS), rounds), dtype=bool)
    better = np.zeros_like(null)
    with Progress(console=console, transient=True) as progress:
        for out, case_shift, seed, label in (
            (null, 0.0, 30_001, "no true effect"),
            (better, shift, 30_002, "+5 points every round"),
        ):
            rng = np.random.default_rng(args.seed + seed)
            task = progress.add_task(f"{n} flywheels × {rounds} rounds, {label}", total=n)
            for f in range(n):
                out[f] = flywheel(rng, args, case_shift)
                progress.advance(task)
            progress.remove_task(task)
    seconds = time.perf_counter() - t0

    def rate(hits: np.ndarray) -> str:
        # per-flywheel figures, so the s.e. allows for rounds of one flywheel being dependent
        return f"{hits.mean():.3f} ± {hits.std(ddof=1) / math.sqrt(n):.3f}"

    any_false = np.asarray(null.any(axis=2))  # flywheels × methods
    power = better.mean(axis=2)
    marks = sorted({1, max(1, rounds // 2), rounds})
    table = Table(
        "method",
        "P(any false promotion), no effect",
        "false promotions a flywheel",
        "power a round, +5 pt",
        "÷ no rule",
        "power at round " + " / ".join(map(str, marks)),
        title=f"Sequence of {rounds} rounds, α = {alpha:g} (goal: P(any false promotion) ≤ α), "
        f"{n} flywheels per case, rate ± MC s.e.",
        caption=f"gate {args.items} items × {args.samples} samples per item per arm, fresh each "
        f"round, {args.sequence_test} test, margin 0; +5 points = logit shift {shift:.3f}",
    )
    for i, name in enumerate(SEQUENCE_METHODS):
        at = " / ".join(f"{better[:, i, k - 1].mean():.3f}" for k in marks)
        table.add_row(
            name,
            rate(any_false[:, i]),
            rate(null[:, i].sum(axis=1).astype(float)),
            rate(power[:, i]),
            f"{power[:, i].mean() / max(power[:, 0].mean(), 1e-12):.2f}",
            at,
        )
    console.print(table)
    ratio = any_false[:, 0].mean() / max(any_false[:, 1].mean(), 1 / n)
    kept = power[:, 1].mean() / max(power[:, 0].mean(), 1e-12)
    console.print(
        f"levels: no rule {alpha:g} every round, 1 − (1 − α)^{rounds} = "
        f"{1 - (1 - alpha) ** rounds:.3f}; alpha spending {spending_alpha(1, alpha):.4f} in "
        f"round 1 … {spending_alpha(rounds, alpha):.2e} in round {rounds}, Σ = "
        f"{spent_alpha(rounds, alpha):.4f}; LORD++ before its first promotion "
        f"{lord_alpha(1, alpha, []):.2e} in round 1, Σ = "
        f"{alpha / 2 * lord_gammas(rounds).sum():.4f}\n"
        f"P(any false promotion in {rounds} rounds), no rule / alpha spending: {ratio:.1f}×\n"
        f"mean per-round power at +5 points, alpha spending / no rule: {kept:.2f}\n"
        f"sequence case: {seconds:.1f} s"
    )


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
    ap.add_argument(
        "--portfolio", type=int, default=4, metavar="K", help="challengers (0: skip the case)"
    )
    ap.add_argument("--validation-items", type=int, default=100, help="portfolio selection")
    ap.add_argument("--portfolio-test", choices=("permutation", "sign"), default="permutation")
    ap.add_argument("--portfolio-only", action="store_true", help="run only the portfolio case")
    ap.add_argument(
        "--sequence-flywheels", type=int, default=1000, metavar="N", help="0: skip the case"
    )
    ap.add_argument("--sequence-rounds", type=int, default=20, help="rounds per flywheel")
    ap.add_argument("--sequence-test", choices=("permutation", "sign"), default="permutation")
    ap.add_argument("--sequence-only", action="store_true", help="run only the sequence case")
    args = ap.parse_args()
    console = Console(width=130)
    if args.portfolio_only and args.portfolio < 1:
        ap.error("--portfolio-only needs --portfolio K with K ≥ 1")
    if args.sequence_only and args.sequence_flywheels < 2:
        ap.error("--sequence-only needs --sequence-flywheels N with N ≥ 2")
    if args.sequence_flywheels > 0 and (args.sequence_flywheels < 2 or args.sequence_rounds < 1):
        ap.error("--sequence-flywheels needs N ≥ 2 (or 0) and --sequence-rounds ≥ 1")
    if args.portfolio_only or args.sequence_only:
        if args.portfolio_only:
            portfolio(args, console)
        if args.sequence_only:
            sequence(args, console)
        return
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
    if args.portfolio > 0:
        portfolio(args, console)
    if args.sequence_flywheels > 0:
        sequence(args, console)


if __name__ == "__main__":
    main()
