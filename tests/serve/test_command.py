from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from tuneloop.errors import InputError
from tuneloop.serve.command import serve


def app() -> typer.Typer:
    app = typer.Typer()
    app.command()(serve)
    return app


def test_the_command_module_imports_nothing_heavy() -> None:
    code = (
        "import sys, tuneloop.serve, tuneloop.serve.command; "
        "heavy = {'torch', 'transformers', 'fastapi', 'uvicorn'} & set(sys.modules); "
        "sys.exit(sorted(heavy) or 0)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_serve_refuses_a_folder_without_a_model(tmp_path: Path) -> None:
    result = CliRunner().invoke(app(), [str(tmp_path)])
    assert isinstance(result.exception, InputError)
    assert "config.json" in str(result.exception)


def test_serve_refuses_an_unset_key_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "config.json").write_text("{}")
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    result = CliRunner().invoke(app(), [str(tmp_path), "--api-key-env", "NO_SUCH_KEY_VAR"])
    assert isinstance(result.exception, InputError)
    assert "NO_SUCH_KEY_VAR" in str(result.exception)


def test_python_m_app_exits_2_on_bad_input(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "tuneloop.serve.app", str(tmp_path)], capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert "config.json" in proc.stderr
