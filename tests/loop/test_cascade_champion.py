"""What a cascade round serves and promotes (`loop.cascade`): each tier's folder, the files its
fingerprints hash, and the champion descriptor a promoted cascade becomes."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from tests.loop import fakeloop
from tests.modelfiles import write_model_files
from tuneloop.cascade_spec import read_cascade
from tuneloop.config import LoopConfig, load_config
from tuneloop.config.cascade import CascadeConfig, CascadeTierConfig
from tuneloop.gate.champion import parse_descriptor
from tuneloop.loop.cascade import (
    CHAMPION_CASCADE,
    cascade_champion,
    cascade_files,
    champion_files,
    tier_folders,
)

COMPOSED: dict[str, Any] = {
    "kind": "cascade",
    "name": "small-teacher-api",
    "composition_sha256": "c" * 64,
    "components": [
        {"role": "tier-1", "name": "small", "path": "/work/r/merge/model", "sha256": "a" * 64}
        | {"usd_per_1m": 0.2, "signal": "mean_logprob", "threshold": -0.4, "tunable": True},
        {"role": "tier-2", "name": "teacher", "path": "/models/teacher", "usd_per_1m": 1.0}
        | {"signal": "mean_logprob", "threshold": -0.2},
        {"role": "tier-3", "name": "api", "endpoint": "https://api.example/v1", "model": "big-1"}
        | {"api_key_env": "BIG_KEY", "usd_per_1m": 8.0},
    ],
}


def with_cascade(tmp: Path, champion: Path | None = None) -> LoopConfig:
    cfg = load_config(fakeloop.write_config(tmp))
    teacher = write_model_files(tmp / "teacher")
    section = CascadeConfig(
        tiers=[
            CascadeTierConfig(name="small", model="trained", usd_per_1m=0.2),
            CascadeTierConfig(name="own", model="base", usd_per_1m=0.5),
            CascadeTierConfig(name="teacher", path=teacher, usd_per_1m=1.0),
            CascadeTierConfig(
                name="api", endpoint="https://api.example/v1", model="big-1", usd_per_1m=8.0
            ),
        ],
        budget=1e-6,
        champion=champion,
    )
    return cfg.model_copy(update={"cascade": section})


def test_each_tiers_folder(tmp_path: Path) -> None:
    cfg = with_cascade(tmp_path)
    merged = tmp_path / "work" / "merge" / "model"
    assert tier_folders(cfg, merged) == {
        "small": merged,
        "own": tmp_path / "base",
        "teacher": tmp_path / "teacher",
        "api": None,
    }
    # only the tiers' own folders: the merged model and the base are inputs of their own
    assert cascade_files(cfg) == {"tier_teacher": tmp_path / "teacher"}
    assert cascade_files(cfg.model_copy(update={"cascade": None})) == {}


def test_the_pre_arm_is_the_base_or_the_champions_descriptor(tmp_path: Path) -> None:
    cfg = with_cascade(tmp_path)
    assert champion_files(cfg) == {"base_model": tmp_path / "base"}
    assert champion_files(cfg.model_copy(update={"cascade": None})) == {
        "base_model": tmp_path / "base"
    }
    descriptor = tmp_path / "work" / "champion-cascade.json"
    (tmp_path / "b").mkdir()
    from_champion = with_cascade(tmp_path / "b", champion=descriptor)
    assert champion_files(from_champion) == {
        "base_model": tmp_path / "b" / "base",
        CHAMPION_CASCADE: descriptor,
    }


def test_a_promoted_cascade_points_its_trained_tier_at_the_archived_model(tmp_path: Path) -> None:
    file = tmp_path / "compose" / "cascade.json"
    file.parent.mkdir()
    file.write_text(json.dumps(COMPOSED, indent=2, sort_keys=True) + "\n")
    before = file.read_bytes()
    archived = tmp_path / "archive" / "run-1" / "merged"
    champion = cascade_champion(file, archived, "run-1")

    digest = hashlib.sha256(before).hexdigest()
    assert champion["model"] == f"small-teacher-api@sha256:{digest}"  # the file as judged
    assert champion["run_id"] == "run-1"
    small, teacher, api = champion["components"]
    assert small == COMPOSED["components"][0] | {"path": str(archived)}
    assert (teacher, api) == (COMPOSED["components"][1], COMPOSED["components"][2])
    rest = {k: v for k, v in champion.items() if k not in ("components", "model", "run_id")}
    assert rest == {k: v for k, v in COMPOSED.items() if k != "components"}
    assert file.read_bytes() == before  # the judged file is left as it was
    # still a cascade to serve, and a descriptor the ledger takes
    assert read_cascade(champion, "champion").tiers[0].path == str(archived)
    assert parse_descriptor(champion, "champion").kind == "cascade"


def test_an_unnamed_cascade_is_named_cascade(tmp_path: Path) -> None:
    file = tmp_path / "cascade.json"
    file.write_text(json.dumps({k: v for k, v in COMPOSED.items() if k != "name"}))
    champion = cascade_champion(file, tmp_path / "m", "run-2")
    assert champion["model"].startswith("cascade@sha256:")
    assert "name" not in champion
