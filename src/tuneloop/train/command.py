"""`tuneloop train`, `tuneloop merge`, `tuneloop doctor`: thin typer wrappers.

`tuneloop train`'s settings options are generated from `TrainConfig` (one definition with
loop.yaml); the old spellings (`--lr`, `--group-size`, …) still work for one release with a
warning. Nothing heavy is imported at module level (torch, transformers, trl load inside the
functions that train, merge or check), so `tuneloop --help` stays fast. Bad input raises
InputError (exit 2); a failed doctor exits 1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tuneloop.config import MergeConfig, SlicingConfig, TrainConfig
from tuneloop.config.options import settings_options
from tuneloop.errors import InputError, require_writable_dir
from tuneloop.train.checkpoint import doctor as run_doctor
from tuneloop.train.checkpoint import merge as run_merge
from tuneloop.train.run import train as run_train

Opt = typer.Option


TRAIN_ALIASES = {
    "--lr": "learning_rate",
    "--target-modules": "lora.target_modules",
    "--group-size": "grpo.group_size",
    "--beta": "grpo.beta",
    "--loss-type": "grpo.loss_type",
    "--max-completion-length": "grpo.max_completion_length",
    "--temperature": "grpo.temperature",
    "--scorer": "grpo.scorer",
}
"""Spellings from before the options were generated from `TrainConfig` (deprecated)."""


@settings_options(SlicingConfig, param="slicing", skip=frozenset({"slices", "stratify_by_tag"}))
@settings_options(TrainConfig, param="settings", aliases=TRAIN_ALIASES)
def train(
    base: Annotated[Path, Opt(help="Base model folder (Hugging Face format).")],
    out: Annotated[Path, Opt(help="Adapter output folder (must not exist).")],
    suite: Annotated[list[Path] | None, Opt(help="Suite JSONL to refuse overlap with.")] = None,
    progress: Annotated[bool, Opt(help="Show a progress bar.")] = True,
    *,
    settings: TrainConfig,
    slicing: SlicingConfig,
) -> None:
    """Train a LoRA adapter (or, with --adapter none, the whole model) with SFT, GRPO or DPO.

    Every setting of loop.yaml's `train:` section is an option (`lora.r` is `--lora-r`).
    """
    if settings.data is None:
        raise InputError("--data: give the training JSONL")
    require_writable_dir(out, "--out")
    path = run_train(
        base,
        settings.data,
        out,
        settings,
        suite_paths=suite or [],
        default_scorer=slicing.default_scorer,
        progress=progress,
    )
    typer.echo(f"adapter: {path}")


@settings_options(MergeConfig, param="settings", skip=frozenset({"zero_adapter"}))
def merge(
    base: Annotated[Path, Opt(help="Base model folder.")],
    out: Annotated[Path, Opt(help="Merged checkpoint folder.")],
    adapter: Annotated[Path | None, Opt(help="LoRA adapter folder.")] = None,
    zero_adapter: Annotated[bool, Opt(help="Control arm: base through the merge path.")] = False,
    *,
    settings: MergeConfig,
) -> None:
    """Merge a LoRA adapter into its base (standalone safetensors checkpoint + lineage)."""
    if (adapter is None) == (not zero_adapter):
        raise InputError("merge: give exactly one of --adapter PATH or --zero-adapter")
    require_writable_dir(out, "--out")
    typer.echo(f"merged: {run_merge(base, adapter, out, min_change=settings.min_change)}")


def doctor(
    model_dir: Annotated[Path, typer.Argument(help="Checkpoint folder to check.")],
    fix_stop_tokens: Annotated[
        bool, Opt(help="Repair generation_config.json stop tokens (metadata only).")
    ] = False,
    compat: Annotated[
        bool, Opt(help="Print the model's facts and what each step of a round will do with it.")
    ] = False,
) -> None:
    """Check a checkpoint: finite tensors, shards, shapes, tokenizer, stop tokens, generation.

    With --compat: what the folder is (architecture, vocabulary, chat template, end of turn,
    LoRA targets) and which steps of a round it supports, read without loading weights."""
    from rich.console import Console
    from rich.table import Table

    if compat:
        raise typer.Exit(_compat(model_dir))
    report = run_doctor(model_dir, fix_stop_tokens=fix_stop_tokens)
    table = Table(title=f"doctor {model_dir}")
    for col in ("check", "result", "detail"):
        table.add_column(col)
    for c in report.checks:
        table.add_row(c.name, "[green]ok" if c.ok else "[red]FAIL", c.detail)
    Console(width=160).print(table)
    if not report.ok:
        names = ", ".join(c.name for c in report.failures())
        typer.echo(f"doctor: FAILED ({names})", err=True)
        raise typer.Exit(1)


def _compat(model_dir: Path) -> int:
    """`doctor --compat`: the facts and the per-step table; 1 when a step cannot run."""
    from rich.console import Console
    from rich.table import Table

    from tuneloop.train.checkpoint.compat import (
        compat_rows,
        read_facts,
        vllm_architectures,
        with_modules,
    )
    from tuneloop.vllm_env import VllmEnvError, find_vllm

    if not (model_dir / "config.json").is_file():
        raise InputError(f"{model_dir}: not a Hugging Face model folder (no config.json)")
    facts = with_modules(read_facts(model_dir))
    for line in facts.summary():
        typer.echo(line)
    try:
        archs = vllm_architectures(find_vllm(None).python)
    except VllmEnvError:
        archs = None
    table = Table(title=f"compat {model_dir}")
    for col in ("step", "result", "why"):
        table.add_column(col)
    rows = compat_rows(facts, archs)
    for step, ok, why in rows:
        table.add_row(step, "[green]ok" if ok else "[red]no", why)
    Console(width=160).print(table)
    return 0 if all(ok for _, ok, _ in rows) else 1
