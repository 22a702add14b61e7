"""`portfolio:` refused at load and at `tuneloop check` (exit 2), each naming its key."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.installed import tuneloop
from tests.loop import fakeloop
from tuneloop.config import load_config
from tuneloop.errors import InputError
from tuneloop.loop.portfolio import expand
from tuneloop.loop.preflight import preflight

ARITH = Path(__file__).resolve().parents[2] / "examples" / "arith"


def write(tmp_path: Path, portfolio: object, **suite: object) -> Path:
    slices = suite.pop("slices", {"dev": 0.25, "validation": 0.25, "gate": 0.5})
    return fakeloop.write_config(tmp_path, portfolio=portfolio, suite={"slices": slices, **suite})


def budget(**b: object) -> dict[str, object]:
    return {"max_seconds": 100, "seconds_per_step": 0.1} | b


def load_error(path: Path) -> str:
    with pytest.raises(InputError) as err:
        load_config(path)
    return str(err.value)


def test_an_unknown_override_key_names_the_challenger_and_the_close_key(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        {
            "challengers": [{"name": "fast", "overrides": {"train.learnng_rate": 1}}],
            "budget": budget(),
        },
    )
    message = load_error(path)
    assert "portfolio.challengers.0 (line" in message
    assert "challenger 'fast': unknown key 'train.learnng_rate'" in message
    assert "did you mean 'learning_rate'" in message


def test_an_override_outside_the_recipe_is_refused(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        {"challengers": [{"name": "a", "overrides": {"eval.temperature": 1}}], "budget": budget()},
    )
    assert "not part of the training recipe" in load_error(path)


def test_two_challengers_with_one_name(tmp_path: Path) -> None:
    twice = [{"name": "a"}, {"name": "a", "overrides": {"train.steps": 5}}]
    path = write(tmp_path, {"challengers": twice, "budget": budget()})
    assert "two challengers are named 'a'" in load_error(path)


def test_an_empty_portfolio_and_a_zero_budget(tmp_path: Path) -> None:
    assert "the portfolio is empty" in load_error(
        write(tmp_path, {"challengers": [], "budget": budget()})
    )
    (tmp_path / "b").mkdir()
    message = load_error(
        write(tmp_path / "b", {"challengers": [{"name": "a"}], "budget": budget(max_seconds=0)})
    )
    assert "portfolio.budget.max_seconds (line" in message and "must be > 0" in message


def test_a_validation_slice_overlapping_the_gate_slice_at_check(tmp_path: Path) -> None:
    # `gate` takes the whole suite here, so `validation` is inside it
    path = write(
        tmp_path,
        {"challengers": [{"name": "a"}], "budget": budget(), "selection": {"slice": "dev"}},
        slices={"dev": 0.5, "gate": 0.5},
    )
    found = preflight(load_config(path))
    assert not any(e.key == "portfolio.selection.slice" for e in found.errors)
    (tmp_path / "b").mkdir()
    same = write(
        tmp_path / "b",
        {"challengers": [{"name": "a"}], "budget": budget(), "selection": {"slice": "gate"}},
        slices={"dev": 0.5, "gate": 0.5},
    )
    errors = {e.key: e.message for e in preflight(load_config(same)).errors}
    assert "is the gate slice" in errors["portfolio.selection.slice"]
    (tmp_path / "c").mkdir()
    union = write(
        tmp_path / "c",
        {"challengers": [{"name": "a"}], "budget": budget(), "selection": {"slice": "dev+gate"}},
        slices={"dev": 0.5, "gate": 0.5},
    )
    errors = {e.key: e.message for e in preflight(load_config(union)).errors}
    assert "shares 111 items with the gate slice 'gate'" in errors["portfolio.selection.slice"]


def test_check_refuses_each_mistake_with_exit_2(tmp_path: Path) -> None:
    """The installed script: a config over budget, and one without a step time."""
    over = write(
        tmp_path,
        {"challengers": [{"name": "a"}, {"name": "b"}], "budget": budget(max_seconds=1)},
    )
    ran = tuneloop("check", over)
    assert ran.code == 2, ran.stderr
    assert "portfolio.budget.max_seconds" in ran.stderr and "Traceback" not in ran.stderr
    (tmp_path / "c").mkdir()
    unknown = write(tmp_path / "c", {"challengers": [{"name": "a"}], "budget": {"max_seconds": 10}})
    ran = tuneloop("check", unknown)
    assert ran.code == 2 and "cannot be estimated" in ran.stderr


def test_stages_expand_family_first_then_refine_one_factor_in_turn(tmp_path: Path) -> None:
    stages = [
        {"stage": "family", "values": ["sft", "dpo"]},
        {"stage": "refine", "factor": "train.learning_rate", "values": [0.001, 0.003]},
        {"stage": "refine", "factor": "train.lora.r", "values": [16, 64]},
    ]
    cfg = load_config(write(tmp_path, {"stages": stages, "budget": budget()}))
    assert cfg.portfolio is not None
    family = expand(cfg.portfolio, None)
    assert [(c.name, c.overrides, c.origin) for c in family] == [
        ("method=sft", {"train.method": "sft"}, "family"),
        ("method=dpo", {"train.method": "dpo"}, "family"),
    ]
    recipe = {"train": {"method": "dpo", "steps": 7}, "data.output": None}
    first = expand(cfg.portfolio, recipe, refined=0)
    assert [c.name for c in first] == ["learning_rate=0.001", "learning_rate=0.003"]
    assert first[0].overrides == {
        "train.method": "dpo",
        "train.steps": 7,
        "train.learning_rate": 0.001,
    }
    assert [c.name for c in expand(cfg.portfolio, recipe, refined=1)] == ["r=16", "r=64"]
    paths = cfg.portfolio.model_copy(
        update={"stages": [], "stage": "family", "factor": "train.data", "values": ["a/b.jsonl"]}
    )
    assert [c.name for c in expand(paths, None)] == ["data=b.jsonl"]
    with pytest.raises(InputError, match="refine varies the champion's recipe"):
        expand(
            cfg.portfolio.model_copy(
                update={"stages": [], "stage": "refine", "factor": "train.steps", "values": [1]}
            ),
            None,
        )


def test_the_demo_portfolio_checks(tmp_path: Path) -> None:
    cfg = load_config(ARITH / "loop_portfolio.yaml")
    assert cfg.portfolio is not None and len(cfg.portfolio.challengers) >= 3
    grpo = next(c for c in cfg.portfolio.challengers if c.name == "grpo")
    assert Path(grpo.overrides["train.sft_warmup_data"]).is_absolute()  # resolved by the file
    data = yaml.safe_load((ARITH / "loop_portfolio.yaml").read_text())
    assert data["gate"]["adjudicate"] == "selected"
