"""Measure teacher replay: reference SFT vs teacher-distilled SFT vs the composite objective.

Run: `python examples/arith/measure_replay.py [--seconds 60] [--lr 0.001] [--work DIR]`
(after `build_teachers.py` and `make_replay_traces.py`; about 5-6 minutes on 2 CPU cores).
Prints a Markdown table and writes it, with every figure's source, to `WORK/table.md`.

What it does, with tuneloop's own commands and loop:
1. `tuneloop ingest` of the replay log (`traces/replay_production.jsonl`) into canonical
   traces, and `tuneloop corpus build corpus_replay.yaml` of it into GRPO prompts (each logged
   question with its verifiable answer);
2. `tuneloop replay` of those traces to `teachers.yaml` (the adder and the subber);
3. three training arms from the same base (`model/`), each given the same training seconds:
   - reference SFT: SFT on the logged reference answers of every replayed question;
   - teacher-distilled SFT: SFT on the replay's `sft.jsonl` (the best passing teacher answer
     per step; steps no teacher passed have no row);
   - composite: TRL GRPO on the same questions + α · self-distillation (the reference as the
     hint) + β · replay-DPO on the replay's `dpo.jsonl`;
4. each arm is one `tuneloop run` round in one workdir (gate off), so the base is evaluated
   once (`eval_pre` skips on the later rounds) and each report is the paired Δ of that arm
   against the base on every suite item, bootstrap CI and permutation p (`tuneloop.report`).

Same training seconds, deliberately by calibration: tuneloop has no wall-clock stop for
training, so each arm first trains `CALIBRATION_STEPS` steps, its mean step time (the
`step_time_s` of its metrics, the first step left out) sets its step count for `--seconds`,
and the table reports the seconds each arm actually trained (`train_settings.json`), which
include model loading and so run a little over the budget.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import subprocess
import sys
import time
from datetime import date
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
TUNELOOP = Path(sys.executable).parent / "tuneloop"
CALIBRATION_STEPS = 4
COMMON: dict[str, Any] = {
    "learning_rate": 0.001,
    "batch_size": 32,
    "torch_threads": 1,
    "seed": 0,
    "lora": {"r": 64, "alpha": 64},
}
ARMS: dict[str, dict[str, Any]] = {
    "reference SFT": {"method": "sft", "data": "data/grpo.jsonl"},
    "teacher-distilled SFT": {"method": "sft", "data": "replay/sft.jsonl"},
    "composite (GRPO + α·self-distill + β·replay-DPO)": {
        "method": "composite",
        "data": "data/grpo.jsonl",
        "batch_size": 8,
        "grpo": {"group_size": 4, "max_completion_length": 8, "scorer": "numeric"},
        "composite": {"alpha": 0.5, "beta": 0.5, "pairs": "replay/dpo.jsonl"},
    },
}


def sh(*args: str | Path, check: bool = True) -> None:
    print("$", " ".join(str(a) for a in args), flush=True)
    subprocess.run([str(a) for a in args], check=check)


def rows(path: Path) -> int:
    return sum(1 for line in path.read_text().splitlines() if line.strip())


def train_section(arm: dict[str, Any], work: Path, steps: int) -> dict[str, Any]:
    out = {**COMMON, **arm, "steps": steps}
    out["data"] = str(work / arm["data"])
    if "composite" in arm:
        out["composite"] = {**arm["composite"], "pairs": str(work / arm["composite"]["pairs"])}
    return out


def calibrate(arm: dict[str, Any], work: Path, name: str) -> float:
    """Mean seconds per optimizer step of an arm (its first step, with warm-up, left out)."""
    out = work / "calibration" / name
    shutil.rmtree(out, ignore_errors=True)
    settings = train_section(arm, work, CALIBRATION_STEPS)
    cfg = work / "calibration" / f"{name}.yaml"
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text(yaml.safe_dump(settings))
    args: list[str | Path] = [TUNELOOP, "train", "--base", HERE / "model", "--out", out]
    args += ["--method", settings["method"], "--data", settings["data"]]
    args += ["--steps", str(CALIBRATION_STEPS), "--batch-size", str(settings["batch_size"])]
    args += ["--learning-rate", str(settings["learning_rate"]), "--torch-threads", "1"]
    args += ["--lora-r", "64", "--lora-alpha", "64", "--no-progress"]
    if settings["method"] == "composite":
        g, c = settings["grpo"], settings["composite"]
        args += ["--grpo-group-size", str(g["group_size"]), "--grpo-scorer", g["scorer"]]
        args += ["--grpo-max-completion-length", str(g["max_completion_length"])]
        args += ["--composite-alpha", str(c["alpha"]), "--composite-beta", str(c["beta"])]
        args += ["--composite-pairs", c["pairs"]]
    sh(*args)
    times = [
        json.loads(line)["step_time_s"]
        for line in (out / "metrics.jsonl").read_text().splitlines()
        if "step_time_s" in json.loads(line)
    ]
    return sum(times[1:]) / len(times[1:])


def loop_config(work: Path, train: dict[str, Any]) -> Path:
    cfg = {
        "name": "measure-replay",
        "workdir": str(work / "loop"),
        "base_model": str(HERE / "model"),
        "serve": {"backend": "embedded", "max_batch_size": 64},
        "suite": {"path": str(HERE / "suite.jsonl"), "default_scorer": "numeric"},
        "eval": {"temperature": 0.0, "max_tokens": 8, "concurrency": 32},
        "train": train,
        "report": {"n_resamples": 10000},
        "gate": {"enabled": False},
        "archive": {"enabled": False},
    }
    path = work / "loop.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def measure_arm(name: str, arm: dict[str, Any], work: Path, seconds: float) -> dict[str, Any]:
    from tuneloop.loop.state import RunState
    from tuneloop.records import read_record
    from tuneloop.report.record import DeltaReport
    from tuneloop.train.settings import TrainRunRecord

    slug = name.split(" ")[0].strip("(")
    step_s = calibrate(arm, work, slug)
    steps = max(1, round(seconds / step_s))
    loop = work / "loop"
    # the later phases (capstone, report.html) are not part of the measurement
    sh(TUNELOOP, "run", loop_config(work, train_section(arm, work, steps)), check=False)
    state = read_record(loop / "state.json", RunState)
    if state.phases["report"].status != "done":
        raise SystemExit(f"{name}: the round stopped before its report; see {loop}/state.json")
    delta = read_record(loop / "report" / "delta.json", DeltaReport)
    trained = read_record(loop / "train" / "adapter" / "train_settings.json", TrainRunRecord)
    kept = work / "arms" / slug
    shutil.rmtree(kept, ignore_errors=True)
    shutil.copytree(loop / "report", kept)
    return {
        "arm": name,
        "rows": rows(work / arm["data"]),
        "steps": steps,
        "step_s": step_s,
        "seconds": trained.seconds,
        "pre": delta.pre.mean,
        "post": delta.post.mean,
        "delta": delta.delta,
        "ci": delta.delta_ci,
        "p": delta.p_two_sided,
        "n": delta.n_items,
        "flips": (delta.flips.wrong_to_right, delta.flips.right_to_wrong),
        "tags": {d.tag: (d.pre_mean, d.post_mean) for d in delta.per_tag},
    }


def kind(result: dict[str, Any], tag: str) -> str:
    """`pre → post` pass@1 on the items with one tag."""
    if tag not in result["tags"]:
        return "n/a"
    pre, post = result["tags"][tag]
    return f"{100 * pre:.1f}% → {100 * post:.1f}%"


def table(results: list[dict[str, Any]], seconds: float, replay: Any) -> str:
    pp = lambda x: f"{100 * x:+.1f}"  # noqa: E731
    lines = [
        f"Measured {date.today().isoformat()} on {platform.machine()} "
        f"({platform.processor() or platform.system()}, CPU only), same base (`model/`, "
        f"pass@1 {100 * results[0]['pre']:.1f}% on the {results[0]['n']}-item suite), "
        f"{seconds:.0f} s of training per arm (equal steps calibrated to equal time), "
        f"learning rate {COMMON['learning_rate']:g} for every arm.",
        "",
        "| arm | training rows | steps | s/step | trained s | pass@1 | Δ vs base (pts) "
        "| 95% CI | p | fixed / broken | words | symbolic |",
        "|---|---:|---:|---:|---:|---:|---:|---|---:|---|---:|---:|",
    ]
    for r in results:
        lo, hi = r["ci"]
        lines.append(
            f"| {r['arm']} | {r['rows']} | {r['steps']} | {r['step_s']:.2f} | {r['seconds']:.0f} "
            f"| {100 * r['post']:.1f}% | {pp(r['delta'])} | {pp(lo)} to {pp(hi)} "
            f"| {r['p']:.3g} | {r['flips'][0]} / {r['flips'][1]} "
            f"| {kind(r, 'words')} | {kind(r, 'symbolic')} |"
        )
    rates = ", ".join(
        f"{t.name} {100 * (t.pass_rate or 0):.1f}% ({t.passed}/{t.scored})" for t in replay.teachers
    )
    lines += [
        "",
        f"Replay: {replay.steps_planned} steps, teacher pass rates {rates}; "
        f"{replay.sft_rows} distillation rows, {replay.dpo_pairs} pairs, cost "
        f"{replay.cost_usd:.2f} USD (embedded teachers). Logged answers right: "
        f"{replay.original_passed}/{replay.original_scored}.",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--lr", type=float, default=COMMON["learning_rate"])
    parser.add_argument("--work", type=Path, default=ROOT / "runs" / "measure-replay")
    args = parser.parse_args()
    COMMON["learning_rate"] = args.lr
    from tuneloop.records import read_record
    from tuneloop.records.replay import ReplayReport

    work: Path = args.work.resolve()
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    t0 = time.perf_counter()
    log = HERE / "traces" / "replay_production.jsonl"
    sh(TUNELOOP, "ingest", "-f", "openai_chat", log, "--out", work / "traces.jsonl")
    sh(TUNELOOP, "corpus", "build", HERE / "corpus_replay.yaml", "--out", work / "data")
    sh(
        TUNELOOP,
        "replay",
        "--traces",
        work / "traces.jsonl",
        "--teachers",
        HERE / "teachers.yaml",
        "--out",
        work / "replay",
    )
    replay = read_record(work / "replay" / "report.json", ReplayReport)
    results = [measure_arm(name, arm, work, args.seconds) for name, arm in ARMS.items()]
    text = table(results, args.seconds, replay)
    text += f"\n\nWhole measurement: {time.perf_counter() - t0:.0f} s wall."
    (work / "table.md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
