"""Choose the GRPO demo's recipe by a sweep on the dev slice, at equal training seconds.

Run: `python examples/arith/sweep_grpo.py [--seconds 120] [--arms NAME,NAME] [--work DIR]`
(about 3 minutes an arm, 12 arms, on 2 CPU cores). Prints a Markdown table and writes it, with the
winning arm's `train:` section, to `WORK/table.md` and `WORK/winner.yaml`.

Every arm is one `tuneloop run` round of `loop_grpo.yaml` in one workdir, with only its
`train:` (or, for the band-edge arm, its corpus config) changed, the gate off and the
evaluation restricted to the suite's **dev** slice (`eval.slice: dev`; the slices are
`loop_grpo.yaml`'s, by id hash). So:
- the data phase (the champion's pass rates, `corpus_grpo.yaml`) and `eval_pre` run once and
  are reused by every arm with the same data; the arms differ only in training;
- no arm's model ever answers a gate item: the gate slice is not tuned on. The arm with the
  largest paired Δ on dev is the recipe `loop_grpo.yaml` commits, and its gate is looked at
  once, by `tuneloop run examples/arith/loop_grpo.yaml`;
- every arm gets the same `train.max_seconds`, counted from its first optimizer step; the
  table reports its steps and trained seconds from `train_settings.json`.

The arms vary one setting at a time around the centre (`loop_grpo.yaml`'s recipe without its
KL term, as the sweep found it): the
loss type among TRL's (`dr_grpo`, `dapo`, `grpo`, `cispo`), the KL coefficient β, the learning
rate, the group size, the sampling temperature and the band edges (the prompts kept by the
champion's pass rate). Three more arms say what each step contributes: GRPO without the
warm-up, the warm-up alone, and SFT on the warm-up's data for the whole budget.
Δ, its bootstrap 95% CI and the paired permutation p are tuneloop's own report of the round
(`report/delta.json`), on the dev items only.
"""

from __future__ import annotations

import argparse
import copy
import platform
import shutil
import time
from datetime import date
from pathlib import Path
from typing import Any

import yaml
from rounds import round_figures, tag_change

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
MAX_STEPS = 100_000
"""`train.steps` of every arm: an upper bound; the budget (`train.max_seconds`) ends them."""


def centre() -> dict[str, Any]:
    """The centre arm: `loop_grpo.yaml`'s `train:` section as the sweep found it, before its
    winner (`kl 0.04`) was committed there: without a KL term (`grpo.beta` 0)."""
    train = dict(yaml.safe_load((HERE / "loop_grpo.yaml").read_text())["train"])
    train["grpo"] = {**train["grpo"], "beta": 0.0}
    return train


SFT_ONLY = {"method": "sft", "data": "train_prompts.jsonl", "batch_size": 64, "learning_rate": 1e-3}
"""The warm-up's own settings as a whole SFT run on its data (GRPO keys dropped)."""

ARMS: dict[str, dict[str, Any]] = {
    "centre": {},
    "loss dapo": {"grpo.loss_type": "dapo"},
    "loss grpo": {"grpo.loss_type": "grpo"},
    "loss cispo": {"grpo.loss_type": "cispo"},
    "kl 0.04": {"grpo.beta": 0.04},
    "lr ×2": {"learning_rate": 2.0},
    "group 16": {"grpo.group_size": 16},
    "temperature 1.2": {"grpo.temperature": 1.2},
    "GRPO only (no warm-up)": {"sft_warmup_steps": 0},
    "warm-up only (80 SFT steps)": {"sft": {**SFT_ONLY, "steps": 80, "max_seconds": None}},
    "SFT only (same seconds)": {"sft": SFT_ONLY},
    "bands 0 to 0.75": {"bands.edges": [0, 0.75]},
}
"""Arm name → what differs from the centre ({dotted train key: value}). A learning-rate
entry is a factor of the centre's; `sft` replaces GRPO by SFT on the warm-up's data (the
warm-up alone, and SFT for the whole budget: what GRPO's seconds would have bought as SFT);
`bands.edges` changes the corpus config (keep `medium`: 0 < pass rate < 0.75), so it runs
last, its data phase on its own."""


def set_key(section: dict[str, Any], dotted: str, value: Any) -> None:
    keys = dotted.split(".")
    for key in keys[:-1]:
        section = section.setdefault(key, {})
    section[keys[-1]] = value


def train_section(change: dict[str, Any], seconds: float) -> dict[str, Any]:
    train = copy.deepcopy(centre()) | {"steps": MAX_STEPS, "max_seconds": seconds}
    if "sft" in change:
        sft = {k: v for k, v in train.items() if k in ("torch_threads", "lora", "seed")}
        sft |= {"steps": MAX_STEPS, "max_seconds": seconds} | change["sft"]
        sft["data"] = str(HERE / sft["data"])
        return {k: v for k, v in sft.items() if v is not None}
    train["sft_warmup_data"] = str(HERE / train["sft_warmup_data"])
    for key, value in change.items():
        if key == "learning_rate":
            value = train["learning_rate"] * value
        if key == "sft_warmup_steps" and value == 0:
            train = {k: v for k, v in train.items() if not k.startswith("sft_warmup")}
            continue
        if not key.startswith("bands."):
            set_key(train, key, value)
    return train


