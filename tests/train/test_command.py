from __future__ import annotations

import json
import shutil
from pathlib import Path

import typer
from typer.testing import CliRunner

from tuneloop.errors import InputError
from tuneloop.train import command


def _app() -> typer.Typer:
    app = typer.Typer()
    for fn in (command.train, command.merge, command.doctor):
        app.command(fn.__name__)(fn)
    return app


def test_doctor_exit_codes(tiny_model: Path, tmp_path: Path) -> None:
    copy = Path(shutil.copytree(tiny_model, tmp_path / "m"))
    gen = json.loads((copy / "generation_config.json").read_text())
    gen["eos_token_id"] = 0
    (copy / "generation_config.json").write_text(json.dumps(gen))
    result = CliRunner().invoke(_app(), ["doctor", str(copy)])
    assert result.exit_code == 1
    assert "stop_tokens" in result.output and "FAIL" in result.output


def test_merge_needs_exactly_one_of_adapter_or_zero(tiny_model: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        _app(), ["merge", "--base", str(tiny_model), "--out", str(tmp_path / "o")]
    )
    assert isinstance(result.exception, InputError)
    result = CliRunner().invoke(
        _app(), ["merge", "--base", str(tiny_model), "--out", str(tmp_path / "o"), "--zero-adapter"]
    )
    assert result.exit_code == 0, result.output
    assert (tmp_path / "o" / "lineage.json").is_file()


def test_train_command_runs_sft(tiny_model: Path, prompts: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        _app(),
        [
            "train",
            "--method",
            "sft",
            "--base",
            str(tiny_model),
            "--data",
            str(prompts),
            "--out",
            str(tmp_path / "a"),
            "--steps",
            "1",
            "--batch-size",
            "2",
            "--lora-r",
            "4",
            "--target-modules",
            "q_proj,v_proj",
            "--no-progress",
        ],
    )
    assert result.exit_code == 0, result.output
    cfg = json.loads((tmp_path / "a" / "adapter_config.json").read_text())
    assert sorted(cfg["target_modules"]) == ["q_proj", "v_proj"]


def test_train_takes_the_walk_back_settings_as_options(
    tiny_model: Path, prompts: Path, tmp_path: Path
) -> None:
    """`train.health.on_unhealthy` and `reward_drop` are options of the installed command; a bad
    value exits 2 naming the option, before anything is written."""
    from ..installed import tuneloop

    common = ("train", "--base", tiny_model, "--data", prompts, "--out", tmp_path / "a")
    ran = tuneloop(*common, "--health-on-unhealthy", "retry")
    ran.assert_input_error("--health-on-unhealthy", "walk_back")
    ran = tuneloop(*common, "--health-reward-drop", "0")
    ran.assert_input_error("--health-reward-drop: must be > 0")
    assert not (tmp_path / "a").exists() and not (tmp_path / "a.partial").exists()
    assert "--health-on-unhealthy" in tuneloop("train", "--help", env={"COLUMNS": "240"}).stdout
