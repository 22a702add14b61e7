"""A round whose report.html has everything to look at, in seconds: the real phase table with
fake model phases (tests/loop/fakeloop.py), whose answers are numbers with finish reasons, a
few broken items besides the fixed ones, a training log (SFT, then a GRPO run that collapsed
and was walked back), and one post completion that tries to run a script (the XSS canary).
report, gate and capstone are the real phases.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from tuneloop.config import load_config
from tuneloop.loop.context import PhaseContext
from tuneloop.loop.layout import slice_ids
from tuneloop.loop.runner import Runner, Selection
from tuneloop.records import append_jsonl, iter_jsonl, parse_record, write_jsonl, write_record
from tuneloop.records.train_health import WalkBack
from tuneloop.samplelog import SampleRow
from tuneloop.train.run import SETTINGS_FILE
from tuneloop.train.settings import TrainRunRecord

from ..loop import fakeloop

CANARY = '<script>window.__xss = 1; alert(1)</script><img src=x onerror="alert(2)">'


def _rewrite(ctx: PhaseContext, post: bool) -> None:
    """Give the fake log's rows real-looking answers; on post, break every 15th item and put
    the canary in the first item fixed on the report slice."""
    path = ctx.folder / "samples.jsonl"
    report = set(slice_ids(ctx.cfg, "dev"))
    rows, canary = [], False
    for lineno, obj in iter_jsonl(path):
        row = parse_record(obj, SampleRow, f"{path}:{lineno}")
        i = int(row.item_id[1:])
        score = 0.0 if post and i % 15 == 0 else (row.score or 0.0)
        text, finish = (str(i + 1), "stop") if score else (str(i), "stop")
        if not score and i % 7 == 0:
            text, finish = "Let me think step by step about " * 3, "length"
        if post and score and i % 3 and row.item_id in report and not canary:
            text, canary = CANARY, True
        rows.append(
            row.model_copy(
                update={"score": score, "completion": text, "finish_reason": finish}
            ).to_json()
        )
    write_jsonl(path, rows)


def eval_pre(ctx: PhaseContext) -> None:
    fakeloop.eval_pre(ctx)
    _rewrite(ctx, post=False)


def eval_post(ctx: PhaseContext) -> None:
    fakeloop.eval_post(ctx)
    _rewrite(ctx, post=True)


GRPO_STEPS = 30
WALKED_TO = 20


def grpo_row(s: int) -> dict[str, float | int | str]:
    """A GRPO step whose reward rises, then collapses to 0 from step 25 (the abort at 27)."""
    collapsed = s >= 25
    return {
        "step": s,
        "phase": "grpo",
        "loss": 0.05,
        "reward_mean": 0.0 if collapsed else 0.2 + s / 50,
        "reward_std": 0.0 if collapsed else 0.3,
        "frac_zero_spread": 1.0 if collapsed else 0.25,
        "entropy": 0.1 if collapsed else 1.5 - s / 30,
        "clip_ratio": 0.02,
        "completion_length": 4.0 if collapsed else 12.0 - s / 5,
        "band_hard": 3.0,
        "band_medium": 4.0 + s % 2,
        "band_easy": 1.0 - s % 2,
    }


def train(ctx: PhaseContext) -> None:
    """An SFT log, then a GRPO run that collapsed, was aborted and walked back."""
    fakeloop.train(ctx)
    adapter = ctx.folder / "adapter"
    append_jsonl(
        adapter / "metrics.jsonl",
        [
            {
                "step": s,
                "phase": "sft",
                "loss": 2.0 / s**0.5,
                "learning_rate": 1e-3 * (1 - s / 40),
                "step_time_s": 0.1,
            }
            for s in range(1, 41)
        ],
    )
    append_jsonl(adapter / "metrics.jsonl", [grpo_row(s) for s in range(1, 28)])
    walked = WalkBack(
        stage="grpo",
        checkpoint=f"checkpoint-{WALKED_TO}",
        step=WALKED_TO,
        steps=GRPO_STEPS,
        ended_step=27,
        reason="training (grpo) stopped at step 27: grpo: reward ≤ 0 with equal rewards in ≥ "
        "100% of groups for the last 3 logged steps (train.health.on_collapse: abort)",
        checks=["saved before the collapse that began at step 25", "finite weights"],
        skipped=["checkpoint-25: inside the collapse that began at step 25"],
    )
    record = TrainRunRecord(
        method="grpo",
        settings={},
        base_model="base",
        base_model_sha256="0" * 64,
        data="data.jsonl",
        data_sha256="0" * 64,
        data_rows=8,
        allow_contamination=False,
        walk_back=walked,
        stop="unhealthy",
    )
    write_record(adapter / SETTINGS_FILE, record)


def run_round(tmp: Path) -> Path:
    """Run the round in `tmp`; returns its workdir."""
    config = fakeloop.write_config(tmp)
    mine = {"eval_pre": eval_pre, "eval_post": eval_post, "train": train}
    table = tuple(
        dataclasses.replace(p, run=mine[p.name]) if p.name in mine else p for p in fakeloop.phases()
    )
    cfg = load_config(config)
    Runner(cfg, config, Selection(names=tuple(p.name for p in table)), table).run()
    return cfg.workdir
