"""The `tuneloop` command: a map from command names to plain functions, and nothing else.

Each phase keeps its command functions (typer-annotated, thin) in `<phase>/command.py`; this
module only names them. Command modules import nothing heavy at module level, so `--help`
stays fast. Exit statuses are the table in `tuneloop.errors`; a usage or input error is one
message that names the file, line or key (for a usage error, after the command's usage line).

Running an app as a console script (exit statuses, usage errors) is `tuneloop.entry.run_app`,
shared with the embedded server's own entry point.
"""

from __future__ import annotations

import importlib
from typing import Any

import typer

from tuneloop.entry import run_app as run_app

# name -> "module:function" (a command) or "module:app" (a group of sub-commands)
COMMANDS: dict[str, str] = {
    "check": "tuneloop.commands:check",
    "plugins": "tuneloop.commands:plugins",
    "serve": "tuneloop.serve.command:serve",
    "proxy": "tuneloop.serve.proxy_command:proxy",
    "eval": "tuneloop.evaluate.command:evaluate",
    "compare": "tuneloop.report.command:compare",
    "power": "tuneloop.report.command:power",
    "train": "tuneloop.train.command:train",
    "merge": "tuneloop.train.command:merge",
    "doctor": "tuneloop.train.command:doctor",
    "ingest": "tuneloop.data.command:ingest",
    "replay": "tuneloop.replay.command:replay",
    "gate": "tuneloop.gate.command:gate",
    "champion": "tuneloop.gate.command:champion",
    # approve: a gate promotion, or (--config) a watcher round's spend; the flywheel reads both
    "approve": "tuneloop.flywheel.watch_command:approve",
    "run": "tuneloop.loop.command:run",
    "watch": "tuneloop.flywheel.watch_command:watch",
    "status": "tuneloop.flywheel.command:status",
    "view": "tuneloop.view.command:view",
}
GROUPS: dict[str, str] = {
    "corpus": "tuneloop.data.command:corpus_app",
    "archive": "tuneloop.archive.command:archive_app",
    "ledger": "tuneloop.gate.command:ledger_app",
}


def _load(target: str) -> Any:
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def build_app() -> typer.Typer:
    app = typer.Typer(
        name="tuneloop",
        help="The closed improvement loop for language models: serve, evaluate, train, "
        "merge, re-evaluate, decide with paired statistics, archive.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )
    for name, target in COMMANDS.items():
        app.command(name)(_load(target))
    for name, target in GROUPS.items():
        app.add_typer(_load(target), name=name)
    return app


def main() -> None:
    run_app(build_app())
