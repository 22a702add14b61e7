"""compare(): the files it writes; the `compare` and `power` commands through typer."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from tuneloop.config import ReportConfig
from tuneloop.errors import InputError
from tuneloop.records import read_record
from tuneloop.report import DeltaReport, compare
from tuneloop.report.command import compare as compare_cmd
from tuneloop.report.command import power as power_cmd

from ..installed import tuneloop

Make = Callable[..., Path]


def _logs(make_log: Make) -> tuple[Path, Path]:
    pre = make_log({f"q{i}": [float(i % 2), 0.0, 1.0] for i in range(12)}, tags={"q0": ["t"]})
    post = make_log({f"q{i}": [1.0, float(i % 3 == 0), 1.0] for i in range(12)}, model="m1")
    return pre, post


def test_compare_writes_every_artifact(make_log: Make, tmp_path: Path) -> None:
    pre, post = _logs(make_log)
    out = tmp_path / "report"
    r = compare(pre, post, out, settings=ReportConfig(n_resamples=300))
    assert sorted(p.name for p in out.iterdir()) == [
        "delta.json",
        "delta.md",
        "items.png",
        "passk.png",
    ]
    back = read_record(out / "delta.json", DeltaReport)
    assert back == r
    assert back.pre.log == str(pre) and back.post.model == "m1"
    md = (out / "delta.md").read_text()
    assert f"{r.delta:+.4f}" in md and "wrong → right" in md and "| t | 1 |" in md
    for png in ("items.png", "passk.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_compare_refusal_leaves_nothing(make_log: Make, tmp_path: Path) -> None:
    pre = make_log({"a": [1.0]})
    post = make_log({"a": [1.0]}, revision="c" * 64)
    with pytest.raises(InputError, match="different suite revisions"):
        compare(pre, post, tmp_path / "out", figures=False)
    assert not (tmp_path / "out").exists()


def _app() -> typer.Typer:
    app = typer.Typer()
    app.command("compare")(compare_cmd)
    app.command("power")(power_cmd)
    return app


def test_compare_command(make_log: Make, tmp_path: Path) -> None:
    pre, post = _logs(make_log)
    out = tmp_path / "cli"
    res = CliRunner().invoke(
        _app(),
        ["compare", str(pre), str(post), "--out", str(out), "--n-resamples", "200", "--no-figures"],
    )
    assert res.exit_code == 0, res.output
    assert "Δ = " in res.output and (out / "delta.json").exists()
    assert not (out / "passk.png").exists()
    bad = CliRunner().invoke(
        _app(), ["compare", str(pre), str(tmp_path / "nope"), "--out", str(out)]
    )
    assert isinstance(bad.exception, InputError)  # the CLI's main() turns this into exit 2
    assert "`tuneloop eval` writes one" in str(bad.exception)


def test_power_command(make_log: Make) -> None:
    pre, post = _logs(make_log)
    res = CliRunner().invoke(_app(), ["power", "--pilot", str(pre)])
    assert res.exit_code == 0, res.output
    assert "minimum detectable effect with 12 items" in res.output
    res = CliRunner().invoke(
        _app(), ["power", "--pilot", str(pre), "--pilot", str(post), "--effect", "0.03"]
    )
    assert res.exit_code == 0, res.output
    assert "items needed to detect Δ = 0.03" in res.output and "measured" in res.output


def test_compare_never_writes_over_a_log_it_reads(make_log: Make, tmp_path: Path) -> None:
    """`compare PRE POST --out R --html POST/samples.jsonl` replaced the post log with HTML,
    exit 0; an output that resolves to an input (or to another output) is refused, exit 2,
    before anything is written."""
    pre, post = _logs(make_log)
    before = (post / "samples.jsonl").read_bytes()
    out = tmp_path / "r"
    for target in (post / "samples.jsonl", pre / "summary.json"):
        ran = tuneloop("compare", pre, post, "--out", out, "--html", target, cwd=tmp_path)
        ran.assert_input_error("--html", "is the input")
    ran = tuneloop("compare", pre, post, "--out", out, "--html", out / "delta.md", cwd=tmp_path)
    ran.assert_input_error("--html", "is also --out")
    assert (post / "samples.jsonl").read_bytes() == before and not out.exists()
