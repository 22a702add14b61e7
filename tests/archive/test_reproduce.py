"""`tuneloop archive reproduce`: the pure comparison of two rounds, and the shell around it on a
fake-loop archive (the real tiny-model reproduction is one test in `tests/loop/test_e2e.py`)."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

from tuneloop.archive import read_manifest
from tuneloop.archive.reproduce import RoundNumbers, compare_rounds, render
from tuneloop.loop import reproduce as shell
from tuneloop.provenance import Hardware
from tuneloop.records import sha256_file

from ..loop.fakeloop import STRONG_STEPS, runner, write_config

EPYC = Hardware("AMD EPYC 9654 96-Core Processor", "avx512f", "AVX512")
XEON = Hardware("Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz", "avx512f", "AVX512")
UNRECORDED = Hardware(None, None, None)
ROUND = RoundNumbers(
    delta=0.125,
    delta_ci=(0.05, 0.2),
    p_two_sided=0.003,
    pre_mean=0.5,
    post_mean=0.625,
    decision="promote",
)


def _rows(rerun: RoundNumbers, a: Hardware = EPYC, b: Hardware = EPYC) -> dict[str, tuple]:
    rep = compare_rounds(ROUND, rerun, a, b)
    return {r.name: (r.original, r.rerun, r.difference) for r in rep.rows}


# ---- the pure comparison -----------------------------------------------------------------


@pytest.mark.parametrize("rerun_hw", [EPYC, XEON, UNRECORDED])
def test_identical_numbers_and_verdict_pass_on_any_hardware(rerun_hw: Hardware) -> None:
    rep = compare_rounds(ROUND, ROUND, EPYC, rerun_hw)
    assert (rep.outcome, rep.exit_code) == ("identical", 0)
    assert [r.difference for r in rep.rows] == ["="] * 7
    assert render(rep)[-1].startswith("identical")


def test_a_difference_on_the_same_hardware_is_a_defect() -> None:
    rerun = replace(ROUND, p_two_sided=0.0031)
    rep = compare_rounds(ROUND, rerun, EPYC, EPYC)
    assert (rep.outcome, rep.exit_code) == ("defect", 1)
    assert _rows(rerun)["p (two-sided)"] == ("0.003", "0.0031", "+0.0001")
    text = render(rep)
    assert "same hardware" in text and text[-1].startswith("DEFECT")


def test_the_last_digit_counts() -> None:
    """Exact comparison: one ulp of Δ is a difference, and the table shows both values whole."""
    rerun = replace(ROUND, delta=math.nextafter(0.125, 1.0))
    original, again, difference = _rows(rerun)["Δ (post − pre)"]
    assert original != again and difference != "="
    assert float(again) == rerun.delta  # repr: the text reads back as the same float
    assert compare_rounds(ROUND, rerun, EPYC, EPYC).outcome == "defect"


def test_a_difference_across_hardware_is_expected_and_names_both_machines() -> None:
    rerun = replace(ROUND, delta=0.1, delta_ci=(0.02, 0.18), decision="reject")
    rep = compare_rounds(ROUND, rerun, EPYC, XEON)
    assert (rep.outcome, rep.exit_code) == ("across_hardware", 0)
    assert _rows(rerun, EPYC, XEON)["gate decision"] == ("promote", "reject", "changed")
    text = "\n".join(render(rep))
    assert f"original hardware: {EPYC.describe()}" in text
    assert f"re-run hardware:   {XEON.describe()}" in text
    assert "different hardware" in text and "not a defect" in text


@pytest.mark.parametrize(
    "other",
    [
        replace(EPYC, cpu_isa="avx2"),
        replace(EPYC, torch_cpu_capability="AVX2"),
        replace(EPYC, gpus=("NVIDIA H100 80GB HBM3",)),
    ],
)
def test_another_isa_kernel_set_or_gpu_is_other_hardware(other: Hardware) -> None:
    rep = compare_rounds(ROUND, replace(ROUND, post_mean=0.6), EPYC, other)
    assert rep.outcome == "across_hardware"


def test_an_original_without_recorded_hardware_cannot_rule_out_a_defect() -> None:
    """A manifest from before hardware was recorded: a difference fails, saying why."""
    rep = compare_rounds(ROUND, replace(ROUND, delta=0.1), UNRECORDED, EPYC)
    assert (rep.outcome, rep.exit_code) == ("hardware_unknown", 1)
    assert "not recorded" in render(rep)[-1]


def test_gate_off_on_both_sides_is_no_difference() -> None:
    off = replace(ROUND, decision=None)
    rep = compare_rounds(off, off, EPYC, EPYC)
    assert rep.outcome == "identical"
    assert rep.rows[-1].original == rep.rows[-1].rerun == "(gate off)"


# ---- the shell, on a fake-loop archive ---------------------------------------------------


@pytest.fixture()
def archive(tmp_path: Path) -> Path:
    """A whole fake-loop round (real report, gate, capstone, archive); its archive folder."""
    runner(write_config(tmp_path)).run()
    (folder,) = (tmp_path / "archive").glob("fake-*")
    return folder


def _fake_rerun(monkeypatch: pytest.MonkeyPatch, *extra: str) -> list[list[str]]:
    """`_rerun` as the fake loop's runner on the archived config (no model, seconds)."""
    calls: list[list[str]] = []

    def rerun(config: Path, overrides: list[str]) -> None:
        calls.append([str(config), *overrides])
        runner(config, [*overrides, *extra]).run()

    monkeypatch.setattr(shell, "_rerun", rerun)
    return calls


def test_reproducing_a_round_is_identical_and_leaves_the_original_ledger_alone(
    archive: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    calls = _fake_rerun(monkeypatch)
    ledger = tmp_path / "ledger" / "ledger.db"
    before = sha256_file(ledger)
    assert shell.reproduce_archive(archive) == 0
    out = capsys.readouterr().out
    assert calls == [[str(archive / "inputs" / "loop.yaml")]]
    assert "gate decision" in out and "same hardware" in out
    assert out.rstrip().splitlines()[-1].startswith("identical")
    again = archive.parent / "reproduce" / archive.name
    assert (again / "ledger.db").is_file() and (again / "work" / "report" / "delta.json").is_file()
    assert sha256_file(ledger) == before  # the one-look history saw nothing of the re-run
    assert read_manifest(archive).pins == {}  # a small base is copied, not pinned


def test_a_different_rerun_on_this_machine_is_a_defect(
    archive: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """The fake re-run trained too few steps (a nondeterminism stand-in): exit 1, on the same
    hardware, with the changed numbers in the table."""
    _fake_rerun(monkeypatch, f"train.steps={STRONG_STEPS - 1}")
    assert shell.reproduce_archive(archive) == 1
    out = capsys.readouterr().out
    assert "same hardware" in out and "DEFECT" in out
    assert "changed" in out  # the weak challenger is rejected
