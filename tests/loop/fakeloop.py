"""The real phase table with fake model phases: no server, no torch, seconds per run.

eval_pre, train, merge, doctor and eval_post are replaced by fakes that write real artifacts
(sample logs in the real format, a "model" folder whose bytes depend on train.steps); report,
gate, capstone, archive and promote are the real phases. A challenger trained for at least
`STRONG_STEPS` steps answers every other item right that the base gets wrong; a weaker one
changes nothing. Run as a script (`python fakeloop.py CONFIG [--from PHASE]`) for kill tests.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import yaml

from tuneloop.config import LoopConfig, load_config
from tuneloop.errors import PhaseFailed
from tuneloop.loop.context import PhaseContext
from tuneloop.loop.integrity import seal_round
from tuneloop.loop.layout import slice_ids
from tuneloop.loop.phases import CHALLENGER_PHASES, PHASES, Phase
from tuneloop.loop.runner import Runner, Selection
from tuneloop.records import write_jsonl, write_record
from tuneloop.samplelog import EvalSummary, SampleRow, SamplingParams
from tuneloop.suite import load_suite

STRONG_STEPS = 100
FAILING_STEPS = 13
"""A fake training run of exactly this many steps fails (a challenger that fails)."""
N_ITEMS = 240
CALLS: list[str] = []


def write_suite(path: Path) -> Path:
    rows = [
        {
            "id": f"q{i:04d}",
            "messages": [{"role": "user", "content": f"What is {i} + 1?"}],
            "answer": str(i + 1),
            "tags": ["add" if i % 2 else "sub"],
        }
        for i in range(N_ITEMS)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def write_config(tmp: Path, **sections: Any) -> Path:
    base = tmp / "base"
    base.mkdir(exist_ok=True)
    (base / "weights.bin").write_bytes(b"base-weights")
    from tests.modelfiles import write_model_files

    write_model_files(base)
    cfg: dict[str, Any] = {
        "name": "fake",
        "workdir": str(tmp / "work"),
        "base_model": str(base),
        "suite": {
            "path": str(write_suite(tmp / "suite.jsonl")),
            "slices": {"dev": 0.5, "gate": 0.5},
        },
        "train": {"method": "sft", "steps": STRONG_STEPS},
        "report": {"n_resamples": 200, "permutation_resamples": 200},
        "gate": {"min_items": 50, "margin": 0.05, "ledger": str(tmp / "ledger" / "ledger.db")},
        "archive": {"root": str(tmp / "archive")},
    }
    for key, value in sections.items():
        cfg[key] = {**cfg.get(key, {}), **value}
    path = tmp / "loop.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _log(ctx: PhaseContext, model: str, strong: bool) -> None:
    suite = load_suite(ctx.cfg.suite.path)
    wanted = set(slice_ids(ctx.cfg, ctx.cfg.eval.slice)) if ctx.cfg.eval.slice else None
    rows = []
    for i, item in enumerate(suite.items):
        if wanted is not None and item.id not in wanted:
            continue
        right = i % 3 == 0 or (strong and i % 2 == 0)
        rows.append(
            SampleRow(
                suite_revision=suite.revision,
                item_id=item.id,
                sample_index=0,
                model=model,
                seed=0,
                completion="x",
                score=1.0 if right else 0.0,
                scorer="numeric",
                status="ok",
                tags=list(item.tags),
            ).to_json()
        )
    assert not (ctx.folder / "samples.jsonl").exists(), "a redo must start from an empty folder"
    write_jsonl(ctx.folder / "samples.jsonl", rows)
    summary = EvalSummary(
        suite_path=str(ctx.cfg.suite.path),
        suite_revision=suite.revision,
        item_ids=[it.id for it in suite.items if wanted is None or it.id in wanted],
        slice=ctx.cfg.eval.slice,
        model=model,
        endpoint="fake",
        sampling=SamplingParams(n_samples=1, temperature=0.0, max_tokens=8),
        started_at="2026-11-30T00:00:00Z",
    )
    write_record(ctx.folder / "summary.json", summary)


def eval_pre(ctx: PhaseContext) -> None:
    CALLS.append("eval_pre")
    _log(ctx, "base", strong=False)


def train(ctx: PhaseContext) -> None:
    CALLS.append("train")
    if ctx.cfg.portfolio is not None:  # the real hand-over of the selected challenger
        from tuneloop.loop.portfolio.run import adopt_selected

        adopt_selected(ctx)
        return
    if ctx.cfg.train.steps == FAILING_STEPS:
        raise PhaseFailed("training diverged (a fake failure)")
    (ctx.folder / "adapter").mkdir()
    (ctx.folder / "adapter" / "steps.txt").write_text(str(ctx.cfg.train.steps))


def merge(ctx: PhaseContext) -> None:
    CALLS.append("merge")
    steps = (ctx.upstream["train"] / "adapter" / "steps.txt").read_text()
    (ctx.folder / "model").mkdir()
    (ctx.folder / "model" / "weights.bin").write_text(f"merged-{steps}")
    from tests.modelfiles import write_model_files

    write_model_files(ctx.folder / "model")


def doctor(ctx: PhaseContext) -> None:
    CALLS.append("doctor")
    (ctx.folder / "doctor.json").write_text('{"ok": true}')


def eval_post(ctx: PhaseContext) -> None:
    CALLS.append("eval_post")
    seal_round(ctx)
    steps = int((ctx.workdir / "train" / "adapter" / "steps.txt").read_text())
    _log(ctx, f"merged-{steps}", strong=steps >= STRONG_STEPS)


FAKES = {
    "eval_pre": eval_pre,
    "train": train,
    "merge": merge,
    "doctor": doctor,
    "eval_post": eval_post,
}


def phases(table: tuple[Phase, ...] = PHASES) -> tuple[Phase, ...]:
    out = []
    for p in table:
        fake = FAKES.get(p.name)
        out.append(dataclasses.replace(p, run=fake) if fake else p)
    return tuple(out)


def runner(config: Path, overrides: list[str] | None = None, **sel: str) -> Runner:
    cfg: LoopConfig = load_config(config, overrides)
    table = phases()
    selection = Selection(names=tuple(p.name for p in table), **sel)  # type: ignore[arg-type]
    return Runner(cfg, config, selection, table, phases(CHALLENGER_PHASES))


def run_round(config: Path, overrides: list[str] | None = None, asked: str = "next") -> int:
    """`tuneloop run CONFIG --round ASKED` on the fake phase table."""
    from tuneloop.loop.rounds.driver import RoundRequest, execute

    table = phases()
    selection = Selection(names=tuple(p.name for p in table))
    request = RoundRequest(config, overrides, selection, asked)
    fakes = phases(CHALLENGER_PHASES)
    return execute(load_config(config, overrides), request, phases=table, challenger_phases=fakes)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # `tests.modelfiles`
    args = sys.argv[1:]
    if len(args) > 2 and args[1] == "--round":
        sys.exit(run_round(Path(args[0]), asked=args[2]))
    kw = {"from_phase": args[2]} if len(args) > 2 and args[1] == "--from" else {}
    runner(Path(args[0]), **kw).run()


def run_with_train_adapter(config: Path, monkeypatch: Any) -> dict[str, Any]:
    """The whole fake round, its train phase the loop's real adapter (`run_train`) calling a
    stand-in for `tuneloop.train.run.train`; what the stand-in was handed (`data`, `settings`) and
    the runner's final `state`."""
    from tuneloop.loop.adapters import run_train

    seen: dict[str, Any] = {}

    def fake_train(base: Path, data: Path, out_dir: Path, settings: Any, **kw: Any) -> Path:
        seen["data"], seen["settings"] = data, settings
        out_dir.mkdir(parents=True)
        (out_dir / "steps.txt").write_text(str(settings.steps))
        return out_dir

    monkeypatch.setattr("tuneloop.train.run.train", fake_train)
    table = tuple(
        dataclasses.replace(p, run=run_train) if p.name == "train" else p for p in phases()
    )
    selection = Selection(names=tuple(p.name for p in table))
    seen["state"] = Runner(load_config(config), config, selection, table).run()
    return seen
