"""`tuneloop shadow report`: judge the pairs `tuneloop proxy --shadow` stored.

    tuneloop shadow report --log-dir traffic/ --judge judge.yaml --out runs/shadow
    tuneloop shadow report --log-dir traffic/ --judge judge.yaml --out runs/shadow --max-pairs 200

`shadow_app` is registered in the CLI's groups as `shadow`. Bad input — no pairs file under
`--log-dir`, a judge file that does not exist or is not a pairwise judge, an unwritable
`--out`, a judge that refuses (401/403/404) — is one line and exit 2, with nothing written.
A progress line goes to stderr while the judge works. Imports the judge and numpy only when
the command runs, so `tuneloop --help` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tuneloop.errors import InputError, require_writable_dir

shadow_app = typer.Typer(
    help="Shadow evaluation: the challenger's answers to mirrored live traffic, judged.",
    no_args_is_help=True,
)


@shadow_app.command("report")
def report(
    log_dir: Annotated[
        Path, typer.Option(help="The proxy's --log-dir (its shadow/pairs.jsonl is read).")
    ],
    judge: Annotated[Path, typer.Option(help="The judge file (YAML, mode: pairwise).")],
    out: Annotated[Path, typer.Option(help="Folder for shadow-report.json and .md.")],
    max_pairs: Annotated[
        int | None, typer.Option(min=1, help="Judge at most this many pairs (file order).")
    ] = None,
) -> None:
    """Judge the mirrored pairs: the challenger's preference over the champion with its CI.

    Diagnostic evidence beside the gate, never a promotion: only `tuneloop gate` on the
    sealed fresh slice decides.
    """
    from tuneloop.records.shadow import PAIRS_FILE, REPORT_JSON, REPORT_MD, SHADOW_FOLDER

    pairs = log_dir / SHADOW_FOLDER / PAIRS_FILE
    if not pairs.is_file():
        raise InputError(
            f"--log-dir {log_dir}: no {SHADOW_FOLDER}/{PAIRS_FILE} (it is written by `tuneloop "
            f"proxy --log-dir {log_dir} --shadow URL --shadow-model NAME`)"
        )
    if not judge.is_file():
        raise InputError(f"--judge {judge}: file not found")
    require_writable_dir(out, "--out")
    from tuneloop.scorers.judge import JudgeRefused, load_judge
    from tuneloop.shadow.report import shadow_report
    from tuneloop.shadow.report_md import write_report

    loaded = load_judge(judge)
    if loaded.identity.mode != "pairwise":
        raise InputError(
            f"--judge {judge}: mode is {loaded.identity.mode!r}; a shadow report compares two "
            "answers (mode: pairwise)"
        )
    try:
        record = shadow_report(pairs, loaded, max_pairs=max_pairs, progress=_progress)
    except JudgeRefused as err:
        raise InputError(f"--judge {judge}: {err}") from None
    write_report(record, out)
    share = "not measured" if record.preference is None else f"{record.preference:.3f}"
    interval = (
        ""
        if record.ci_low is None or record.ci_high is None
        else f" [{record.ci_low:.3f}, {record.ci_high:.3f}]"
    )
    typer.echo(
        f"challenger preference {share}{interval} over {record.n_judged} pairs "
        f"({record.wins} wins, {record.ties} ties, {record.losses} losses) — diagnostic, "
        f"not a gate; {out / REPORT_JSON}, {out / REPORT_MD}"
    )


def _progress(done: int, total: int) -> None:
    """One line on stderr about every 5% (and at the end)."""
    step = max(1, total // 20)
    if done == total or done % step == 0:
        typer.echo(f"shadow report: judged {done}/{total} pairs", err=True)
