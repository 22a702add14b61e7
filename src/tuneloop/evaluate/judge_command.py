"""`tuneloop judge …`: commands about an LLM judge (a thin typer group over `calibrate`).

    tuneloop judge calibrate --judge judge.yaml --audit audit.jsonl [--out calibration.json]

Exit status: 0 when the judge passed (it may decide a gate), 1 when it is refused for gating
(the record is written all the same, with the reason), 2 for bad input, 3 when the judge was
unavailable (`tuneloop.errors`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tuneloop.errors import EXIT_REJECT

judge_app = typer.Typer(help="Measure an LLM judge against people.", no_args_is_help=True)


@judge_app.command("calibrate")
def calibrate_judge(
    judge: Annotated[Path, typer.Option(help="The judge file (YAML).")],
    audit: Annotated[
        Path,
        typer.Option(
            help="Labelled audit set: a JSONL file of rows with a `human` verdict, or a "
            "traffic-log folder whose feedback verdicts are the labels."
        ),
    ],
    out: Annotated[
        Path | None,
        typer.Option(help="Where to write the record; default: the judge file's `calibration:`."),
    ] = None,
    workers: Annotated[int, typer.Option(min=1, help="Judge requests in flight.")] = 8,
    progress: Annotated[bool, typer.Option(help="Progress lines on stderr.")] = True,
) -> None:
    """Grade every labelled row with the judge and measure its agreement with the people:
    agreement, Cohen's κ, false-positive and false-negative rates with Wilson intervals, and
    Youden's J. A judge below the judge file's min_agreement (or no better than chance) is
    refused for gating: exit 1, the record says why."""
    from tuneloop.evaluate.calibrate import calibrate, summary_lines

    record = calibrate(judge, audit, out, workers=workers, progress=progress)
    for line in summary_lines(record):
        typer.echo(line)
    if not record.passed:
        raise typer.Exit(EXIT_REJECT)
