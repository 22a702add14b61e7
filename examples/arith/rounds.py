"""What the measurement scripts share: run one `tuneloop run` round, read what it measured.

`measure_replay.py`, `sweep_grpo.py` and `measure_selfdistill.py` each compare training arms
as rounds of tuneloop's own loop (gate off): `round_figures` runs one and returns the paired
report's figures (`report/delta.json`) with what training did (`train_settings.json`), and
`tag_change` writes one tag's pre → post for their tables.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

TUNELOOP = Path(sys.executable).parent / "tuneloop"


def sh(*args: str | Path, check: bool = True) -> int:
    print("$", " ".join(str(a) for a in args), flush=True)
    return subprocess.run([str(a) for a in args], check=check).returncode


def round_figures(config: Path, workdir: Path, name: str) -> dict[str, Any]:
    """Run the round of `config` (whose workdir is `workdir`) and read its figures; exit
    naming `name` when it stopped before its report."""
    from tuneloop.loop.state import RunState
    from tuneloop.records import read_record
    from tuneloop.report.record import DeltaReport
    from tuneloop.train.settings import TrainRunRecord

    # the later phases (capstone, report.html) are not part of a measurement
    sh(TUNELOOP, "run", config, check=False)
    state = read_record(workdir / "state.json", RunState)
    if state.phases["report"].status != "done":
        raise SystemExit(f"{name}: the round stopped before its report; see {workdir}/state.json")
    delta = read_record(workdir / "report" / "delta.json", DeltaReport)
    trained = read_record(workdir / "train" / "adapter" / "train_settings.json", TrainRunRecord)
    return {
        "arm": name,
        "lr": trained.settings["learning_rate"],
        "steps": trained.steps_done,
        "seconds": trained.train_seconds,
        "stop": trained.stop,
        "pre": delta.pre.mean,
        "post": delta.post.mean,
        "delta": delta.delta,
        "ci": delta.delta_ci,
        "p": delta.p_two_sided,
        "n": delta.n_items,
        "flips": (delta.flips.wrong_to_right, delta.flips.right_to_wrong),
        "tags": {d.tag: (d.pre_mean, d.post_mean) for d in delta.per_tag},
    }


def tag_change(result: dict[str, Any], tag: str) -> str:
    """`pre → post` pass@1 on the items with one tag."""
    if tag not in result["tags"]:
        return "n/a"
    pre, post = result["tags"][tag]
    return f"{100 * pre:.1f}% → {100 * post:.1f}%"
