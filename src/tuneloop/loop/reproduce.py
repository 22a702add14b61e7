"""`tuneloop archive reproduce ROOT/RUN`: re-run an archived round and say whether it reproduced.

Order, so that a refusal costs nothing: verify the archive byte for byte (a problem: exit 2,
every problem listed) → re-hash each input the archive pinned instead of copying (a large base
model; a missing file or any sha256 or size difference: exit 2, one line per difference,
nothing run) → `tuneloop run ROOT/RUN/inputs/loop.yaml` in a subprocess, as a user runs it →
compare both rounds' delta reports and gate verdicts (`archive.reproduce.compare_rounds`):
exit 0 identical or different across hardware, 1 different on the same hardware (a defect).

The re-run writes only under `ROOT/reproduce/RUN/`: the archive's recipe points `workdir`,
`archive.root` and `gate.ledger` there (`handover.archive_recipe`), so its gate opens a ledger
of its own — the original ledger's one-look record neither refuses the re-run nor gains a
second look — and the experiment log sits beside that ledger. MLflow tracking is switched off
for the re-run (`tracking.mlflow=null`): a check is not a round, and with the original's own
tracking URI it would register the re-run's model there and move `@challenger` (or
`@champion`); the numbers compared do not depend on it. A pinned Hub
snapshot that is no longer at its path but is in this machine's Hugging Face cache at the
pinned commit is checked there and handed to the re-run as `base_model=…`. A second call
resumes the re-run: finished phases are skipped, as `tuneloop run` does.

It lives in the loop, not the archive phase: it runs the loop and reads the report's and the
gate's records, and a phase imports neither.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import typer

from tuneloop.archive import ARCHIVED_RUN_DIR, MANIFEST, read_manifest, verify_archive
from tuneloop.archive.pin import check_pin
from tuneloop.archive.reproduce import RoundNumbers, compare_rounds, render
from tuneloop.config import load_config
from tuneloop.config.hub import resolve_cached
from tuneloop.errors import EXIT_USAGE, InputError, PhaseFailed
from tuneloop.loop.layout import RunLayout
from tuneloop.provenance import code_version, hardware, machine_info
from tuneloop.records import read_record, read_record_if_exists
from tuneloop.records.manifest import Manifest

INPUTS_CONFIG = Path("inputs") / "loop.yaml"
"""The re-run's config in an archive (`archive.pack` writes it)."""


def reproduce_archive(folder: Path) -> int:
    """Check, re-run and compare; print the table on stdout; return the exit status."""
    folder = Path(folder)
    problems = verify_archive(folder)
    if problems:
        raise InputError(
            f"{folder}: the archive does not verify (`tuneloop archive verify`); nothing run:\n  "
            + "\n  ".join(problems)
        )
    manifest = read_manifest(folder)
    config = folder / INPUTS_CONFIG
    overrides = pinned_inputs(folder, manifest)
    cfg = load_config(config, overrides)
    if cfg.tracking.mlflow is not None:
        overrides.append("tracking.mlflow=null")
        typer.echo("tracking.mlflow: off for the re-run (a check registers no model)", err=True)
    _rerun(config, overrides)
    original = round_numbers(folder / ARCHIVED_RUN_DIR)
    rerun = round_numbers(cfg.workdir)
    machine = manifest.provenance.get("machine") or {}
    result = compare_rounds(original, rerun, hardware(machine), hardware(machine_info()))
    for line in render(result):
        typer.echo(line)
    now = code_version()
    if result.outcome != "identical" and manifest.code_version != now:
        typer.echo(f"note: archived by tuneloop {manifest.code_version}, re-run by {now}")
    return result.exit_code


def pinned_inputs(folder: Path, manifest: Manifest) -> list[str]:
    """Re-hash every pinned input; InputError (nothing run) listing each difference, else the
    overrides that point the re-run at a Hub snapshot found in this machine's cache."""
    overrides: list[str] = []
    lines: list[str] = []
    for key, pin in manifest.pins.items():
        path = Path(pin.path)
        if not path.exists() and pin.repo_id is not None and pin.revision is not None:
            try:
                path = resolve_cached(pin.repo_id, pin.revision)
            except ValueError as err:
                lines.append(f"{key} ({pin.path}): not found; {err}")
                continue
            overrides.append(f"{key}={path}")
        lines.extend(f"{key} ({path}): {d}" for d in check_pin(pin, path))
    if lines:
        raise InputError(
            f"{folder}: {MANIFEST} pins inputs that are not what the run read; nothing "
            "run (a re-run on other files is no reproduction):\n  " + "\n  ".join(lines)
        )
    return overrides


def _rerun(config: Path, overrides: list[str]) -> None:
    """`tuneloop run CONFIG OVERRIDES…` as a user runs it; its output goes to stderr, so that
    stdout holds only the comparison."""
    argv = [sys.executable, "-m", "tuneloop", "run", str(config), *overrides]
    typer.echo(f"re-running: tuneloop run {' '.join(argv[4:])}", err=True)
    code = subprocess.run(argv, stdout=sys.stderr, check=False).returncode
    if code == EXIT_USAGE:
        raise InputError(f"the re-run refused {config} (exit 2, its error above); nothing compared")
    if code not in (0, 1):  # 0 promoted, 1 rejected or awaiting approval: the round finished
        raise PhaseFailed(
            f"the re-run stopped (exit {code}, its output above); run `tuneloop archive "
            "reproduce` again to resume it"
        )


def round_numbers(workdir: Path) -> RoundNumbers:
    """A finished round's delta report and gate decision, read through their records."""
    from tuneloop.gate.verdict_record import GateVerdict
    from tuneloop.report.record import DeltaReport  # numpy, through stats

    layout = RunLayout(workdir)
    d = read_record(layout.delta, DeltaReport)
    verdict = read_record_if_exists(layout.verdict, GateVerdict)
    return RoundNumbers(
        delta=d.delta,
        delta_ci=d.delta_ci,
        p_two_sided=d.p_two_sided,
        pre_mean=d.pre.mean,
        post_mean=d.post.mean,
        decision=verdict.decision if verdict is not None else None,
    )
