"""The capstone `report.md`: one page a reviewer reads to judge the run.

It only *reads* artifacts the phases wrote (sample-log summaries, `delta.json`,
`verdict.json`, the adapter's training settings, `state.json`) and stamps the machine and
package versions; it computes no statistic of its own. A section whose artifact does not
exist says "not measured" rather than leaving a gap.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tuneloop.config import LoopConfig
from tuneloop.provenance import stamp
from tuneloop.records import atomic_write_text, read_json


def _maybe(path: Path) -> dict[str, Any] | None:
    return read_json(path) if path.exists() else None


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _pp(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:+.1f} pts"


def _recorded(state: dict[str, Any], phase: str, name: str) -> str:
    """An input's sha256 as the runner recorded it (no second hash of a model)."""
    digest = state.get("phases", {}).get(phase, {}).get("inputs", {}).get(name)
    return f"{digest[:16]}…" if digest else "n/a"


def _inputs(cfg: LoopConfig, up: dict[str, Path], state: dict[str, Any]) -> list[str]:
    pre = _maybe(up["eval_pre"] / "summary.json") or {}
    sampling = pre.get("sampling", {})
    t = cfg.train
    data = cfg.train.data or up["data"] / "sft.jsonl"
    lines = [
        "## Pinned inputs",
        "",
        f"- Base model: `{cfg.base_model}` (sha256 `{_recorded(state, 'eval_pre', 'base_model')}`)",
        f"- Suite: `{cfg.suite.path}`, revision `{pre.get('suite_revision', 'n/a')[:16]}…`, "
        f"{len(pre.get('item_ids', []))} items evaluated; slices {cfg.suite.slices}",
        f"- Sampling (pre and post): {sampling.get('n_samples')} sample(s)/item, "
        f"temperature {sampling.get('temperature')}, top_p {sampling.get('top_p')}, "
        f"max_tokens {sampling.get('max_tokens')}, seed {sampling.get('seed')}",
    ]
    if cfg.merge.zero_adapter:
        lines.append("- Training: none — zero-adapter control arm (base passed through merge)")
    else:
        key = "data" if cfg.train.data is not None else "data:data/sft.jsonl"
        lines.append(f"- Training data: `{data}` (sha256 `{_recorded(state, 'train', key)}`)")
        prov = up["data"] / "provenance.json"
        if prov.exists():
            lines.append(f"  - built from traces; provenance: `{prov}`")
        lines.append(
            f"- Method: {t.method}, {t.steps} steps, lr {t.learning_rate}, batch {t.batch_size}, "
            f"LoRA r={t.lora.r} alpha={t.lora.alpha}, seed {t.seed}"
            + (
                f", GRPO group {t.grpo.group_size}, loss {t.grpo.loss_type}, beta {t.grpo.beta}"
                if t.method == "grpo"
                else ""
            )
            + (f", SFT warm-up {t.sft_warmup_steps} steps" if t.sft_warmup_steps else "")
        )
        settings = up["train"] / "adapter" / "train_settings.json"
        if settings.exists():
            lines.append(f"  - resolved settings: `{settings}`")
    return [*lines, ""]


