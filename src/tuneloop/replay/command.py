"""`tuneloop replay`: a thin typer wrapper over `tuneloop.replay.replay`.

    tuneloop replay --traces traces.jsonl --teachers teachers.yaml --out runs/replay \
        --sample-fraction 0.25 --judge exact

Its options are generated from `ReplayConfig` (loop.yaml's `replay:` keys, one definition).
The teachers file is validated first, every problem at once (exit 2, nothing written), and
an `--out` whose products would replace the traces or the teachers file is refused;
rerunning with the same `--out` resumes, and pays only for calls not yet in `calls.jsonl`.
Imports the runner only when the command runs, so `tuneloop --help` stays fast.
"""

from __future__ import annotations

from pathlib import Path

import typer

from tuneloop.config.options import settings_options
from tuneloop.config.replay import ReplayConfig
from tuneloop.errors import InputError, refuse_overwriting_inputs, require_writable_dir


@settings_options(ReplayConfig, param="settings")
def replay(
    out: Path = typer.Option(..., help="Output folder (resumed if it holds calls.jsonl)."),
    *,
    settings: ReplayConfig,
) -> None:
    """Replay trace steps to teachers; writes sft.jsonl, dpo.jsonl, report.json/.md in --out."""
    from tuneloop.replay.outputs import DPO_FILE, REPORT_FILE, REPORT_MD, SFT_FILE
    from tuneloop.replay.report import judged_line
    from tuneloop.replay.run import replay as run_replay
    from tuneloop.replay.store import CALLS_FILE
    from tuneloop.replay.teachers import load_teachers

    missing = [
        flag
        for flag, v in (("--traces", settings.traces), ("--teachers", settings.teachers))
        if v is None
    ]
    if missing:
        raise InputError(f"{' and '.join(missing)} required (or set them in loop.yaml's replay:)")
    assert settings.traces is not None and settings.teachers is not None
    if settings.traces.is_dir():
        raise InputError(
            f"--traces {settings.traces}: is a folder; give the traces file "
            "(`tuneloop ingest … --out FILE` writes one)"
        )
    load_teachers(settings.teachers)  # every problem of the teachers file before anything else
    products = (SFT_FILE, DPO_FILE, REPORT_FILE, REPORT_MD, CALLS_FILE)
    refuse_overwriting_inputs(
        [("--out", out / name) for name in products], [settings.traces, settings.teachers]
    )
    require_writable_dir(out, "--out")
    result = run_replay(settings.traces, settings.teachers, out, settings)
    r = result.report
    for t in r.teachers:
        rate = f"{t.pass_rate:.3f}" if t.pass_rate is not None else "n/a"
        typer.echo(
            f"{t.name}: pass rate {rate} ({t.passed}/{t.scored}; missing {t.missing}, "
            f"malformed {t.malformed}), cost {t.cost_usd:.6f} USD"
        )
    if r.judged is not None:
        typer.echo(judged_line(r.judged))
    typer.echo(
        f"{r.steps_planned} steps → {r.sft_rows} SFT rows, {r.dpo_pairs} DPO pairs; "
        f"{r.calls_this_run} calls this run ({r.cost_usd_this_run:.6f} USD), "
        f"{r.calls_reused} reused → {out}"
    )
