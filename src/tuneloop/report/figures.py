"""Figures of the delta report: passk.png and items.png.

matplotlib is imported inside the functions, with the Agg backend (no display needed), so
importing this module costs nothing until a figure is drawn.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from tuneloop.records import atomic_write_bytes
from tuneloop.report.record import DeltaReport


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: Path) -> None:
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120, bbox_inches="tight")
    atomic_write_bytes(path, buf.getvalue())


def plot_passk(report: DeltaReport, path: Path) -> None:
    """pass@k for k = 1..n, both arms, with bootstrap percentile bands."""
    plt = _pyplot()
    pk = report.passk
    fig, ax = plt.subplots(figsize=(6, 4))
    try:
        for name, band, color in (("pre", pk.pre, "tab:blue"), ("post", pk.post, "tab:orange")):
            ax.plot(pk.k, band.value, marker="o", ms=3, color=color, label=name)
            ax.fill_between(pk.k, band.low, band.high, color=color, alpha=0.2)
        ax.set_xlabel("k")
        ax.set_ylabel("pass@k")
        ax.set_ylim(0, 1.02)
        ax.set_title(
            f"pass@k, {report.n_items} items × {report.n_samples} samples "
            f"({report.settings.confidence:.0%} bands)"
        )
        ax.grid(alpha=0.3)
        ax.legend()
        _save(fig, path)
    finally:
        plt.close(fig)


def plot_items(pre: np.ndarray, post: np.ndarray, report: DeltaReport, path: Path) -> None:
    """Per-item scores, pre vs post; points above the diagonal improved."""
    plt = _pyplot()
    # deterministic jitter so items with equal scores do not hide each other
    jitter = np.random.default_rng(0).uniform(-0.012, 0.012, size=(2, len(pre)))
    colors = np.where(post > pre, "tab:green", np.where(post < pre, "tab:red", "tab:gray"))
    fig, ax = plt.subplots(figsize=(5, 5))
    try:
        ax.plot([0, 1], [0, 1], color="black", lw=0.8, alpha=0.5)
        ax.scatter(pre + jitter[0], post + jitter[1], s=10, c=colors, alpha=0.6, linewidths=0)
        ax.set_xlabel("pre item score")
        ax.set_ylabel("post item score")
        ax.set_xlim(-0.05, 1.05)
        ax.set_ylim(-0.05, 1.05)
        lo, hi = report.delta_ci
        ax.set_title(
            f"Δ = {report.delta:+.3f} [{lo:+.3f}, {hi:+.3f}]; up {report.sign_wins}, "
            f"down {report.sign_losses}"
        )
        _save(fig, path)
    finally:
        plt.close(fig)
