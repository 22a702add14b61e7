"""A cascade round end to end on the tiny models, through the installed CLI (slow; one, real).

The champion is a cascade registered by hand (the base as its tunable small tier, `large` as
the last). The round serves the champion cascade as its pre arm, trains the tunable tier,
composes small → large anew on the rolling split's validation part, seals the choice, serves
the composed cascade as the post arm and gates it with a cost condition; the promotion writes
a new descriptor version whose small tier is the archived, retrained model. (A round from a
single champion is the README's demo, `examples/arith/loop_cascade.yaml`; its pieces are
tested apart: the compose phase's record here, priced single-model rows in
tests/evaluate/test_runner.py.)
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.installed import tuneloop
from tuneloop.gate.ledger import open_ledger
from tuneloop.samplelog import load_sample_log

ARITH = Path(__file__).resolve().parents[2] / "examples" / "arith"

pytestmark = pytest.mark.slow


def write_config(tmp: Path) -> Path:
    cfg = {
        "name": "casc",
        "workdir": str(tmp / "work"),
        "base_model": "champion",
        "serve": {"backend": "embedded", "challenger": "cascade", "max_batch_size": 64},
        "suite": {
            "path": str(ARITH / "suite.jsonl"),
            "default_scorer": "numeric",
            "rolling": {
                "audit_fraction": 0.2,
                "gate_size": 60,
                "validation_fraction": 0.2,
                "seed": 0,
            },
        },
        "eval": {"max_tokens": 8, "temperature": 0.0, "concurrency": 32, "usd_per_1m": 0.2},
        "train": {
            "data": str(ARITH / "train_prompts.jsonl"),
            "method": "sft",
            "steps": 60,
            "batch_size": 64,
            "learning_rate": 0.001,
            "torch_threads": 1,
            "lora": {"r": 64, "alpha": 64},
        },
        "cascade": {
            "tiers": [
                {"name": "small", "model": "trained", "usd_per_1m": 0.2},
                {"name": "large", "path": str(ARITH / "large"), "usd_per_1m": 4.0},
            ],
            "objective": "max_accuracy_under_cost",
            "budget": 5.0e-6,
            "slice": "validation",
        },
        "gate": {
            "min_items": 30,
            "alpha": 0.2,
            "cost": {"max_usd_per_item": 8.0e-6},
            "ledger": str(tmp / "ledger.db"),
        },
        "archive": {"root": str(tmp / "archive")},
        "flywheel": {"bootstrap": str(ARITH / "model")},
    }
    path = tmp / "casc.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


CHAMPION = {
    "kind": "cascade",
    "name": "arith-cascade",
    "components": [
        {
            "name": "small",
            "path": str(ARITH / "model"),
            "usd_per_1m": 0.2,
            "signal": "mean_logprob",
            "threshold": -0.3,
            "tunable": True,
        },
        {"name": "large", "path": str(ARITH / "large"), "usd_per_1m": 4.0},
    ],
}
"""A cascade champion registered by hand: the base as its tunable small tier."""


def run_round(cfg: Path) -> None:
    done = tuneloop("run", str(cfg), "--round", "next")
    assert done.code in (0, 1), done.stderr[-3000:]  # promote or reject: both decided


@pytest.fixture(scope="module")
def from_cascade(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One round from a cascade champion."""
    tmp = tmp_path_factory.mktemp("cascade-from-cascade")
    cfg = write_config(tmp)
    with open_ledger(tmp / "ledger.db") as ledger, ledger.transaction():
        ledger.add_champion(CHAMPION, run_id=None, at="2026-12-05T00:00:00+00:00", via="registered")
    run_round(cfg)
    return tmp


def test_a_cascade_champion_round_trains_its_tunable_tier(from_cascade: Path) -> None:
    r1 = from_cascade / "work" / "rounds" / "r0001"
    round_file = json.loads((r1 / "round.json").read_text())
    assert round_file["base_model"] == str(ARITH / "model")  # the tunable tier
    assert json.loads((r1 / "champion-cascade.json").read_text())["kind"] == "cascade"
    pre, _ = load_sample_log(r1 / "eval_pre")
    assert pre.model.startswith("arith-cascade@sha256:")  # the champion cascade answered
    post, _ = load_sample_log(r1 / "eval_post")
    assert post.model.startswith("casc-r0001@sha256:")  # the re-composed challenger
    # composed on the rolling validation part, sealed, served as the post arm
    composition = json.loads((r1 / "compose" / "composition.json").read_text())
    assert [t["name"] for t in composition["tiers"]] == ["small", "large"]
    assert composition["chosen"] is not None
    assert (r1 / "compose" / "frontier.svg").read_text().startswith("<svg")
    cascade = json.loads((r1 / "compose" / "cascade.json").read_text())
    assert cascade["components"][0]["tunable"] is True
    _, rows = load_sample_log(r1 / "eval_post")
    assert all(r.cascade is not None and r.cost_usd is not None for r in rows if r.status == "ok")
    assert {r.cascade.tier for r in rows if r.cascade} == {"small", "large"}
    verdict = json.loads((r1 / "gate" / "verdict.json").read_text())
    assert verdict["evidence"]["challenger_model"] != verdict["evidence"]["champion_model"]
    assert verdict["cost"]["conditions"][0]["name"] == "max_usd_per_item"
    with open_ledger(from_cascade / "ledger.db") as ledger:
        sealed = ledger.sealed(f"{verdict['run_id']}:composition")
    assert sealed is not None and sealed.slice == "validation"
    page = (r1 / "capstone" / "report.md").read_text()
    assert "## Cascade" in page and "frontier.svg" in page
    # measured here: 58.3% → 75.0% on the 60 gate items at $5.2e-6 per item (limit $8e-6)
    assert verdict["decision"] == "promote", verdict["reasons"]
    with open_ledger(from_cascade / "ledger.db") as ledger:
        latest = ledger.current_champion()
    # a new descriptor version, its tunable tier retrained and archived, the rest as it was
    assert latest is not None and latest.version == 2 and latest.descriptor["kind"] == "cascade"
    assert latest.descriptor["run_id"] == verdict["run_id"]
    small, large = latest.descriptor["components"]
    assert small["tunable"] and small["path"] != str(ARITH / "model") and "archive" in small["path"]
    assert large["path"] == str(ARITH / "large")
