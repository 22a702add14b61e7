"""Finish reasons per arm in delta.json and delta.md: truncation is the usual hidden confound."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tuneloop.config import ReportConfig
from tuneloop.report import compare
from tuneloop.report.record import DeltaReport
from tuneloop.samplelog import SAMPLES_FILE

Make = Callable[..., Path]


def _set_finish(log: Path, reasons: list[str | None]) -> None:
    """Rewrite the rows' finish_reason in file order (missing rows keep None)."""
    path = log / SAMPLES_FILE
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    for row, reason in zip(rows, reasons, strict=True):
        if row["status"] != "missing":
            row["finish_reason"] = reason
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_finish_reasons_and_truncated_share_per_arm(make_log: Make, tmp_path: Path) -> None:
    pre = make_log({"a": [0.0, 0.0], "b": [1.0, None], "c": [0.0, 1.0]})
    post = make_log({"a": [1.0, 1.0], "b": [1.0, 1.0], "c": [0.0, 1.0]})
    _set_finish(pre, ["length", "length", "stop", None, "length", None])
    _set_finish(post, ["stop"] * 6)
    report = compare(
        pre, post, tmp_path / "out", settings=ReportConfig(n_resamples=200), figures=False
    )
    # pre: 5 completions (one sample missing): 3 length, 1 stop, 1 with no reason reported
    assert report.pre.finish_reasons == {"length": 3, "stop": 1, "unknown": 1}
    assert report.pre.length_share == 3 / 5
    assert report.post.finish_reasons == {"stop": 6} and report.post.length_share == 0.0
    again = DeltaReport.model_validate_json((tmp_path / "out" / "delta.json").read_text())
    assert again.pre.finish_reasons == report.pre.finish_reasons
    md = (tmp_path / "out" / "delta.md").read_text()
    assert "## Finish reasons" in md
    assert "| pre | 3 | 1 | 1 | 60.0% |" in md and "| post | 0 | 6 | 0 | 0.0% |" in md
    assert "60.0% of pre and 0.0% of post completions hit max_tokens" in md


def test_no_warning_when_both_arms_stop_alike(make_log: Make, tmp_path: Path) -> None:
    pre = make_log({"a": [0.0], "b": [1.0]})
    post = make_log({"a": [1.0], "b": [1.0]})
    _set_finish(pre, ["stop", "stop"])
    _set_finish(post, ["stop", "stop"])
    compare(pre, post, tmp_path / "out", settings=ReportConfig(n_resamples=100), figures=False)
    md = (tmp_path / "out" / "delta.md").read_text()
    assert "| pre | 2 | 0.0% |" in md and "Warning" not in md
