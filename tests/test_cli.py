"""The command map: help lists every command; input errors exit 2 with the message only."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tuneloop.cli import COMMANDS, GROUPS


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
    cfg = tmp_path / "loop.yaml"
    cfg.write_text("base_model: m\nsuite: {path: s.jsonl}\n")
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
