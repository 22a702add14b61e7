"""The command map: help lists every command; input errors exit 2 with the message only."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import typer

from tuneloop.cli import COMMANDS, GROUPS, run_app
from tuneloop.errors import (
    EXIT_INTERRUPTED,
    EXIT_PHASE_FAILED,
    EXIT_USAGE,
    InputError,
    PhaseFailed,
)


def tuneloop(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tuneloop", *args], capture_output=True, text=True, timeout=120
    )


def test_help_lists_every_command() -> None:
    done = tuneloop("--help")
    assert done.returncode == 0, done.stderr
    for name in [*COMMANDS, *GROUPS]:
        assert f" {name} " in done.stdout, name


def test_check_reports_all_errors_and_exits_2(tmp_path: Path) -> None:
    cfg = tmp_path / "loop.yaml"
    cfg.write_text("base_model: m\nsuite: {path: s}\ntrain: {steps: 0, lr: 1}\neval: {top_p: 2}\n")
    done = tuneloop("check", str(cfg))
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "train.steps (line 3): must be > 0 (got 0)" in done.stderr
    assert "train.lr (line 3): unknown key" in done.stderr
    assert "eval.top_p (line 4): must be <= 1 (got 2)" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["loop.yaml"]


def test_check_prints_resolved_config(tmp_path: Path) -> None:
    # check also preflights the inputs (tests/loop/test_preflight.py), so they must exist
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text("{}")
    items = "".join(
        f'{{"id": "q{i}", "prompt": "{i}+1=", "answer": "{i + 1}"}}\n' for i in range(99)
    )
    (tmp_path / "s.jsonl").write_text(items)
    (tmp_path / "t.jsonl").write_text('{"prompt": "1+1=", "answer": "2"}\n')
    cfg = tmp_path / "loop.yaml"
    cfg.write_text("base_model: m\nsuite: {path: s.jsonl}\ntrain: {data: t.jsonl}\n")
    done = tuneloop("check", str(cfg), "train.steps=7")
    assert done.returncode == 0, done.stderr
    assert f"base_model: {tmp_path.resolve() / 'm'}" in done.stdout
    assert "steps: 7" in done.stdout


def test_unknown_phase_is_a_usage_error(tmp_path: Path) -> None:
    cfg = tmp_path / "loop.yaml"
    cfg.write_text("base_model: m\nsuite: {path: s.jsonl}\n")
    done = tuneloop("run", str(cfg), "--only", "trian")
    assert done.returncode == 2
    assert "did you mean 'train'" in done.stderr


def _exit_status(
    raise_: BaseException | None, argv: list[str], monkeypatch: pytest.MonkeyPatch
) -> int:
    app = typer.Typer(add_completion=False)

    @app.command()
    def go(n: int = 1) -> None:
        if raise_ is not None:
            raise raise_

    monkeypatch.setattr(sys, "argv", ["tuneloop-test", *argv])
    with pytest.raises(SystemExit) as ended:
        run_app(app)
    return int(ended.value.code or 0)


def test_run_app_maps_errors_to_the_exit_table(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _exit_status(None, [], monkeypatch) == 0
    assert _exit_status(InputError("bad.yaml:3: no"), [], monkeypatch) == EXIT_USAGE
    assert "error: bad.yaml:3: no" in capsys.readouterr().err
    assert _exit_status(PhaseFailed("train died"), [], monkeypatch) == EXIT_PHASE_FAILED
    assert _exit_status(KeyboardInterrupt(), [], monkeypatch) == EXIT_INTERRUPTED
    assert _exit_status(typer.Exit(1), [], monkeypatch) == 1
    assert _exit_status(None, ["--n", "x"], monkeypatch) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "Usage: tuneloop-test [OPTIONS]" in err and "Invalid value for '--n'" in err
    assert _exit_status(None, ["--help"], monkeypatch) == 0


def test_the_server_module_entry_point_exits_2_on_a_usage_error(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tuneloop.serve.app", str(tmp_path), "--port", "70000"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert "--port: must be <= 65535 (got 70000)" in done.stderr
