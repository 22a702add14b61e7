"""A gate decided by an LLM judge: refused before compute unless the judge is calibrated for
this very judge at min_agreement; powered in true pass rate (MDE / J); and the verdict shows
the calibration beside the Δ with the Δ it corresponds to."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tuneloop.config import load_config
from tuneloop.loop.layout import RunLayout, slice_ids
from tuneloop.loop.preflight import gate_mde
from tuneloop.loop.preflight.gate_power import ASSUMED_SD_DIFF
from tuneloop.records import write_record
from tuneloop.records.judge import Bounds, JudgeCalibration
from tuneloop.scorers.judge import load_judge

from ...installed import tuneloop
from ...judge_fixture import write_judge
from .. import fakeloop
from ..fakeloop import runner, write_config


def _calibrate(judge_file: Path, *, agreement: float, fpr: float, fnr: float, **identity) -> None:
    """A calibration record for the judge of `judge_file` (identity fields overridable)."""
    judge = load_judge(judge_file)
    n, j = 200, 1 - fpr - fnr
    write_record(
        judge.spec.calibration,
        JudgeCalibration(
            judge=judge.identity.model_copy(update=identity),
            judge_file=str(judge_file),
            judge_file_sha256="0" * 64,
            audit="audit.jsonl",
            audit_sha256="0" * 64,
            audit_format="jsonl",
            n=n,
            unlabelled=0,
            tp=0,
            fp=0,
            tn=0,
            fn=0,  # fmt: skip
            agreement=agreement,
            agreement_ci=Bounds(low=agreement - 0.05, high=agreement + 0.05),
            kappa=0.6,
            fpr=fpr,
            fpr_ci=None,
            fnr=fnr,
            fnr_ci=None,
            youden_j=j,
            youden_j_low=j - 0.1,
            confidence=0.95,
            min_agreement=0.8,
            passed=agreement >= 0.8,
            created_at="2026-12-05T00:00:00Z",
        ),
    )


def _judged(tmp: Path, **gate) -> tuple[Path, Path]:
    judge_file = write_judge(tmp / "judge", "http://127.0.0.1:9", calibration="calibration.json")
    config = write_config(
        tmp,
        suite={"default_scorer": "judge"},
        eval={"judge": str(judge_file)},
        train={"data": str(Path(__file__).parents[3] / "examples/arith/train_prompts.jsonl")},
        gate=gate,
    )
    return config, judge_file


def test_items_scored_judge_need_a_judge_file(tmp_path):
    config = write_config(tmp_path, suite={"default_scorer": "judge"})
    ran = tuneloop("check", config)
    assert ran.code == 2 and "eval.judge" in ran.stderr and "no judge file" in ran.stderr


def test_an_uncalibrated_judge_may_not_decide_the_gate(tmp_path):
    config, judge_file = _judged(tmp_path)
    ran = tuneloop("check", config)
    assert ran.code == 2 and "tuneloop judge calibrate" in ran.stderr
    assert "Traceback" not in ran.stderr


@pytest.mark.parametrize(
    "figures, expect",
    [
        (dict(agreement=0.7, fpr=0.3, fnr=0.3), "agreement 0.700 with people on 200 items"),
        (dict(agreement=0.95, fpr=0.05, fnr=0.05, rubric_sha256="f" * 64), "rubric_sha256"),
    ],
)
def test_a_judge_below_the_bar_or_measured_as_another_is_refused(tmp_path, figures, expect):
    config, judge_file = _judged(tmp_path)
    _calibrate(judge_file, **figures)
    ran = tuneloop("check", config)
    assert ran.code == 2 and expect in ran.stderr, ran.stderr


def test_the_gate_is_powered_in_true_pass_rate_and_the_verdict_shows_the_calibration(tmp_path):
    config, judge_file = _judged(tmp_path)
    _calibrate(judge_file, agreement=0.9, fpr=0.1, fnr=0.1)  # J = 0.8
    ran = tuneloop("check", config)
    assert ran.code == 0, ran.stderr
    n = len(slice_ids(load_config(config), "gate"))
    mde = gate_mde(n, ASSUMED_SD_DIFF, 0.05) / 0.8
    assert f"detectable effect is Δ = {mde:.3f}" in ran.stderr
    assert "through the judge's calibration (200 human-labelled items" in ran.stderr
    runner(config).run()
    fakeloop.CALLS.clear()
    verdict = json.loads((RunLayout(tmp_path / "work").gate / "verdict.json").read_text())
    note = verdict["judge"]
    assert note["model"] == "fake-judge" and note["youden_j"] == pytest.approx(0.8)
    assert note["delta_corrected"] == pytest.approx(verdict["stats"]["delta"] / 0.8)
    report = (tmp_path / "work").rglob("report.md")
    text = "\n".join(p.read_text() for p in report)
    assert "Judge fake-judge" in text and "true Δ" in text
