"""`tuneloop eval` as a typer command (built alone: other commands may not exist yet)."""

from __future__ import annotations

import pytest
import typer
from typer.testing import CliRunner

from tuneloop.config import parse_slice_fractions as parse_slices
from tuneloop.errors import InputError
from tuneloop.evaluate.command import evaluate
from tuneloop.samplelog import load_sample_log


def app() -> typer.Typer:
    cli = typer.Typer()
    cli.command("eval")(evaluate)
    cli.command("noop")(lambda: None)  # a second command keeps `eval` as a sub-command
    return cli


def test_eval_command_writes_a_sample_log(fake_server, small_suite, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_KEY", "sk-test")
    out = tmp_path / "out"
    result = CliRunner().invoke(
        app(),
        [
            "eval",
            "--endpoint",
            fake_server.url + "/v1",
            "--model",
            "fake",
            "--suite",
            str(small_suite),
            "--out",
            str(out),
            "--slice",
            "gate",
            "--slices",
            "dev=0.5,gate=0.5",
            "--n-samples",
            "3",
            "--seed",
            "5",
            "--concurrency",
            "4",
            "--api-key-env",
            "FAKE_KEY",
            "--no-progress",
        ],
    )
    assert result.exit_code == 0, result.output
    summary, rows = load_sample_log(out)
    assert summary.slice == "gate" and summary.sampling.seed == 5
    assert len(rows) == 3 * len(summary.item_ids) and "mean score" in result.output


def test_missing_api_key_env_is_an_input_error(small_suite, tmp_path) -> None:
    result = CliRunner().invoke(
        app(),
        [
            "eval",
            "--endpoint",
            "http://127.0.0.1:9",
            "--model",
            "m",
            "--suite",
            str(small_suite),
            "--out",
            str(tmp_path / "o"),
            "--api-key-env",
            "TUNELOOP_NO_SUCH_VAR",
        ],
    )
    assert isinstance(result.exception, InputError)
    assert "TUNELOOP_NO_SUCH_VAR is not set" in str(result.exception)


def test_parse_slices() -> None:
    assert parse_slices("dev=0.25, gate=0.5") == {"dev": 0.25, "gate": 0.5}
    with pytest.raises(InputError, match="NAME=FRACTION"):
        parse_slices("dev:0.5")


def test_command_module_imports_nothing_heavy() -> None:
    import subprocess
    import sys

    code = (
        "import sys, tuneloop.evaluate.command\n"
        "heavy = {'torch', 'transformers', 'fastapi', 'matplotlib', 'scipy', 'httpx', 'rich'}\n"
        "print(sorted(heavy & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
