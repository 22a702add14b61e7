"""The `tuneloop` command: a map from command names to the imported command functions.

Each phase keeps its command functions (typer-annotated, thin) in `<phase>/command.py`; this
module only names them, and `tests/test_cli.py` fails when a command module defines a command
that is not mapped here. A group's command that must live above the group's package
(`archive reproduce` runs the loop) is named in `GROUP_COMMANDS` and added to its group here.
Command modules import nothing heavy at module level (torch, transformers, vLLM, uvicorn load
inside the command that needs them), so importing them all keeps `--help` fast and `tuneloop
check` torch-free. Exit statuses are the table in
`tuneloop.errors`; a usage or input error is one message that names the file, line or key (for
a usage error, after the command's usage line).

Running an app as a console script (exit statuses, usage errors) is `tuneloop.entry.run_app`,
shared with the embedded server's own entry point.
"""

from __future__ import annotations

from collections.abc import Callable

import typer

from tuneloop.archive.command import archive_app
from tuneloop.cascade.command import compose
from tuneloop.commands import check, plugins
from tuneloop.data.command import corpus_app, ingest
from tuneloop.entry import run_app
from tuneloop.evaluate.command import evaluate
from tuneloop.evaluate.judge_command import judge_app
from tuneloop.flywheel.command import status
from tuneloop.flywheel.watch.command import approve, watch
from tuneloop.gate.command import champion, gate, ledger_app
from tuneloop.loop.command import reproduce, run
from tuneloop.replay.command import replay
from tuneloop.report.command import compare, power
from tuneloop.selection.command import select
from tuneloop.serve.command import proxy, serve
from tuneloop.shadow.command import shadow_app
from tuneloop.train.command import doctor, merge, train
from tuneloop.view.command import view

COMMANDS: dict[str, Callable[..., None]] = {
    "check": check,
    "plugins": plugins,
    "serve": serve,
    "proxy": proxy,
    "eval": evaluate,
    "compare": compare,
    "power": power,
    "select": select,
    "train": train,
    "merge": merge,
    "doctor": doctor,
    "ingest": ingest,
    "replay": replay,
    "gate": gate,
    "champion": champion,
    # approve: a gate promotion, or (--config) a watcher round's spend; the flywheel reads both
    "compose": compose,
    "approve": approve,
    "run": run,
    "watch": watch,
    "status": status,
    "view": view,
}
"""name → command function."""
GROUPS: dict[str, typer.Typer] = {
    "corpus": corpus_app,
    "archive": archive_app,
    "ledger": ledger_app,
    "judge": judge_app,
    "shadow": shadow_app,
}
"""name → a group of sub-commands."""
GROUP_COMMANDS: dict[str, dict[str, Callable[..., None]]] = {
    # it runs the loop, which the archive phase may not import (a phase never imports the loop)
    "archive": {"reproduce": reproduce},
}
"""group name → sub-command name → a command defined above the group's own package."""
for _group, _commands in GROUP_COMMANDS.items():
    for _name, _command in _commands.items():
        GROUPS[_group].command(_name)(_command)


def build_app() -> typer.Typer:
    app = typer.Typer(
        name="tuneloop",
        help="The closed improvement loop for language models: serve, evaluate, train, "
        "merge, re-evaluate, decide with paired statistics, archive.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )
    for name, command in COMMANDS.items():
        app.command(name)(command)
    for name, group in GROUPS.items():
        app.add_typer(group, name=name)
    return app


def main() -> None:
    run_app(build_app())
