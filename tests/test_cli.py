"""The command map: help lists every command; input errors exit 2 with the message only."""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.models import ParameterInfo

from tests.modelfiles import write_model_files
from tuneloop.cli import COMMANDS, GROUPS
from tuneloop.entry import run_app
from tuneloop.errors import (
    EXIT_INTERRUPTED,
    EXIT_PHASE_FAILED,
    EXIT_USAGE,
    InputError,
    PhaseFailed,
)

TUNELOOP = Path(sys.executable).parent / "tuneloop"
"""The installed console script."""


def tuneloop(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tuneloop", *args], capture_output=True, text=True, timeout=120
    )


def test_help_lists_every_command() -> None:
    done = tuneloop("--help")
    assert done.returncode == 0, done.stderr
    for name in [*COMMANDS, *GROUPS]:
        assert f" {name} " in done.stdout, name


SRC = Path(__file__).resolve().parents[1] / "src"
DELEGATED = {
    # command-shaped functions that another command calls instead of the map naming them
    "tuneloop.gate.command.approve": "`tuneloop approve` (the flywheel's) hands it a gate run id",
}
"""Command-shaped functions the map deliberately does not name, each with the reason."""


def _command_modules() -> list[str]:
    paths = [SRC / "tuneloop" / "commands.py", *(SRC / "tuneloop").rglob("*command.py")]
    return sorted(".".join(p.relative_to(SRC).with_suffix("").parts) for p in paths)


def _is_command(fn: object, module: str) -> bool:
    """A public function of `module` whose every parameter is a typer option or argument."""
    if not inspect.isfunction(fn) or fn.__module__ != module or fn.__name__.startswith("_"):
        return False
    return all(
        _is_typer_parameter(p.annotation, fn) for p in inspect.signature(fn).parameters.values()
    )


def _is_typer_parameter(annotation: object, fn: object) -> bool:
    """`Annotated[..., typer.Option(...)]`, the annotation written as a string or not (typer
    evaluates it at run time, so a command's annotations always evaluate)."""
    if isinstance(annotation, str):
        try:
            annotation = eval(annotation, vars(sys.modules[fn.__module__]))  # noqa: S307
        except NameError:  # a TYPE_CHECKING-only type: not a command's parameter
            return False
    return any(isinstance(m, ParameterInfo) for m in getattr(annotation, "__metadata__", ()))


def test_the_map_names_every_command_of_every_command_module() -> None:
    """A command function or group defined in a command module but missing from the map
    would never be reachable from `tuneloop`."""
    mapped = set(COMMANDS.values()) | {
        c.callback for group in GROUPS.values() for c in group.registered_commands
    }
    missing = []
    for name in _command_modules():
        module = importlib.import_module(name)
        for attr, obj in vars(module).items():
            dotted = f"{name}.{attr}"
            if isinstance(obj, typer.Typer) and obj not in GROUPS.values():
                missing.append(f"{dotted} (a group)")
            elif _is_command(obj, name) and obj not in mapped and dotted not in DELEGATED:
                missing.append(dotted)
    assert not missing, "commands missing from tuneloop.cli's map: " + ", ".join(missing)
    assert {f.__module__ for f in COMMANDS.values()} <= set(_command_modules())


def test_the_command_map_loads_nothing_heavy() -> None:
    """Every command module is imported for `--help`; their heavy imports stay inside the
    commands, so `--help` and `tuneloop check` stay fast and torch-free."""
    heavy = [
        "torch",
        "transformers",
        "trl",
        "peft",
        "vllm",
        "mlflow",
        "ray",
        "uvicorn",
        "fastapi",
        "aiohttp",
        "datasets",
        "deepspeed",
        "bitsandbytes",
    ]
    code = (
        "import sys, tuneloop.cli; tuneloop.cli.build_app(); "
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & {set(heavy)!r}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


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


def test_check_reports_schema_and_semantic_errors_together(tmp_path: Path) -> None:
    """An unknown key and a negative LoRA rank (schema) with an unknown backend and trainer
    (preflight): one run of the installed script reports all four, each with key and line."""
    (tmp_path / "m").mkdir()
    write_model_files(tmp_path / "m")
    (tmp_path / "s.jsonl").write_text('{"id": "q", "prompt": "1+1=", "answer": "2"}\n')
    cfg = tmp_path / "loop.yaml"
    cfg.write_text(
        "base_model: m\n"
        "serve: {backend: embeded}\n"
        "suite: {path: s.jsonl}\n"
        "train:\n"
        "  method: sfft\n"
        "  stesp: 5\n"
        "  lora: {r: -1}\n"
    )
    done = subprocess.run(
        [str(TUNELOOP), "check", str(cfg)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert "train.stesp (line 6): unknown key (did you mean 'steps'?)" in done.stderr
    assert "train.lora.r (line 7): must be > 0 (got -1)" in done.stderr
    assert "serve.backend (line 2): unknown serve backend 'embeded'" in done.stderr
    assert "train.method (line 5): unknown trainer 'sfft'" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["loop.yaml", "m", "s.jsonl"]


@pytest.mark.parametrize(
    "how",
    [("run",), ("run", "--plan"), ("run", "--round", "next")],
    ids=" ".join,
)
def test_run_reports_schema_and_semantic_errors_together(
    tmp_path: Path, how: tuple[str, ...]
) -> None:
    """`tuneloop run` (also `--plan`, and a flywheel round) reports an unknown key (schema)
    and an unknown backend (preflight) in one report, as `check` does, and creates nothing:
    no workdir, no ledger, no archive."""
    (tmp_path / "m").mkdir()
    write_model_files(tmp_path / "m")
    items = "".join(
        f'{{"id": "q{i}", "prompt": "{i}+1=", "answer": "{i + 1}"}}\n' for i in range(99)
    )
    (tmp_path / "s.jsonl").write_text(items)
    round_run = "--round" in how
    cfg = tmp_path / "loop.yaml"
    cfg.write_text(
        f"base_model: {'champion' if round_run else 'm'}\n"
        "serve: {backend: embeded}\n"
        "suite:\n"
        "  path: s.jsonl\n"
        "  rolling: {audit_fraction: 0.2, gate_size: 40}\n"
        "train:\n"
        "  stesp: 5\n"
        "flywheel: {bootstrap: m}\n"
    )
    done = subprocess.run(
        [str(TUNELOOP), *how, str(cfg)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert "train.stesp (line 7): unknown key (did you mean 'steps'?)" in done.stderr
    assert "serve.backend (line 2): unknown serve backend 'embeded'" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["loop.yaml", "m", "s.jsonl"]


def test_check_prints_resolved_config(tmp_path: Path) -> None:
    # check also preflights the inputs (tests/loop/preflight/test_checks.py), so they must exist
    (tmp_path / "m").mkdir()
    write_model_files(tmp_path / "m")
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
