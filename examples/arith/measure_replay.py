"""Measure teacher replay: reference SFT vs teacher-distilled SFT vs the composite objective.

Run: `python examples/arith/measure_replay.py [--seconds 180] [--lr 0.001]
[--composite-lr 0.0001] [--alpha 0.5] [--beta 0.5] [--arms reference,teacher-distilled,composite]
[--work DIR]` (after `build_teachers.py` and `make_replay_traces.py`; about 15 minutes on 2 CPU
cores). Prints a Markdown table and writes it, with every figure's source, to `WORK/table.md`.

What it does, with tuneloop's own commands and loop:
1. `tuneloop ingest` of the replay log (`traces/replay_production.jsonl`: 1,200 questions,
   three quarters in words, a quarter symbolic) into canonical traces, and `tuneloop corpus
   build corpus_replay.yaml` of it into GRPO prompts (each logged question with its
   verifiable answer);
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

Same training seconds, by `train.max_seconds`: every arm gets the same wall-clock budget,
counted from its first optimizer step (model loading excluded), and `train.steps` is only an
upper bound no arm reaches. The table reports each arm's steps done and trained seconds from
its `train_settings.json` (`steps_done`, `train_seconds`, `stop` must be `max_seconds`).
"""

from __future__ import annotations

import argparse
import platform
import shutil
import time
from datetime import date
from pathlib import Path
from typing import Any

import yaml
from rounds import TUNELOOP, round_figures, sh, tag_change

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
MAX_STEPS = 100_000
"""`train.steps` of every arm: an upper bound; the budget (`train.max_seconds`) ends them."""
COMPOSITE_LR = 0.0001
"""The composite arm's learning rate (`--composite-lr`): at 1e-3 its reward collapsed."""
COMMON: dict[str, Any] = {
    "learning_rate": 0.001,
    "batch_size": 64,
    "torch_threads": 1,
    "seed": 0,
    "lora": {"r": 64, "alpha": 64},
}
COMPOSITE = "composite (GRPO + α·self-distill + β·replay-DPO)"
ARMS: dict[str, dict[str, Any]] = {
    "reference SFT": {"method": "sft", "data": "data/grpo.jsonl"},
    "teacher-distilled SFT": {"method": "sft", "data": "replay/sft.jsonl"},
    COMPOSITE: {
        "method": "composite",
        "data": "data/grpo.jsonl",
        "batch_size": 8,
        "learning_rate": COMPOSITE_LR,
        "grpo": {"group_size": 4, "max_completion_length": 8, "scorer": "numeric"},
        "composite": {"alpha": 0.5, "beta": 0.5, "pairs": "replay/dpo.jsonl"},
    },
}


def rows(path: Path) -> int:
    return sum(1 for line in path.read_text().splitlines() if line.strip())


def train_section(arm: dict[str, Any], work: Path, seconds: float) -> dict[str, Any]:
    out = {**COMMON, **arm, "steps": MAX_STEPS, "max_seconds": seconds}
    out["data"] = str(work / arm["data"])
    if "composite" in arm:
        out["composite"] = {**arm["composite"], "pairs": str(work / arm["composite"]["pairs"])}
    return out


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
    slug = name.split(" ")[0].strip("(")
    loop = work / "loop"
    figures = round_figures(loop_config(work, train_section(arm, work, seconds)), loop, name)
    if figures["stop"] != "max_seconds":
        raise SystemExit(f"{name}: training ended by {figures['stop']}, not the budget")
    kept = work / "arms" / slug
    shutil.rmtree(kept, ignore_errors=True)
    shutil.copytree(loop / "report", kept)
    return figures | {"rows": rows(work / arm["data"])}


def table(results: list[dict[str, Any]], seconds: float, replay: Any) -> str:
    pp = lambda x: f"{100 * x:+.1f}"  # noqa: E731
    lines = [
        f"Measured {date.today().isoformat()} on {platform.machine()} "
        f"({platform.processor() or platform.system()}, CPU only), same base (`model/`, "
        f"pass@1 {100 * results[0]['pre']:.1f}% on the {results[0]['n']}-item suite), "
        f"{seconds:.0f} s of training per arm (`train.max_seconds`, from the first optimizer "
        "step).",
        "",
        "| arm | training rows | lr | steps | trained s | pass@1 | Δ vs base (pts) "
        "| 95% CI | p | fixed / broken | words | symbolic |",
        "|---|---:|---:|---:|---:|---:|---:|---|---:|---|---:|---:|",
    ]
    for r in results:
        lo, hi = r["ci"]
        lines.append(
            f"| {r['arm']} | {r['rows']} | {r['lr']:g} | {r['steps']} | {r['seconds']:.1f} "
            f"| {100 * r['post']:.1f}% | {pp(r['delta'])} | {pp(lo)} to {pp(hi)} "
            f"| {r['p']:.3g} | {r['flips'][0]} / {r['flips'][1]} "
            f"| {tag_change(r, 'words')} | {tag_change(r, 'symbolic')} |"
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
    parser.add_argument("--seconds", type=float, default=180.0)
    parser.add_argument("--lr", type=float, default=COMMON["learning_rate"], help="SFT arms")
    parser.add_argument("--composite-lr", type=float, default=COMPOSITE_LR)
    parser.add_argument("--alpha", type=float, default=0.5)
    parser.add_argument("--beta", type=float, default=0.5)
    parser.add_argument(
        "--arms", default="reference,teacher-distilled,composite", help="comma-separated subset"
    )
    parser.add_argument("--work", type=Path, default=ROOT / "runs" / "measure-replay")
    args = parser.parse_args()
    COMMON["learning_rate"] = args.lr
    composite = ARMS[COMPOSITE]
    composite["learning_rate"] = args.composite_lr
    composite["composite"] = {**composite["composite"], "alpha": args.alpha, "beta": args.beta}
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
    chosen = set(args.arms.split(","))
    arms = {n: a for n, a in ARMS.items() if n.split(" ")[0] in chosen}
    results = [measure_arm(name, arm, work, args.seconds) for name, arm in arms.items()]
    text = table(results, args.seconds, replay)
    text += f"\n\nWhole measurement: {time.perf_counter() - t0:.0f} s wall."
    (work / "table.md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
