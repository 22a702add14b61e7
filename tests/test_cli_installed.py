"""The installed `tuneloop` script, run as a person runs it: exit statuses, no tracebacks.

Every command and group sub-command in the CLI table is called with a missing argument (where
it has a required one), an unknown option, and `--help`. Usage errors must exit 2 with the
command's usage line, the "Try '… --help'" hint and one "Error:" line; help exits 0. Then the
ordinary input mistakes (unwritable --out, a folder or non-UTF-8 file as input, out-of-range
numbers) must exit 2 with one line naming the file or option, and write nothing.

The calls are subprocesses of the console script in this interpreter's folder, not
`CliRunner`: the bug this guards against (typer vendoring its own click, so that our handler
no longer recognised its usage errors) only showed in the real entry point. They run in a
thread pool, once per module, and each test looks up its own result.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import typer

from tuneloop.cli import build_app

from . import installed
from .installed import Ran

# a valid loop config; `run` must refuse its workdir before any phase starts
ARITH = Path(__file__).resolve().parents[1] / "examples" / "arith" / "loop.yaml"


def _commands() -> list[tuple[str, ...]]:
    """The command path of every leaf command: ("run",), ("corpus", "build"), …"""
    root = typer.main.get_command(build_app())
    paths: list[tuple[str, ...]] = []

    def walk(cmd: object, path: tuple[str, ...]) -> None:
        children = getattr(cmd, "commands", None)
        if children is None:
            paths.append(path)
            return
        for name, child in sorted(children.items()):
            walk(child, (*path, name))

    walk(root, ())
    return paths


def _has_required_param(path: tuple[str, ...]) -> bool:
    cmd = typer.main.get_command(build_app())
    for name in path:
        cmd = cmd.commands[name]  # type: ignore[attr-defined]
    return any(getattr(p, "required", False) for p in cmd.params)


COMMANDS = _commands()
MISSING = [p for p in COMMANDS if _has_required_param(p)]


def _input_error_cases(tmp: Path) -> dict[str, tuple[str, ...]]:
    """Ordinary mistakes, each of which once ended in a traceback or a wrong status."""
    blocker = tmp / "a-file"
    blocker.write_text("not a folder\n")
    below_file = str(blocker / "out")
    latin1 = tmp / "latin1.jsonl"
    latin1.write_bytes(b'{"id": "a", "prompt": "1+1", "answer": "2"}\n{"id": "caf\xe9"}\n')
    latin1_yaml = tmp / "latin1.yaml"
    latin1_yaml.write_bytes(b"base_model: m\n# caf\xe9\nsuite: {path: s.jsonl}\n")
    utf8_yaml = tmp / "loop.yaml"
    utf8_yaml.write_text("base_model: m\nsuite: {path: s.jsonl}\n")
    out = ("--out", str(tmp / "o"))
    eval_ = ("eval", "--endpoint", "http://127.0.0.1:9", "--model", "m")
    gate = ("gate", "--champion", str(tmp), "--challenger", str(tmp), "--slice", "gate")
    power = ("power", "--pilot", str(tmp), "--effect")
    train = ("train", "--base", str(tmp), "--data", str(latin1))
    return {
        "eval --out below a file": (*eval_, "--suite", str(latin1), "--out", below_file),
        "compare --out below a file": ("compare", str(tmp), str(tmp), "--out", below_file),
        "train --out below a file": (*train, "--out", below_file),
        "train --steps 0": (*train, "--steps", "0", *out),
        "train --lr nan": (*train, "--lr", "nan", *out),
        "train --lora-dropout 1": (*train, "--lora-dropout", "1", *out),
        "merge --out below a file": (
            "merge",
            "--base",
            str(tmp),
            "--zero-adapter",
            "--out",
            below_file,
        ),
        "run with its workdir below a file": ("run", str(ARITH), f"workdir={below_file}"),
        "check a folder": ("check", str(tmp)),
        "check a non-UTF-8 config": ("check", str(latin1_yaml)),
        "check a bad override": ("check", str(utf8_yaml), "train.steps=["),
        "eval a non-UTF-8 suite": (*eval_, "--suite", str(latin1), *out),
        "eval a folder as suite": (*eval_, "--suite", str(tmp), *out),
        "eval --slices nan": (*eval_, "--suite", str(latin1), *out, "--slices", "dev=nan"),
        "gate a non-UTF-8 suite": (*gate, "--suite", str(latin1), "--ledger", str(tmp / "l.db")),
        "serve --port 70000": ("serve", str(tmp), "--port", "70000"),
        "serve --port -1": ("serve", str(tmp), "--port", "-1"),
        "serve --port abc": ("serve", str(tmp), "--port", "abc"),
        "power --effect 5": (*power, "5"),
        "power --effect 0": (*power, "0"),
        "power --effect -0.1": (*power, "-0.1"),
        "power --effect nan": (*power, "nan"),
        "power --effect abc": (*power, "abc"),
    }


# what each input error must say, on its one line
EXPECTED = {
    "eval --out below a file": "a-file is a file, not a folder",
    "compare --out below a file": "a-file is a file, not a folder",
    "train --out below a file": "a-file is a file, not a folder",
    "train --steps 0": "--steps: must be > 0 (got 0)",
    "train --lr nan": "--learning-rate: must be > 0 (got nan)",  # --lr: a deprecated alias
    "train --lora-dropout 1": "--lora-dropout: must be < 1 (got 1.0)",
    "merge --out below a file": "a-file is a file, not a folder",
    "run with its workdir below a file": "a-file/out: cannot create or write it (Not a directory",
    "check a folder": "is a folder, expected a config file",
    "check a non-UTF-8 config": "latin1.yaml:2: not UTF-8 text",
    "check a bad override": "override 'train.steps=[': the value is not valid YAML",
    "eval a non-UTF-8 suite": "latin1.jsonl:2: not UTF-8 text",
    "eval a folder as suite": "is a folder, expected a suite file",
    "eval --slices nan": "--slices: the fraction of slice 'dev' must lie in (0, 1]",
    "gate a non-UTF-8 suite": "latin1.jsonl:2: not UTF-8 text",
    "serve --port 70000": "--port: must be <= 65535 (got 70000)",
    "serve --port -1": "--port: must be >= 0 (got -1)",
    "power --effect 5": "--effect must lie in (0, 1]",
    "power --effect 0": "--effect must lie in (0, 1]",
    "power --effect -0.1": "--effect must lie in (0, 1]",
    "power --effect nan": "--effect must lie in (0, 1]",
    "power --effect abc": "'--effect'",
    "serve --port abc": "'--port'",
}


@pytest.fixture(scope="module")
def tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cli-installed")


@pytest.fixture(scope="module")
def cases(tmp: Path) -> dict[str, tuple[str, ...]]:
    return _input_error_cases(tmp)


@pytest.fixture(scope="module")
def results(cases: dict[str, tuple[str, ...]], tmp: Path) -> Iterator[dict[tuple[str, ...], Ran]]:
    calls = [(*p, "--no-such-option") for p in COMMANDS]
    calls += [(*p, "--help") for p in COMMANDS]
    calls += [p for p in MISSING]
    calls += [(group,) for group in {p[0] for p in COMMANDS if len(p) > 1}]
    calls += [("no-such-command",)]
    calls += list(cases.values())

    def call(args: tuple[str, ...]) -> Ran:
        return installed.tuneloop(*args, cwd=tmp, timeout=120)

    with ThreadPoolExecutor(max_workers=4) as pool:
        yield {d.args: d for d in pool.map(call, calls)}


def _assert_usage_error(done: Ran, path: tuple[str, ...]) -> None:
    command = " ".join(("tuneloop", *path))
    assert done.code == 2, done.output
    assert "Traceback" not in done.output
    assert f"Usage: {command} " in done.stderr, done.stderr
    assert f"Try '{command} --help' for help." in done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, done.stderr


def test_every_command_is_exercised() -> None:
    names = {p[0] for p in COMMANDS}
    assert {"run", "eval", "serve", "check", "corpus", "archive"} <= names
    assert ("corpus", "build") in COMMANDS and ("run",) in MISSING


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_unknown_option_is_a_usage_error(
    results: dict[tuple[str, ...], Ran], path: tuple[str, ...]
) -> None:
    done = results[(*path, "--no-such-option")]
    _assert_usage_error(done, path)
    assert "No such option: --no-such-option" in done.stderr


@pytest.mark.parametrize("path", MISSING, ids=" ".join)
def test_missing_argument_is_a_usage_error(
    results: dict[tuple[str, ...], Ran], path: tuple[str, ...]
) -> None:
    done = results[path]
    _assert_usage_error(done, path)
    assert "Error: Missing " in done.stderr


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_help_exits_0(results: dict[tuple[str, ...], Ran], path: tuple[str, ...]) -> None:
    done = results[(*path, "--help")]
    assert done.code == 0, done.output
    assert f"Usage: tuneloop {' '.join(path)} " in done.stdout
    assert "Traceback" not in done.output


def test_unknown_command_and_bare_group(results: dict[tuple[str, ...], Ran]) -> None:
    done = results[("no-such-command",)]
    _assert_usage_error(done, ())
    assert "No such command 'no-such-command'" in done.stderr
    for group in {p[0] for p in COMMANDS if len(p) > 1}:
        bare = results[(group,)]
        assert bare.code == 2 and "Traceback" not in bare.output, bare.output
        assert f"Usage: tuneloop {group} " in bare.output


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_input_errors_exit_2_with_one_line(
    results: dict[tuple[str, ...], Ran], cases: dict[str, tuple[str, ...]], case: str
) -> None:
    done = results[cases[case]]
    assert done.code == 2, done.output
    assert "Traceback" not in done.output
    assert EXPECTED[case] in done.stderr, done.stderr
    messages = [line for line in done.stderr.splitlines() if line.startswith(("error:", "Error:"))]
    assert len(messages) == 1, done.stderr


def test_input_errors_write_nothing(results: dict[tuple[str, ...], Ran], tmp: Path) -> None:
    assert results  # every call has finished
    left = sorted(p.name for p in tmp.iterdir())
    assert left == ["a-file", "latin1.jsonl", "latin1.yaml", "loop.yaml"], left
    assert (tmp / "a-file").read_text() == "not a folder\n"
