"""Cascade rounds end to end on the tiny models, through the installed CLI (slow; few and real).

Round 1 starts from the bootstrap single champion (the arith base): it trains the small tier,
composes the cascade small → large on the validation slice, serves it as the post arm and
gates it against the single champion with a cost condition. Round 2 starts from whatever
round 1 left: a cascade champion's round serves the champion cascade as its pre arm and
trains the cascade's tunable tier; a promotion writes a new descriptor version.
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
            "cost": {"max_usd_per_item": 5.0e-6},
            "ledger": str(tmp / "ledger.db"),
        },
        "archive": {"root": str(tmp / "archive")},
        "flywheel": {"bootstrap": str(ARITH / "model")},
    }
    path = tmp / "casc.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.fixture(scope="module")
def two_rounds(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("cascade-rounds")
    cfg = write_config(tmp)
    for _ in range(2):
        done = tuneloop("run", str(cfg), "--round", "next")
        assert done.code == 0, done.stderr[-3000:]
    return tmp


def test_round_one_composes_serves_and_gates_a_cascade_with_its_cost(two_rounds: Path) -> None:
    r1 = two_rounds / "work" / "rounds" / "r0001"
    composition = json.loads((r1 / "compose" / "composition.json").read_text())
    assert [t["name"] for t in composition["tiers"]] == ["small", "large"]
    assert composition["chosen"] is not None
    assert (r1 / "compose" / "frontier.svg").read_text().startswith("<svg")
    cascade = json.loads((r1 / "compose" / "cascade.json").read_text())
    assert cascade["components"][0]["tunable"] is True
    summary, rows = load_sample_log(r1 / "eval_post")
    assert summary.model.startswith("casc-r0001@sha256:")
    assert all(r.cascade is not None and r.cost_usd is not None for r in rows if r.status == "ok")
    assert {r.cascade.tier for r in rows if r.cascade} <= {"small", "large"}
    verdict = json.loads((r1 / "gate" / "verdict.json").read_text())
    assert verdict["cost"]["conditions"][0]["name"] == "max_usd_per_item"
    with open_ledger(two_rounds / "ledger.db") as ledger:
        sealed = ledger.sealed(f"{verdict['run_id']}:composition")
    assert sealed is not None and sealed.slice == "validation"


def test_a_cascade_champion_round_trains_its_tunable_tier(two_rounds: Path) -> None:
    with open_ledger(two_rounds / "ledger.db") as ledger:
        history = ledger.champions()
    after_one = [c for c in history if c.run_id and "r0001" in c.run_id]
    if not after_one:
        pytest.skip("round 1's cascade was not promoted here; round 2 started from the base")
    champion = after_one[0].descriptor
    assert champion["kind"] == "cascade"
    tunable = next(c for c in champion["components"] if c.get("tunable"))
    assert "archive" in tunable["path"]  # the archived merged model, not the workdir's
    r2 = two_rounds / "work" / "rounds" / "r0002"
    round_file = json.loads((r2 / "round.json").read_text())
    assert round_file["base_model"] == tunable["path"]
    assert json.loads((r2 / "champion-cascade.json").read_text())["kind"] == "cascade"
    pre, _ = load_sample_log(r2 / "eval_pre")
    assert pre.model.startswith("casc-r0001@sha256:")  # the champion cascade answered
    verdict = json.loads((r2 / "gate" / "verdict.json").read_text())
    assert verdict["evidence"]["challenger_model"] != verdict["evidence"]["champion_model"]
    with open_ledger(two_rounds / "ledger.db") as ledger:
        latest = ledger.current_champion()
    assert latest is not None
    if verdict["decision"] == "promote":  # a new descriptor version, its tier retrained
        assert latest.version == after_one[0].version + 1
        assert latest.descriptor["kind"] == "cascade"
        assert latest.descriptor["run_id"] == verdict["run_id"]
    else:
        assert latest.version == after_one[0].version
