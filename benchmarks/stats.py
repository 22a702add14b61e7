"""Benchmark: paired bootstrap CI + permutation test on 1,000 items × 16 samples.

Goal: 10,000 bootstrap resamples plus the paired permutation test in ≤ 0.5 s, and ≥ 10×
faster than `scipy.stats.bootstrap(paired=True)` (percentile, 10,000 resamples, vectorized)
on the same data, measured in the same run. Run:

    .venv/bin/python benchmarks/stats.py [--repeats 5]

Prints the median wall time over N repeats of each contender and the ratio. Also times our plain
index-resampling path (the fallback for scores that do not lie on a small grid), so the
ratio is not read as applying to every input.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np
from scipy import stats as sps

from tuneloop.stats import paired_bootstrap_ci, paired_permutation
from tuneloop.stats.bootstrap import _index_means, percentile_interval

ITEMS, SAMPLES, RESAMPLES = 1000, 16, 10_000


def median_of(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    p = rng.uniform(0.1, 0.9, ITEMS)
    pre = rng.binomial(SAMPLES, p) / SAMPLES
    post = rng.binomial(SAMPLES, np.clip(p + 0.02, 0, 1)) / SAMPLES

    def ours() -> None:
        paired_bootstrap_ci(pre, post, n_resamples=RESAMPLES, seed=0)
        paired_permutation(post - pre, n_resamples=RESAMPLES, seed=0)

    def ours_index_path() -> None:
        resampled = _index_means(post - pre, RESAMPLES, np.random.default_rng(0))
        percentile_interval(resampled)

    def scipy_bootstrap() -> None:
        sps.bootstrap(
            (pre, post),
            lambda a, b, axis: np.mean(b - a, axis=axis),
            paired=True,
            vectorized=True,
            n_resamples=RESAMPLES,
            method="percentile",
            rng=np.random.default_rng(0),
        )

    ours()  # warm up imports and caches
    t_ours = median_of(ours, args.repeats)
    t_index = median_of(ours_index_path, args.repeats)
    t_scipy = median_of(scipy_bootstrap, args.repeats)
    print(
        f"data: {ITEMS} items x {SAMPLES} samples, {RESAMPLES} resamples, median of {args.repeats}"
    )
    print(f"tuneloop bootstrap CI + permutation test : {t_ours * 1e3:8.1f} ms (goal <= 500 ms)")
    print(f"tuneloop bootstrap, index path only      : {t_index * 1e3:8.1f} ms")
    print(f"scipy.stats.bootstrap(paired=True)       : {t_scipy * 1e3:8.1f} ms")
    print(f"ratio scipy / tuneloop (CI + test)       : {t_scipy / t_ours:8.1f}x (goal >= 10x)")
    print(f"ratio scipy / tuneloop index path        : {t_scipy / t_index:8.1f}x")


if __name__ == "__main__":
    main()
