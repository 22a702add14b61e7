"""The I/O shell of the report phase: read two sample logs, write delta.json, delta.md and
the figures into one folder. delta.json carries the regression diagnosis
(`report/diagnosis.py`), which reads the suite the logs name when it is here unchanged.

Run it as `tuneloop compare PRE_LOG POST_LOG --out DIR`, or from Python (the loop's report
phase) as `tuneloop.report.compare(pre, post, out_dir, ...)`. delta.json is written last, so
its presence marks a finished report; every file is written atomically.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tuneloop.errors import InputError
from tuneloop.records import atomic_write_text, write_record
from tuneloop.report.delta import Log, Settings, align, delta_from_items
from tuneloop.report.diagnosis import diagnose
from tuneloop.report.figures import plot_items, plot_passk
from tuneloop.report.flips import current_suite
from tuneloop.report.markdown import render_markdown
from tuneloop.report.record import DeltaReport
from tuneloop.samplelog import SUMMARY_FILE, load_sample_log

DELTA_FILE = "delta.json"
MARKDOWN_FILE = "delta.md"
PASSK_FIGURE = "passk.png"
ITEMS_FIGURE = "items.png"


def load_log(path: Path, scorer: str | None = None) -> Log:
    """Read a sample log (on `scorer`'s output when given); a missing one names the command
    that writes it."""
    path = Path(path)
    folder = path.parent if path.is_file() else path
    if not (folder / SUMMARY_FILE).exists():
        raise InputError(
            f"{path}: not a sample log (no {SUMMARY_FILE}); `tuneloop eval` writes one"
        )
    return load_sample_log(path, scorer)


def compare(
    pre_log: Path,
    post_log: Path,
    out_dir: Path,
    settings: Settings | None = None,
    *,
    item_ids: Sequence[str] | None = None,
    figures: bool = True,
) -> DeltaReport:
    """Compare two sample logs on the same items; write the report into `out_dir`.

    `settings` is loop.yaml's `report:` section (`ReportConfig`); None uses its defaults.
    """
    settings = settings or Settings()
    pre_log, post_log, out_dir = Path(pre_log), Path(post_log), Path(out_dir)
    pre, post = load_log(pre_log, settings.scorer), load_log(post_log, settings.scorer)
    paired = align(pre, post, item_ids, (str(pre_log), str(post_log)))
    report = delta_from_items(paired, settings, item_ids is not None)
    suite = current_suite(pre[0].suite_path, pre[0].suite_revision)
    report = report.model_copy(
        update={
            "pre": report.pre.model_copy(update={"log": str(pre_log)}),
            "post": report.post.model_copy(update={"log": str(post_log)}),
            "diagnosis": diagnose(pre, post, paired.item_ids, report.flips.threshold, suite),
        }
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    if figures:
        plot_passk(report, out_dir / PASSK_FIGURE)
        plot_items(paired.pre_scores, paired.post_scores, report, out_dir / ITEMS_FIGURE)
    atomic_write_text(out_dir / MARKDOWN_FILE, render_markdown(report))
    write_record(out_dir / DELTA_FILE, report)
    return report
