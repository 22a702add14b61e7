"""What a portfolio round will spend, estimated before any compute, against its budget.

Per challenger:

- training seconds: its `train.max_seconds` (the trainer stops there, `train.budget`); else
  its steps (plus `sft_warmup_steps`) × the seconds per step of the latest run of the same
  method in this workdir (the main round's or a challenger's `train_settings.json`, measured on
  this machine), else × `portfolio.budget.seconds_per_step`; with none of these it cannot be
  estimated and the round is refused (set one);
- evaluation completions: the selection slice's items × `eval.n_samples` (the gate slice's
  too under `gate.adjudicate: all`);
- teacher dollars: none of its own (the replay runs once per round, for every challenger).

Per round, besides: the two arms of the gate (`eval_pre`, `eval_post`: the evaluated items ×
n_samples each) and the replay's teacher dollars, estimated as sampled steps × Σ over teachers
of (prompt characters / 4 × input price + `max_tokens` × output price) — an upper bound on the
completion side, a rough one on the prompt side; 0 when there is no replay, and "not
estimated" (refused under `budget.max_usd`) when its traces are made by this round's data
phase and do not exist yet.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuneloop.config import LoopConfig
from tuneloop.errors import InputError
from tuneloop.loop.layout import RunLayout
from tuneloop.loop.portfolio.challengers import Challenger, effective_config
from tuneloop.records import read_record_if_exists
from tuneloop.records.selection import ChallengerEstimate
from tuneloop.suite import Suite, load_suite, resolve_slice


@dataclass(frozen=True)
class RoundEstimate:
    challengers: dict[str, ChallengerEstimate]
    train_seconds: float
    eval_samples: int
    usd: float | None
    """Teacher dollars of the round; None when they cannot be estimated yet."""

    def summary(self) -> dict[str, Any]:
        """The estimate as plain data: what a spend approval records (and its key hashes)."""
        return {
            "train_seconds": self.train_seconds,
            "eval_samples": self.eval_samples,
            "usd": self.usd,
            "challengers": {n: e.model_dump(mode="json") for n, e in self.challengers.items()},
        }

    def lines(self) -> list[str]:
        out = [
            f"  {name}: ~{e.train_seconds:.0f} s training ({e.train_seconds_basis}), "
            f"{e.eval_samples} completions"
            for name, e in self.challengers.items()
        ]
        usd = "not estimated" if self.usd is None else f"${self.usd:.2f}"
        out.append(
            f"  total: ~{self.train_seconds:.0f} s training, {self.eval_samples} completions, "
            f"teachers {usd}"
        )
        return out


def estimate_round(
    cfg: LoopConfig, challengers: list[Challenger], suite: Suite | None = None
) -> RoundEstimate:
    """Every challenger's estimate and the round's totals (InputError: a challenger whose
    training time cannot be estimated)."""
    assert cfg.portfolio is not None
    suite = suite or load_suite(cfg.suite.path, cfg.suite.default_scorer)
    n = cfg.eval.n_samples
    compared = len(resolve_slice(suite, cfg.suite, compared_slice(cfg)))
    evaluated = (
        len(suite.items)
        if cfg.eval.slice is None
        else len(resolve_slice(suite, cfg.suite, cfg.eval.slice))
    )
    per: dict[str, ChallengerEstimate] = {}
    for ch in challengers:
        seconds, basis = _train_seconds(cfg, ch)
        per[ch.name] = ChallengerEstimate(
            train_seconds=seconds, train_seconds_basis=basis, eval_samples=compared * n, usd=0.0
        )
    return RoundEstimate(
        challengers=per,
        train_seconds=sum(e.train_seconds for e in per.values()),
        eval_samples=sum(e.eval_samples for e in per.values()) + 2 * evaluated * n,
        usd=replay_usd(cfg),
    )


def compared_slice(cfg: LoopConfig) -> str:
    """Where the challengers are evaluated: the selection slice, or under
    `gate.adjudicate: all` the gate slice."""
    assert cfg.portfolio is not None
    return cfg.gate.slice if cfg.gate.adjudicate == "all" else cfg.portfolio.selection.slice


def budget_problems(cfg: LoopConfig, found: RoundEstimate) -> list[tuple[str, str]]:
    """(key, message) for each limit of `portfolio.budget` the estimate exceeds."""
    assert cfg.portfolio is not None
    b, out = cfg.portfolio.budget, []
    detail = "\n" + "\n".join(found.lines())
    if found.train_seconds > b.max_seconds:
        out.append(
            (
                "portfolio.budget.max_seconds",
                f"the challengers' training is estimated at {found.train_seconds:.0f} s, over "
                f"the budget of {b.max_seconds:g} s; drop a challenger or lower its "
                f"train.max_seconds / steps (nothing was run):{detail}",
            )
        )
    if b.max_usd is not None and (found.usd is None or found.usd > b.max_usd):
        shown = (
            "cannot be estimated before the data phase"
            if found.usd is None
            else f"${found.usd:.2f}"
        )
        out.append(
            (
                "portfolio.budget.max_usd",
                f"the round's teacher spend {shown}, against a budget of ${b.max_usd:g} "
                f"(nothing was run){'; give replay.traces' if found.usd is None else ''}",
            )
        )
    if b.max_eval_samples is not None and found.eval_samples > b.max_eval_samples:
        out.append(
            (
                "portfolio.budget.max_eval_samples",
                f"the round would evaluate {found.eval_samples} completions, over the budget "
                f"of {b.max_eval_samples} (nothing was run):{detail}",
            )
        )
    return out


def _train_seconds(cfg: LoopConfig, ch: Challenger) -> tuple[float, str]:
    assert cfg.portfolio is not None
    t = effective_config(cfg, ch).train
    if t.max_seconds is not None:
        return t.max_seconds, "train.max_seconds"
    steps = t.steps + t.sft_warmup_steps
    measured = measured_step_seconds(cfg.workdir, t.method)
    if measured is not None:
        per_step, where = measured
        return steps * per_step, f"{steps} steps × {per_step:.3f} s measured in {where}"
    declared = cfg.portfolio.budget.seconds_per_step
    if declared is not None:
        return steps * declared, f"{steps} steps × {declared:g} s (budget.seconds_per_step)"
    raise InputError(
        f"{ch.where}: challenger {ch.name!r}: its training time cannot be estimated before "
        "it runs (no train.max_seconds, and no earlier run of this method in the workdir "
        "measured a step); set train.max_seconds in its overrides, or "
        "portfolio.budget.seconds_per_step"
    )


def measured_step_seconds(workdir: Path, method: str) -> tuple[float, str] | None:
    """Seconds per step of the newest finished training run of `method` in the workdir (the
    round's own, or one of its challengers'), and where it was measured."""
    from tuneloop.train.settings import TrainRunRecord

    run = RunLayout(workdir)
    found: list[tuple[float, float, str]] = []
    candidates = [run.train_settings]
    if run.challengers.is_dir():
        candidates += [run.challenger(p.name).train_settings for p in run.challengers.iterdir()]
    for path in candidates:
        rec = read_record_if_exists(path, TrainRunRecord)
        if rec is None or rec.method != method or not rec.steps_done or not rec.train_seconds:
            continue
        found.append((path.stat().st_mtime, rec.train_seconds / rec.steps_done, str(path)))
    if not found:
        return None
    _, per_step, where = max(found)
    return per_step, where


def replay_usd(cfg: LoopConfig) -> float | None:
    """The replay's teacher dollars (module docstring); 0 without a replay."""
    r = cfg.replay
    if r.teachers is None:
        return 0.0
    if r.traces is None or not r.traces.is_file():
        return None
    from tuneloop.replay.plan import plan_steps, read_traces
    from tuneloop.replay.teachers import load_teachers

    steps, _ = plan_steps(
        read_traces(r.traces),
        fraction=r.sample_fraction,
        max_steps=r.max_steps,
        seed=r.seed,
        default_scorer=r.default_scorer,
        include_sidechains=r.include_sidechains,
    )
    teachers = load_teachers(r.teachers, check_env=False).teachers
    total = 0.0
    for step in steps:
        prompt_tokens = sum(len(str(m.get("content") or "")) for m in step.prefix) // 4
        for t in teachers:
            total += t.price.cost(prompt_tokens, t.sampling.max_tokens)
    return total
