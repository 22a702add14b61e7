"""Merge a LoRA adapter into its base: a standalone safetensors checkpoint with lineage.

Run: `tuneloop merge --base MODEL --adapter ADAPTER --out DIR` (or `--zero-adapter`, the
control arm: the base goes through exactly the same load/save path with no adapter, so a
difference between base and zero-adapter evals is a merge/serialisation artifact, not
training). The output holds weights, tokenizer, and a generation config that stops on the
chat template's end-of-turn token, plus `lineage.json` (base and adapter hashes). If the output
already exists with the same lineage, nothing is done; the new checkpoint is written to a temp
folder and renamed, so a crash never leaves a half-written model.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from tuneloop.errors import InputError
from tuneloop.records import Record, read_record, sha256_tree, write_record
from tuneloop.train.chat import end_of_turn_id, with_stop_token
from tuneloop.train.settings import TrainRunRecord

LINEAGE_FILE = "lineage.json"


class Lineage(Record):
    """`lineage.json`: which base and which adapter a merged checkpoint came from."""

    KIND = "lineage"
    VERSION = 1

    base: str
    """Path of the base checkpoint."""
    base_sha256: str
    """sha256 over the base checkpoint's files."""
    adapter: str | None
    """Path of the LoRA adapter; None for the zero-adapter control."""
    adapter_sha256: str | None
    """sha256 over the adapter folder; None for the zero-adapter control."""
    end_of_turn_token_id: int | None = None
    """The chat end-of-turn token the generation config was made to stop on."""


def lineage_for(base: Path, adapter: Path | None) -> Lineage:
    return Lineage(
        base=str(Path(base).resolve()),
        base_sha256=sha256_tree(base),
        adapter=str(Path(adapter).resolve()) if adapter else None,
        adapter_sha256=sha256_tree(adapter) if adapter else None,
    )


def same_lineage(a: Lineage, b: Lineage) -> bool:
    return (a.base_sha256, a.adapter_sha256) == (b.base_sha256, b.adapter_sha256)


def check_inputs(base: Path, adapter: Path | None) -> None:
    if not (base / "config.json").is_file():
        raise InputError(f"{base}: not a model folder (no config.json); expected --base MODEL")
    if adapter is None:
        return
    if not (adapter / "adapter_config.json").is_file():
        raise InputError(
            f"{adapter}: not a LoRA adapter (no adapter_config.json); `tuneloop train` produces one"
        )
    settings = adapter / "train_settings.json"
    if settings.is_file():
        trained_on = read_record(settings, TrainRunRecord).base_model_sha256
        if trained_on and trained_on != sha256_tree(base):
            raise InputError(
                f"{settings}: the adapter was trained on a different base "
                f"(base_model_sha256 {trained_on[:12]}… ≠ {base})"
            )


def merge(base: Path, adapter: Path | None, out_dir: Path) -> Path:
    """Write base (+ adapter, merged) to `out_dir`; skip if it already holds this lineage."""
    base, out_dir = Path(base), Path(out_dir)
    adapter = Path(adapter) if adapter is not None else None
    check_inputs(base, adapter)
    lineage = lineage_for(base, adapter)
    if out_dir.exists():
        if (out_dir / LINEAGE_FILE).is_file():
            old = read_record(out_dir / LINEAGE_FILE, Lineage)
            if same_lineage(old, lineage):
                return out_dir
        raise InputError(f"{out_dir}: exists with a different lineage; choose a new --out")
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".tmp", dir=out_dir.parent))
    try:
        eot = write_merged(base, adapter, tmp)
        write_record(tmp / LINEAGE_FILE, lineage.model_copy(update={"end_of_turn_token_id": eot}))
        os.replace(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out_dir


def write_merged(base: Path, adapter: Path | None, out: Path) -> int | None:
    """Load, merge, save weights + tokenizer + generation config; return the end-of-turn id."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from tuneloop.train.common import quiet

    quiet()
    model: Any = AutoModelForCausalLM.from_pretrained(str(base), dtype="auto")
    if adapter is not None:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, str(adapter)).merge_and_unload()
    tokenizer = AutoTokenizer.from_pretrained(str(base))
    eot = end_of_turn_id(tokenizer)
    if eot is not None:
        with_stop_token(model.generation_config, eot)
    model.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    model.generation_config.save_pretrained(str(out))
    return eot
