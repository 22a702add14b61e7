"""Command-line options generated from the settings models (`tuneloop.config.options`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer
from pydantic import Field
from typer.testing import CliRunner

from tuneloop.config import EvalConfig, Section, ServerConfig, TrainConfig
from tuneloop.config.options import flag, leaf_fields, settings_options
from tuneloop.errors import InputError
from tuneloop.train.command import TRAIN_ALIASES


def _capture(model: type, **kw: Any) -> tuple[typer.Typer, list[Any]]:
    """A one-command app that records the settings object the command receives."""
    seen: list[Any] = []

    @settings_options(model, param="settings", **kw)
    def cmd(name: str = typer.Option("x", help="An own option."), *, settings: Any) -> None:
        seen.append((name, settings))

    app = typer.Typer()
    app.command("cmd")(cmd)
    app.command("noop")(lambda: None)  # keeps `cmd` a sub-command
    return app, seen


def _run(app: typer.Typer, *args: str) -> Any:
    return CliRunner().invoke(app, ["cmd", *args])


def test_no_options_give_the_models_defaults() -> None:
    app, seen = _capture(TrainConfig)
    result = _run(app)
    assert result.exit_code == 0, result.output
    assert seen == [("x", TrainConfig())]


def test_every_leaf_setting_is_an_option_with_its_help() -> None:
    app, _ = _capture(TrainConfig)
    text = CliRunner().invoke(app, ["cmd", "--help"], env={"COLUMNS": "300"}).output
    for path, field in leaf_fields(TrainConfig):
        assert flag(path) in text
        assert (field.description or "").split("\n")[0][:30] in text
    assert "--lora-r" in text and "--grpo-group-size" in text


def test_values_nested_and_parsed() -> None:
    app, seen = _capture(TrainConfig)
    result = _run(
        app,
        *("--lora-r", "4", "--grpo-scorer", "exact", "--lora-target-modules", "q_proj,v_proj"),
        *("--extra", "{max_grad_norm: 0.5}", "--no-allow-contamination", "--data", "d.jsonl"),
        *("--name", "y"),
    )
    assert result.exit_code == 0, result.output
    name, s = seen[0]
    assert name == "y" and s.lora.r == 4 and s.grpo.scorer == "exact"
    assert s.lora.target_modules == ["q_proj", "v_proj"] and s.extra == {"max_grad_norm": 0.5}
    assert s.data == Path("d.jsonl") and s.allow_contamination is False


def test_deprecated_alias_warns_and_maps() -> None:
    app, seen = _capture(TrainConfig, aliases=TRAIN_ALIASES)
    result = _run(app, "--lr", "0.01", "--group-size", "4")
    assert result.exit_code == 0, result.output
    assert "--lr is deprecated; use --learning-rate" in result.output
    assert "--group-size is deprecated; use --grpo-group-size" in result.output
    assert seen[0][1].learning_rate == 0.01 and seen[0][1].grpo.group_size == 4
    help_text = CliRunner().invoke(app, ["cmd", "--help"], env={"COLUMNS": "300"}).output
    assert "--lr " not in help_text  # hidden


def test_invalid_values_name_the_option() -> None:
    app, _ = _capture(TrainConfig)
    result = _run(app, "--steps", "0", "--lora-dropout", "1", "--grpo-loss-type", "ppo")
    assert isinstance(result.exception, InputError)
    msg = str(result.exception)
    assert msg.startswith("3 invalid option(s)")
    assert "--steps: must be > 0 (got 0)" in msg and "--lora-dropout: must be < 1" in msg
    assert "--grpo-loss-type: Input should be 'dr_grpo'" in msg


def test_command_defaults_and_skips() -> None:
    app, seen = _capture(ServerConfig, defaults={"port": 8000}, skip=frozenset({"threads"}))
    assert _run(app).exit_code == 0
    assert seen[0][1].port == 8000 and ServerConfig().port == 0
    assert "--threads" not in CliRunner().invoke(app, ["cmd", "--help"]).output
    assert _run(app, "--threads", "2").exit_code == 2


def test_unknown_alias_target_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="unknown setting 'nope'"):
        settings_options(EvalConfig, param="s", aliases={"--old": "nope"})


def test_a_new_setting_needs_one_declaration() -> None:
    """What adding a setting costs: one field with a docstring; the option follows."""

    class Knobs(Section):
        steps: int = Field(default=3, gt=0)
        """Steps."""
        label_smoothing: float = Field(default=0.0, ge=0, lt=1)
        """Label smoothing of the SFT loss."""

    app, seen = _capture(Knobs)
    assert _run(app, "--label-smoothing", "0.1").exit_code == 0
    assert seen[0][1].label_smoothing == 0.1
    assert "Label smoothing of the SFT loss" in CliRunner().invoke(app, ["cmd", "--help"]).output