def _result(up: dict[str, Path]) -> list[str]:
    d = _maybe(up["report"] / "delta.json")
    if d is None:
        return ["## Result", "", "not measured (no delta report)", ""]
    lo, hi = d["delta_ci"]
    f = d["flips"]
    return [
        "## Result (report slice: every evaluated item except the gate slice)",
        "",
        "| | pre | post |",
        "|---|---|---|",
        f"| mean item score | {_pct(d['pre']['mean'])} | {_pct(d['post']['mean'])} |",
        f"| Wilson CI | {_pct(d['pre']['wilson_ci'][0])}–{_pct(d['pre']['wilson_ci'][1])} "
        f"| {_pct(d['post']['wilson_ci'][0])}–{_pct(d['post']['wilson_ci'][1])} |",
        f"| missing / harness errors | {d['pre']['missing']} / {d['pre']['harness_error']} "
        f"| {d['post']['missing']} / {d['post']['harness_error']} |",
        "",
        f"- Paired Δ = **{_pp(d['delta'])}** (bootstrap {int(100 * d['settings']['confidence'])}% "
        f"CI {_pp(lo)} to {_pp(hi)}, {d['settings']['n_resamples']} resamples, seed "
        f"{d['settings']['seed']}), n = {d['n_items']} items",
        f"- Paired permutation p (two-sided) = {d['p_two_sided']:.3g}; one-sided (post > pre) "
        f"= {d['p_greater']:.3g} ({d['permutation_method']})",
        f"- Exact sign test on changed items: {d['sign_wins']} up, {d['sign_losses']} down, "
        f"p = {d['sign_p_two_sided']:.3g}",
        f"- Cohen's d_z = {d['d_z'] if d['d_z'] is None else round(d['d_z'], 3)}; "
        f"MDE at this n = {_pp(d['mde'])}",
        f"- Flips (right = item score ≥ {f['threshold']}): wrong→right {f['wrong_to_right']}, "
        f"right→wrong {f['right_to_wrong']}",
        "",
        "![pass@k](../report/passk.png) ![items](../report/items.png)",
        "",
    ]


def _verdict(cfg: LoopConfig, up: dict[str, Path]) -> list[str]:
    if not cfg.gate.enabled:
        return ["## Gate", "", "off (gate.enabled: false)", ""]
    v = _maybe(up["gate"] / "verdict.json")
    if v is None:
        return ["## Gate", "", "not run", ""]
    lines = [
        "## Gate",
        "",
        f"**{v['decision']}** on slice `{v['slice']}` "
        f"(champion {_pct(v['champion']['mean'])} → challenger {_pct(v['challenger']['mean'])})",
        "",
        f"Bar (pre-registered in the config): `{json.dumps(v['bar'])}`",
        "",
    ]
    lines += [
        f"- {'✓' if c['passed'] else '✗'} {c['name']}: {c['detail']}" for c in v["conditions"]
    ]
    lines += [
        "",
        f"Bar sealed in the ledger at {v.get('sealed_at') or 'n/a'}, before the post evaluation; "
        f"evidence `{(v.get('evidence_sha256') or 'n/a')[:16]}` (both logs, both models, bar, "
        "items). The champion changes only in the `promote` phase, after this run's archive "
        "verifies (`promote/promotion.json`).",
    ]
    return [*lines, ""]


def _timings(state: dict[str, Any]) -> list[str]:
    lines = ["## Phases", "", "| phase | status | seconds |", "|---|---|---|"]
    total = 0.0
    for name, rec in state.get("phases", {}).items():
        dur = rec.get("duration_s")
        total += dur or 0.0
        shown = f"{dur:.1f}" if dur is not None else "—"
        status = "writing this report" if name == "capstone" else rec["status"]
        lines.append(f"| {name} | {status} | {shown} |")
    return [*lines, f"| total phase work | | {total:.1f} |", ""]


def _machine() -> list[str]:
    s = stamp()
    m = s["machine"]
    pk = ", ".join(f"{k} {v}" for k, v in s["packages"].items() if v)
    return [
        "## Machine and versions",
        "",
        f"- {m['platform']}, Python {m['python']}, {m['cpu_count']} CPUs, {m['memory_gb']} GiB, "
        f"GPUs: {', '.join(m['gpus']) or 'none'}",
        f"- {pk}",
        f"- code: git {s['git_commit'] or 'n/a'}; written {s['at']}",
        "",
    ]


def write_capstone(cfg: LoopConfig, workdir: Path, upstream: dict[str, Path], out: Path) -> None:
    state = read_json(workdir / "state.json")
    lines = [f"# tuneloop run `{state.get('run_id')}` — {cfg.name}", ""]
    lines += _inputs(cfg, upstream, state)
    lines += _result(upstream)
    lines += _verdict(cfg, upstream)
    lines += _timings(state)
    lines += _machine()
    atomic_write_text(out, "\n".join(lines))
