"""One portfolio round's challenger table (`records.selection.PortfolioRecord`), built by hand,
for the tests of what shows it: the experiment log (tests/gate/test_explog.py), the capstone
(tests/report/test_portfolio.py) and the dashboard (tests/view/test_portfolio.py).

Three challengers under `default_stays`: `sft-lr1e-3` (the default), `sft-lr3e-4` (beats it:
selected) and `dpo-beta` (failed in training, with a long error and a `|` in it, as an error
message can have).
"""

from __future__ import annotations

from pathlib import Path

from tuneloop.records import write_record
from tuneloop.records.selection import (
    ArmFigures,
    ChallengerEstimate,
    ChallengerRow,
    PairFigures,
    PortfolioRecord,
    SelectionDecision,
    TagFigures,
)

RULE_SHA = "c0ffee" + "0" * 58
DEFAULT, SELECTED, FAILED = "sft-lr1e-3", "sft-lr3e-4", "dpo-beta"
ERROR = (
    "train: CUDA out of memory | tried to allocate 2.00 GiB (GPU 0; 79.1 GiB total capacity; "
    "77.9 GiB already allocated) while building the reference model"
)
REASON = (
    f"default_stays: {SELECTED} is non-inferior on every tag, its advantage over {DEFAULT} is "
    "+0.0800 and its sign test p 0.0213 ≤ 0.1"
)


def _estimate(seconds: float) -> ChallengerEstimate:
    return ChallengerEstimate(
        train_seconds=seconds,
        train_seconds_basis="train.max_seconds",
        eval_samples=40,
        usd=0.0,
    )


def _arm(name: str, mean: float) -> ArmFigures:
    return ArmFigures(
        name=name,
        log=f"challengers/{name}/eval_validation",
        log_sha256="ab" * 32,
        model=f"challengers/{name}/merge/model",
        settings={"temperature": 0.0, "n_samples": 1},
        n_items=40,
        mean=mean,
        tags={"arith": mean},
        cost=120.0,
    )


def portfolio_record(run_id: str = "20260101T000000Z-abcd") -> PortfolioRecord:
    """The round's record: one default, one selected, one failed challenger."""
    pair = PairFigures(
        candidate=SELECTED,
        default=DEFAULT,
        n_items=40,
        mean_candidate=0.70,
        mean_default=0.62,
        advantage=0.08,
        wins=9,
        losses=2,
        ties=29,
        sign_p=0.0213,
        tags=[
            TagFigures(
                tag="arith",
                n_items=40,
                mean_candidate=0.70,
                mean_default=0.62,
                difference=0.08,
                non_inferior=True,
            )
        ],
        non_inferior=True,
        beats_default=True,
    )
    rule = {"rule": "default_stays", "slice": "validation", "sign_p": 0.1}
    decision = SelectionDecision(
        rule=rule | {"non_inferiority_epsilon": 0.05},
        rule_sha256=RULE_SHA,
        suite_revision="a" * 64,
        item_ids_sha256="b" * 64,
        n_items=40,
        default=DEFAULT,
        arms=[_arm(DEFAULT, 0.62), _arm(SELECTED, 0.70)],
        pairs=[pair],
        chosen=SELECTED,
        reason=REASON,
    )
    rows = [
        ChallengerRow(
            name=DEFAULT,
            overrides={"train.learning_rate": 0.001},
            origin="listed",
            recipe={"train": {"learning_rate": 0.001}},
            estimate=_estimate(120.0),
            status="done",
            train_seconds=131.4,
            workdir=f"challengers/{DEFAULT}",
            validation_mean=0.62,
            why="the default: stays unless another beats it",
        ),
        ChallengerRow(
            name=SELECTED,
            overrides={"train.learning_rate": 0.0003, "train.lora.r": 32},
            origin="listed",
            recipe={"train": {"learning_rate": 0.0003}},
            estimate=_estimate(120.0),
            status="done",
            train_seconds=127.9,
            workdir=f"challengers/{SELECTED}",
            validation_mean=0.70,
            selected=True,
            why="beats the default: +0.0800, sign p 0.0213",
        ),
        ChallengerRow(
            name=FAILED,
            overrides={"train.method": "dpo", "train.dpo.beta": 0.3},
            origin="family",
            recipe={"train": {"method": "dpo"}},
            estimate=_estimate(240.0),
            status="failed",
            error=ERROR,
            workdir=f"challengers/{FAILED}",
            why="failed: skipped",
        ),
    ]
    return PortfolioRecord(
        run_id=run_id,
        adjudicate="selected",
        selection_slice="validation",
        rule_sha256=RULE_SHA,
        sealed_at="2026-01-01T00:00:00+00:00",
        budget={"max_seconds": 600.0, "max_usd": None, "max_eval_samples": 400},
        estimate_seconds=480.0,
        estimate_usd=0.0,
        estimate_eval_samples=120,
        approval="standing (max_seconds 900)",
        challengers=rows,
        decision=decision,
        selected=SELECTED,
        reason=REASON,
    )


def write_portfolio(path: Path, run_id: str = "20260101T000000Z-abcd") -> Path:
    """Write the record to `path` (a run's `challengers/selection.json`); returns it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_record(path, portfolio_record(run_id))
    return path
