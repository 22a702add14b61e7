"""`tuneloop view`: the flywheel's dashboard, served locally or written as a static site.

    tuneloop view loop.yaml --serve [--port 8150]        # http://127.0.0.1:8150/, read-only
    tuneloop view loop.yaml --bundle review/dashboard    # index.html + runs/*/report.html
    tuneloop view --ledger runs/flywheel/ledger.db --bundle DIR

The loop.yaml names the ledger, the archives and the workdir as `tuneloop status` reads them
(view/sources.py); `--ledger` alone shows a ledger without its config. Exactly one of `--serve`
and `--bundle`. Bad input (no ledger at the path, a bundle folder holding other files, a
non-loopback `--host` without `--allow-remote`) exits 2 before anything is read or bound.
Nothing heavy is imported at module level.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from tuneloop.errors import InputError

if TYPE_CHECKING:
    from tuneloop.view.sources import Sources


def view(
    config: Annotated[
        Path | None,
        typer.Argument(help="The loop.yaml whose ledger, archives and rounds to show."),
    ] = None,
    ledger: Annotated[
        Path | None,
        typer.Option(help="The ledger file (gate.ledger); replaces the config's, or alone."),
    ] = None,
    serve: Annotated[
        bool, typer.Option("--serve", help="Serve the dashboard on loopback (read-only).")
    ] = False,
    bundle: Annotated[
        Path | None,
        typer.Option(help="Write the dashboard and the runs' reports into this folder."),
    ] = None,
    host: Annotated[str, typer.Option(help="Interface to bind with --serve.")] = "127.0.0.1",
    port: Annotated[
        int, typer.Option(min=0, max=65535, help="Port with --serve; 0 picks a free one.")
    ] = 8150,
    allow_remote: Annotated[
        bool,
        typer.Option(
            "--allow-remote",
            help="Bind a --host other than loopback (anyone who can connect sees the ledger).",
        ),
    ] = False,
) -> None:
    """Show the rounds, decisions, Δ with CIs, champions, drift, audit accuracy and the
    experiment log of a ledger, with links to each run's report.html."""
    from tuneloop.view.sources import resolve

    if serve == (bundle is not None):
        raise InputError(
            "tuneloop view: choose one of --serve (a local web app) and --bundle DIR "
            "(a static site)"
        )
    if serve:
        check_host(host, allow_remote)
    else:
        from tuneloop.view.bundle import check_target

        assert bundle is not None
        check_target(bundle)
    sources = resolve(config, ledger)
    if serve:
        from tuneloop.view.app import serve as serve_app

        code = serve_app(sources, host=host, port=port)
        if code:
            raise typer.Exit(code)
        return
    assert bundle is not None
    write(sources, bundle)


def check_host(host: str, allow_remote: bool) -> None:
    from tuneloop.view.app import is_loopback

    if not is_loopback(host) and not allow_remote:
        raise InputError(
            f"--host {host}: not a loopback address; the dashboard shows every round, model "
            "path and log entry to whoever can connect. Bind 127.0.0.1 (the default), or "
            "pass --allow-remote to bind it anyway"
        )


def write(sources: Sources, out: Path) -> None:
    """Gather and write the bundle; one line saying what it holds."""
    from tuneloop.view.bundle import INDEX_FILE, write_bundle
    from tuneloop.view.history import gather

    dashboard = gather(sources)
    copied = write_bundle(dashboard, out)
    typer.echo(
        f"wrote {out / INDEX_FILE}: {len(dashboard.rounds)} rounds, "
        f"{len(dashboard.champions)} champion versions, {len(dashboard.log)} log entries, "
        f"{len(copied)} run reports"
    )