def corpus_config(change: dict[str, Any], work: Path) -> Path:
    """`corpus_grpo.yaml` with its paths made absolute and the arm's band edges."""
    cfg = yaml.safe_load((HERE / "corpus_grpo.yaml").read_text())
    for source in cfg["sources"]:
        source["path"] = str(HERE / source["path"])
    cfg["decontaminate"]["suites"] = [str(HERE / p) for p in cfg["decontaminate"]["suites"]]
    if "bands.edges" in change:
        cfg["bands"]["edges"] = change["bands.edges"]
    path = work / ("corpus.yaml" if "bands.edges" not in change else "corpus_edges.yaml")
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def loop_config(work: Path, change: dict[str, Any], seconds: float) -> Path:
    cfg = yaml.safe_load((HERE / "loop_grpo.yaml").read_text())
    cfg |= {
        "name": "sweep-grpo",
        "workdir": str(work / "loop"),
        "base_model": str(HERE / cfg["base_model"]),
        "train": train_section(change, seconds),
        "gate": {"enabled": False},
        "archive": {"enabled": False},
    }
    cfg["suite"]["path"] = str(HERE / cfg["suite"]["path"])
    cfg["eval"]["slice"] = "dev"  # no arm answers a gate item
    cfg["data"]["corpus"] = str(corpus_config(change, work))
    path = work / "loop.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def measure_arm(name: str, change: dict[str, Any], work: Path, seconds: float) -> dict[str, Any]:
    loop = work / "loop"
    figures = round_figures(loop_config(work, change, seconds), loop, name)
    kept = work / "arms" / name.replace(" ", "_")
    shutil.rmtree(kept, ignore_errors=True)
    shutil.copytree(loop / "report", kept)
    shutil.copy(loop / "train" / "adapter" / "metrics.jsonl", kept / "metrics.jsonl")
    prompts = sum(1 for line in (loop / "data" / "grpo.jsonl").open() if line.strip())
    return figures | {"change": change, "prompts": prompts}


def table(results: list[dict[str, Any]], seconds: float) -> str:
    pp = lambda x: f"{100 * x:+.1f}"  # noqa: E731
    first = results[0]
    lines = [
        f"Measured {date.today().isoformat()} on {platform.machine()} "
        f"({platform.processor() or platform.system()}, CPU only), base pass@1 "
        f"{100 * first['pre']:.1f}% on the {first['n']}-item dev slice, {seconds:.0f} s of "
        "training per arm (`train.max_seconds`, from the first optimizer step).",
        "",
        "| arm | prompts | steps | trained s | dev pass@1 | Δ vs base (pts) | 95% CI | p "
        "| fixed / broken | words | symbolic |",
        "|---|---:|---:|---:|---:|---:|---|---:|---|---:|---:|",
    ]
    for r in results:
        lo, hi = r["ci"]
        lines.append(
            f"| {r['arm']} | {r['prompts']} | {r['steps']} | {r['seconds']:.1f} "
            f"| {100 * r['post']:.1f}% | {pp(r['delta'])} | {pp(lo)} to {pp(hi)} "
            f"| {r['p']:.3g} | {r['flips'][0]} / {r['flips'][1]} "
            f"| {tag_change(r, 'words')} | {tag_change(r, 'symbolic')} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--arms", default=",".join(ARMS), help="comma-separated subset")
    parser.add_argument("--work", type=Path, default=ROOT / "runs" / "sweep-grpo")
    args = parser.parse_args()
    chosen = [a.strip() for a in args.arms.split(",")]
    unknown = [a for a in chosen if a not in ARMS]
    if unknown:
        parser.error(f"unknown arms {unknown}; choose from {list(ARMS)}")
    work: Path = args.work.resolve()
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    t0 = time.perf_counter()
    results = [measure_arm(name, ARMS[name], work, args.seconds) for name in chosen]
    text = table(results, args.seconds)
    # the recipe is a GRPO arm; the SFT arms say what GRPO's steps and seconds are worth
    best = max((r for r in results if "sft" not in r["change"]), key=lambda r: r["delta"])
    text += (
        f"\n\nWinner on dev: **{best['arm']}** (Δ {100 * best['delta']:+.1f} points). "
        f"Whole sweep: {time.perf_counter() - t0:.0f} s wall."
    )
    (work / "table.md").write_text(text + "\n")
    winner = {"arm": best["arm"], "train": train_section(best["change"], args.seconds)}
    (work / "winner.yaml").write_text(yaml.safe_dump(winner, sort_keys=False))
    print(text)


if __name__ == "__main__":
    main()
