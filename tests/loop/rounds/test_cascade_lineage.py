"""A round from a cascade champion (`loop.rounds.lineage`): its tunable tier is what it trains,
the other tiers stay, the pre arm is the champion's descriptor written into the round."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.modelfiles import write_model_files
from tuneloop.config import LoopConfig, load_config
from tuneloop.config.cascade import CascadeConfig, CascadeTierConfig
from tuneloop.errors import InputError
from tuneloop.gate.ledger import open_ledger
from tuneloop.loop.rounds import RoundRecord
from tuneloop.loop.rounds.lineage import (
    CHAMPION_CASCADE,
    cascade_round,
    commit_round,
    plan_round,
    round_config,
    tunable_tier,
)

from .test_driver import flywheel_config


def champion(tmp: Path) -> dict[str, Any]:
    """A cascade champion: a tunable local tier, a fixed local tier and an endpoint."""
    small = write_model_files(tmp / "tiers" / "small")
    mid = write_model_files(tmp / "tiers" / "mid")
    hand_off = {"signal": "min_margin", "threshold": 0.4}
    return {
        "kind": "cascade",
        "name": "champ",
        "components": [
            {"role": "tier-1", "name": "small", "path": str(small), "sha256": "a" * 64}
            | {"usd_per_1m": 0.2, "tunable": True}
            | hand_off,
            {"role": "tier-2", "name": "mid", "path": str(mid), "usd_per_1m": 1.0} | hand_off,
            {"role": "tier-3", "name": "big", "endpoint": "https://api.example/v1"}
            | {"model": "big-1", "api_key_env": "BIG_KEY", "usd_per_1m": 8.0},
        ],
        "routing": {"kind": "threshold"},
        "run_id": "fake-r0001",
        "model": "champ@sha256:" + "b" * 64,
    }


def record(cfg: LoopConfig, parent: dict[str, Any], round_id: str = "r0002") -> RoundRecord:
    return RoundRecord(
        round_id=round_id,
        started_at="2026-12-01T00:00:00+00:00",
        config_path="loop.yaml",
        parent_version=2,
        parent=parent,
        base_model=str(parent.get("path") or tunable_tier(parent)["path"]),
        gate_slice="gate-001",
        eval_slice="audit+gate-001",
    )


@pytest.fixture
def cfg(tmp_path: Path) -> LoopConfig:
    return load_config(flywheel_config(tmp_path))


def test_the_tunable_tier_is_the_one_marked(tmp_path: Path) -> None:
    parent = champion(tmp_path)
    tier = tunable_tier(parent)
    assert tier["name"] == "small"
    tier["path"] = "elsewhere"  # a copy: the champion's descriptor is not changed
    assert parent["components"][0]["path"] == str(tmp_path / "tiers" / "small")
    none = parent | {"components": [c | {"tunable": False} for c in parent["components"]]}
    with pytest.raises(InputError, match="no tunable tier"):
        tunable_tier(none)
    two = parent | {"components": [c | {"tunable": True} for c in parent["components"]]}
    with pytest.raises(InputError, match="no tunable tier"):
        tunable_tier(two)
    with pytest.raises(InputError):
        tunable_tier({"kind": "cascade"})


def test_a_single_champions_round_has_no_cascade(cfg: LoopConfig, tmp_path: Path) -> None:
    single = {"kind": "single", "path": str(tmp_path / "base")}
    assert cascade_round(cfg, record(cfg, single)) is None
    assert round_config(cfg, record(cfg, single)).serve.challenger == "merged"


def test_the_champions_tiers_with_the_tunable_one_trained(cfg: LoopConfig, tmp_path: Path) -> None:
    section = cascade_round(cfg, record(cfg, champion(tmp_path)))
    assert section is not None
    assert section.tiers == [
        CascadeTierConfig(name="small", model="trained", usd_per_1m=0.2),
        CascadeTierConfig(name="mid", path=tmp_path / "tiers" / "mid", usd_per_1m=1.0),
        CascadeTierConfig(
            name="big",
            endpoint="https://api.example/v1",
            model="big-1",
            api_key_env="BIG_KEY",
            usd_per_1m=8.0,
        ),
    ]
    assert section.champion == cfg.workdir / "rounds" / "r0002" / CHAMPION_CASCADE
    # no `cascade:` in the config: the cheapest cascade as accurate as its best tier, on the
    # champion's own signal
    assert (section.objective, section.signal, section.budget, section.epsilon) == (
        "min_cost_non_inferior",
        "min_margin",
        None,
        0.0,
    )


def test_an_endpoint_tier_without_a_key_variable_gets_none(cfg: LoopConfig, tmp_path: Path) -> None:
    parent = champion(tmp_path)
    del parent["components"][2]["api_key_env"]
    section = cascade_round(cfg, record(cfg, parent))
    assert section is not None and section.tiers[2].api_key_env is None


def test_the_rule_comes_from_the_configs_cascade_section(cfg: LoopConfig, tmp_path: Path) -> None:
    own = CascadeConfig(
        tiers=[
            CascadeTierConfig(name="x", model="trained", usd_per_1m=1.0),
            CascadeTierConfig(name="y", model="base", usd_per_1m=2.0),
        ],
        signal="agreement",
        objective="max_accuracy_under_cost",
        budget=1e-6,
        epsilon=0.02,
        slice="validation",
        champion=tmp_path / "ignored.json",
    )
    with_rule = cfg.model_copy(update={"cascade": own})
    section = cascade_round(with_rule, record(cfg, champion(tmp_path)))
    assert section is not None
    assert [t.name for t in section.tiers] == ["small", "mid", "big"]  # the champion's tiers
    assert section.model_dump(exclude={"tiers", "champion"}) == own.model_dump(
        exclude={"tiers", "champion"}
    )
    assert section.champion == cfg.workdir / "rounds" / "r0002" / CHAMPION_CASCADE


def test_a_round_from_a_cascade_champion_in_the_ledger(cfg: LoopConfig, tmp_path: Path) -> None:
    parent = champion(tmp_path)
    with open_ledger(tmp_path / "ledger" / "ledger.db") as ledger, ledger.transaction():
        ledger.add_champion(parent, run_id="fake-r0001", at="2026-12-01T00:00:00Z", via="test")
    planned = plan_round(cfg, tmp_path / "loop.yaml", "r0001", {})
    assert planned.parent == parent and not planned.bootstrap
    assert planned.base_model == str(tmp_path / "tiers" / "small")  # the tunable tier's folder

    derived = round_config(cfg, planned)
    assert derived.serve.challenger == "cascade"
    assert derived.base_model == tmp_path / "tiers" / "small"
    assert derived.cascade == cascade_round(cfg, planned)
    assert derived.workdir == cfg.workdir / "rounds" / "r0001"
    assert derived.cascade is not None
    assert derived.cascade.champion == derived.workdir / CHAMPION_CASCADE

    assert not derived.cascade.champion.exists()  # planning writes nothing
    commit_round(cfg, planned)
    assert json.loads(derived.cascade.champion.read_text()) == parent
    with open_ledger(tmp_path / "ledger" / "ledger.db") as ledger:
        assert [r.round_id for r in ledger.rounds()] == ["r0001"]
        assert [c.version for c in ledger.champions()] == [1]  # no bootstrap added before it


def test_a_cascade_champion_a_round_cannot_train_is_refused(
    cfg: LoopConfig, tmp_path: Path
) -> None:
    parent = champion(tmp_path)
    frozen = parent | {"components": [c | {"tunable": False} for c in parent["components"]]}
    (tmp_path / "empty").mkdir()
    no_model = parent | {
        "components": [parent["components"][0] | {"path": str(tmp_path / "empty")}]
        + parent["components"][1:]
    }
    for descriptor, words in [(frozen, "no tunable tier"), (no_model, "no local checkpoint")]:
        with open_ledger(tmp_path / "ledger" / "ledger.db") as ledger, ledger.transaction():
            ledger.add_champion(descriptor, run_id=None, at="2026-12-01T00:00:00Z", via="test")
        with pytest.raises(InputError, match=words):
            plan_round(cfg, tmp_path / "loop.yaml", "r0001", {})
