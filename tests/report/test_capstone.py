"""The capstone report.md, from a real round on fake model phases (tests/loop/fakeloop.py).

The expected lines are the ones `loop/capstone.py` wrote for the same inputs before the
capstone moved to `report/` and read its artifacts typed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tuneloop.config import load_config
from tuneloop.errors import InputError
from tuneloop.gate.verdict_record import GateVerdict
from tuneloop.loop.handover import capstone_inputs
from tuneloop.loop.layout import RunLayout
from tuneloop.loop.state import RunState, load_state
from tuneloop.records import read_record
from tuneloop.report.capstone import render_capstone

from ..loop.fakeloop import runner, write_config


@pytest.fixture(scope="module")
def round_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("round")
    runner(write_config(tmp)).run()
    return tmp


def _render(tmp: Path, workdir: Path | None = None) -> str:
    cfg = load_config(tmp / "loop.yaml")
    work = workdir or cfg.workdir
    run = RunLayout(work)
    state = read_record(work / "state.json", RunState)
    verdict = read_record(work / "gate" / "verdict.json", GateVerdict)
    out = work / "capstone" / "report.md"
    return render_capstone(cfg, state, capstone_inputs(cfg, run, state), verdict, out)


def test_report_md_key_lines(round_dir: Path) -> None:
    state = load_state(round_dir / "work")
    assert state is not None
    base = state.phases["eval_pre"].inputs["base_model"]
    text = (round_dir / "work" / "capstone" / "report.md").read_text()
    lines = text.splitlines()
    assert lines[0] == f"# tuneloop run `{state.run_id}` — fake"
    expected = [
        f"- Base model: `{round_dir / 'base'}` (sha256 `{base[:16]}…`)",
        "- Sampling (pre and post): 1 sample(s)/item, temperature 0.0, top_p 1.0, "
        "max_tokens 8, seed 0",
        f"- Training data: `{round_dir / 'work' / 'data' / 'sft.jsonl'}` (sha256 `n/a`)",
        "- Method: sft, 100 steps, lr 0.0005, batch 8, LoRA r=16 alpha=32.0, seed 0",
        "| mean item score | 37.2% | 67.4% |",
        "| Wilson CI | 29.4%–45.8% | 59.0%–74.9% |",
        "| missing / harness errors | 0 / 0 | 0 / 0 |",
        "- Paired Δ = **+30.2 pts** (bootstrap 95% CI +21.7 pts to +38.8 pts, 200 resamples, "
        "seed 0), n = 129 items",
        "- Paired permutation p (two-sided) = 3.64e-12; one-sided (post > pre) = 1.82e-12 "
        "(enumeration)",
        "- Exact sign test on changed items: 39 up, 0 down, p = 3.64e-12",
        "- Cohen's d_z = 0.656; MDE at this n = +11.4 pts",
        "- Flips (right = item score ≥ 0.5): wrong→right 39, right→wrong 0",
        "![pass@k](../report/passk.png) ![items](../report/items.png)",
        "**promote** on slice `gate` (champion 28.8% → challenger 65.8%)",
        "- ✓ margin: Δ = +0.3694 (≥ margin 0.05)",
        "| data | skipped | — |",
        "| capstone | writing this report | — |",
    ]
    for line in expected:
        assert line in lines, line
    assert any(line.startswith("- Suite: ") and "240 items evaluated" in line for line in lines)
    assert any(line.startswith('Bar (pre-registered in the config): `{"metric"') for line in lines)


def test_a_newer_delta_record_is_refused_naming_the_file(round_dir: Path, tmp_path: Path) -> None:
    import shutil

    work = tmp_path / "work"
    shutil.copytree(round_dir / "work", work)
    delta = work / "report" / "delta.json"
    data = json.loads(delta.read_text())
    data["schema"] = "tuneloop.delta/9"
    delta.write_text(json.dumps(data))
    with pytest.raises(InputError, match=r"delta.json: record version .* is newer"):
        _render(round_dir, work)
    delta.unlink()
    assert "not measured (no delta report)" in _render(round_dir, work)


def test_a_delta_record_from_before_the_diagnosis_says_not_measured(
    round_dir: Path, tmp_path: Path
) -> None:
    import shutil

    work = tmp_path / "work"
    shutil.copytree(round_dir / "work", work)
    assert "| drift |" in _render(round_dir, work)  # the section's table, from delta.json
    delta = work / "report" / "delta.json"
    data = json.loads(delta.read_text())
    del data["diagnosis"]
    data["schema"] = "tuneloop.delta/1"  # as written before the diagnosis existed
    delta.write_text(json.dumps(data))
    text = _render(round_dir, work)
    assert "## Why items got worse (diagnosis)" in text
    assert "not measured: the delta report predates the diagnosis" in text


def test_gate_off(tmp_path: Path) -> None:
    runner(write_config(tmp_path, gate={"enabled": False})).run()
    text = (tmp_path / "work" / "capstone" / "report.md").read_text()
    assert "## Gate\n\noff (gate.enabled: false)\n" in text


def test_full_fine_tuning_is_named_instead_of_lora(round_dir: Path) -> None:
    cfg = load_config(round_dir / "loop.yaml")
    cfg = cfg.model_copy(update={"train": cfg.train.model_copy(update={"adapter": "none"})})
    work = cfg.workdir
    run = RunLayout(work)
    state = read_record(work / "state.json", RunState)
    verdict = read_record(work / "gate" / "verdict.json", GateVerdict)
    out = round_dir / "full-ft-report.md"
    text = render_capstone(cfg, state, capstone_inputs(cfg, run, state), verdict, out)
    assert "- Method: sft, 100 steps, lr 0.0005, batch 8, full fine-tuning, seed 0" in text
    assert "LoRA r=" not in text


def test_a_walk_back_is_said_under_the_training_inputs(html_round: Path) -> None:
    """The round of tests/report/htmlround.py aborted a collapsed GRPO run at step 27 and
    walked back to checkpoint-20 (its train_settings.json says so; the loop hands it over)."""
    lines = (html_round / "capstone" / "report.md").read_text().splitlines()
    walked = [line for line in lines if "walked back" in line]
    assert walked == [
        "  - **walked back to checkpoint-20 (step 20 of 30): training (grpo) stopped at step 27: "
        "grpo: reward ≤ 0 with equal rewards in ≥ 100% of groups for the last 3 logged steps "
        "(train.health.on_collapse: abort)**; it passed: saved before the collapse that began "
        "at step 25, finite weights"
    ]
    assert lines.index(walked[0]) == 1 + next(
        i for i, line in enumerate(lines) if line.startswith("  - resolved settings: ")
    )


def test_no_walk_back_no_line(round_dir: Path) -> None:
    assert "walked back" not in (round_dir / "work" / "capstone" / "report.md").read_text()


def test_a_budgeted_run_says_what_training_did(round_dir: Path) -> None:
    import dataclasses

    cfg = load_config(round_dir / "loop.yaml")
    budget = {"method": "grpo", "steps": 100_000, "max_seconds": 120.0, "sft_warmup_steps": 80}
    cfg = cfg.model_copy(update={"train": cfg.train.model_copy(update=budget)})
    work = cfg.workdir
    state = read_record(work / "state.json", RunState)
    verdict = read_record(work / "gate" / "verdict.json", GateVerdict)
    inputs = capstone_inputs(cfg, RunLayout(work), state)
    inputs = dataclasses.replace(inputs, trained=(71, 121.035, "max_seconds"))
    text = render_capstone(cfg, state, inputs, verdict, round_dir / "budget-report.md")
    assert "- Method: grpo, up to 100000 steps or 120 s, lr 0.0005" in text
    assert (
        "  - trained: 71 grpo steps after the warm-up's 80 in 121.0 s, stopped by max_seconds"
        in text
    )
