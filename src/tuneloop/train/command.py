"""`tuneloop train`, `tuneloop merge`, `tuneloop doctor`: thin typer wrappers.

Nothing heavy is imported at module level (torch, transformers, trl load inside the commands),
so `tuneloop --help` stays fast. Bad input raises InputError (exit 2); a failed doctor exits 1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tuneloop.errors import InputError, require_writable_dir

Opt = typer.Option


def _require_positive(values: dict[str, float]) -> None:
    """InputError naming the first option that is not > 0 (typer's `min` is inclusive).

    Written as `not value > 0` so that nan is refused too.
    """
    for flag, value in values.items():
        if not value > 0:
            raise InputError(f"{flag} must be > 0, got {value}")


def train(
    method: Annotated[str, Opt(help="grpo, sft, dpo or a registered trainer plugin.")] = "grpo",
    base: Annotated[Path, Opt(help="Base model folder (Hugging Face format).")] = Path("."),
    data: Annotated[Path, Opt(help="Training JSONL.")] = Path("train.jsonl"),
    out: Annotated[Path, Opt(help="Adapter output folder (must not exist).")] = Path("adapter"),
    steps: Annotated[int, Opt(min=1, help="Optimizer steps.")] = 100,
    learning_rate: Annotated[float, Opt("--lr", help="Peak learning rate.")] = 5e-4,
    batch_size: Annotated[int, Opt(min=1, help="Prompts (GRPO) or rows per step.")] = 8,
    seed: Annotated[int, Opt(help="Training seed.")] = 0,
    lora_r: Annotated[int, Opt(min=1, help="LoRA rank.")] = 16,
    lora_alpha: Annotated[float, Opt(help="LoRA alpha.")] = 32.0,
    lora_dropout: Annotated[float, Opt(help="LoRA dropout.")] = 0.0,
    target_modules: Annotated[str, Opt(help="'all-linear' or comma-separated names.")] = (
        "all-linear"
    ),
    group_size: Annotated[int, Opt(min=2, help="GRPO completions per prompt.")] = 8,
    beta: Annotated[float, Opt(min=0, help="GRPO KL coefficient.")] = 0.0,
    loss_type: Annotated[str, Opt(help="GRPO loss type.")] = "dr_grpo",
    max_completion_length: Annotated[int, Opt(min=1, help="GRPO completion tokens.")] = 16,
    temperature: Annotated[float, Opt(help="GRPO sampling temperature.")] = 1.0,
    scorer: Annotated[str | None, Opt(help="GRPO reward scorer (default: per row).")] = None,
    default_scorer: Annotated[str, Opt(help="Scorer for rows that name none.")] = "numeric",
    sft_warmup_steps: Annotated[int, Opt(min=0, help="GRPO: SFT-on-references steps first.")] = 0,
    dpo_beta: Annotated[float, Opt(help="DPO beta.")] = 0.1,
    suite: Annotated[list[Path] | None, Opt(help="Suite JSONL to refuse overlap with.")] = None,
    allow_contamination: Annotated[bool, Opt(help="Train despite suite overlap.")] = False,
    nproc: Annotated[int, Opt(min=1, help="Processes (torchrun).")] = 1,
    progress: Annotated[bool, Opt(help="Show a progress bar.")] = True,
) -> None:
    """Train a LoRA adapter with SFT, GRPO or DPO (TRL + PEFT)."""
    from tuneloop.train.run import train as run_train
    from tuneloop.train.settings import TrainSettings

    _require_positive(
        {
            "--lr": learning_rate,
            "--lora-alpha": lora_alpha,
            "--dpo-beta": dpo_beta,
            "--temperature": temperature,
        }
    )
    if not 0 <= lora_dropout < 1:  # also refuses nan
        raise InputError(f"--lora-dropout must lie in [0, 1), got {lora_dropout}")
    require_writable_dir(out, "--out")
    targets: tuple[str, ...] | str = target_modules
    if target_modules != "all-linear":
        targets = tuple(t.strip() for t in target_modules.split(",") if t.strip())
    settings = TrainSettings(
        steps=steps,
        learning_rate=learning_rate,
        batch_size=batch_size,
        seed=seed,
        lora_r=lora_r,
        lora_alpha=lora_alpha,
        lora_dropout=lora_dropout,
        target_modules=targets,
        group_size=group_size,
        beta=beta,
        loss_type=loss_type,
        max_completion_length=max_completion_length,
        temperature=temperature,
        reward_scorer=scorer,
        sft_warmup_steps=sft_warmup_steps,
        dpo_beta=dpo_beta,
    )
    path = run_train(
        method,
        base,
        data,
        out,
        settings,
        suite_paths=suite or [],
        allow_contamination=allow_contamination,
        default_scorer=default_scorer,
        nproc=nproc,
        progress=progress,
    )
    typer.echo(f"adapter: {path}")


def merge(
    base: Annotated[Path, Opt(help="Base model folder.")],
    out: Annotated[Path, Opt(help="Merged checkpoint folder.")],
    adapter: Annotated[Path | None, Opt(help="LoRA adapter folder.")] = None,
    zero_adapter: Annotated[bool, Opt(help="Control arm: base through the merge path.")] = False,
) -> None:
    """Merge a LoRA adapter into its base (standalone safetensors checkpoint + lineage)."""
    from tuneloop.train.merge import merge as run_merge

    if (adapter is None) == (not zero_adapter):
        raise InputError("merge: give exactly one of --adapter PATH or --zero-adapter")
    require_writable_dir(out, "--out")
    typer.echo(f"merged: {run_merge(base, adapter, out)}")


def doctor(
    model_dir: Annotated[Path, typer.Argument(help="Checkpoint folder to check.")],
    fix_stop_tokens: Annotated[
        bool, Opt(help="Repair generation_config.json stop tokens (metadata only).")
    ] = False,
) -> None:
    """Check a checkpoint: finite tensors, shards, shapes, tokenizer, stop tokens, generation."""
    from rich.console import Console
    from rich.table import Table

    from tuneloop.train.doctor import doctor as run_doctor

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
