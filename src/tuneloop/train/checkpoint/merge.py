"""Merge a LoRA adapter into its base: a standalone safetensors checkpoint with lineage.

Run: `tuneloop merge --base MODEL --adapter ADAPTER --out DIR` (or `--zero-adapter`, the
control arm: the base goes through exactly the same load/save path with no adapter, so a
difference between base and zero-adapter evals is a merge/serialisation artifact, not
training). The output holds weights, tokenizer, and a generation config that stops on the
chat template's end-of-turn token, plus `lineage.json` (base and adapter hashes). If the output
already exists with the same lineage, nothing is done; the new checkpoint is written to a temp
folder and renamed, so a crash never leaves a half-written model. After full fine-tuning
(`train.adapter: none`) the "adapter" folder holds a whole model: it is taken as the merged
model (in the base's dtype, with the base's tokenizer), through the same save path and checks.

Before the rename, the merged weights are compared with the base's, tensor by tensor from the
safetensors files: the largest absolute difference goes into `lineage.json`, and a merge whose
difference is not above `merge.min_change` fails (exit 3). That catches an adapter that never
moved (zero steps, a learning rate too small) and one lost to rounding when merged into
bfloat16 weights; M1 = M0 would make the gate compare a model with itself. The zero-adapter
control is measured (it should be 0: the merge path is lossless) but not held to the bar.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from tuneloop.errors import InputError, PhaseFailed
from tuneloop.records import Record, read_record, sha256_tree, write_record
from tuneloop.train.checkpoint.chat import end_of_turn_id, with_stop_token
from tuneloop.train.checkpoint.doctor import weight_files
from tuneloop.train.common import quiet
from tuneloop.train.settings import TrainRunRecord

LINEAGE_FILE = "lineage.json"


class Lineage(Record):
    """`lineage.json`: which base and which adapter a merged checkpoint came from."""

    KIND = "lineage"
    VERSION = 2
    """v2: `max_abs_diff` and `max_diff_tensor` (the merged weights against the base's)."""

    base: str
    """Path of the base checkpoint."""
    base_sha256: str
    """sha256 over the base checkpoint's files."""
    adapter: str | None
    """Path of the LoRA adapter (or the fully fine-tuned model); None for the zero-adapter
    control."""
    adapter_sha256: str | None
    """sha256 over the adapter folder; None for the zero-adapter control."""
    end_of_turn_token_id: int | None = None
    """The chat end-of-turn token the generation config was made to stop on."""
    max_abs_diff: float | None = None
    """Largest absolute difference between a merged weight and the base's; None when not
    measured (a base without safetensors weights)."""
    max_diff_tensor: str | None = None
    """The tensor where `max_abs_diff` was found."""
    full_model: bool = False
    """True when `adapter` is a fully fine-tuned model (`train.adapter: none`), taken as the
    merged weights instead of merged into the base."""


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
    if not (adapter / "adapter_config.json").is_file() and not is_full_model(adapter):
        raise InputError(
            f"{adapter}: not a LoRA adapter (no adapter_config.json) nor a fully fine-tuned "
            "model (no config.json); `tuneloop train` produces one"
        )
    settings = adapter / "train_settings.json"
    if settings.is_file():
        trained_on = read_record(settings, TrainRunRecord).base_model_sha256
        if trained_on and trained_on != sha256_tree(base):
            raise InputError(
                f"{settings}: the adapter was trained on a different base "
                f"(base_model_sha256 {trained_on[:12]}… ≠ {base})"
            )


def is_full_model(folder: Path) -> bool:
    """`folder` holds a whole trained model (`train.adapter: none`), not a LoRA adapter."""
    return (folder / "config.json").is_file() and not (folder / "adapter_config.json").is_file()


def merge(base: Path, adapter: Path | None, out_dir: Path, *, min_change: float = 0.0) -> Path:
    """Write base (+ adapter, merged) to `out_dir`; skip if it already holds this lineage.

    PhaseFailed when an adapter's merged weights differ from the base by `min_change` or less.
    """
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
        diff, where = weight_change(base, tmp)
        if adapter is not None:
            check_change(adapter, diff, where, min_change)
        update = {
            "end_of_turn_token_id": eot,
            "max_abs_diff": diff,
            "max_diff_tensor": where,
            "full_model": adapter is not None and is_full_model(adapter),
        }
        write_record(tmp / LINEAGE_FILE, lineage.model_copy(update=update))
        os.replace(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out_dir


def write_merged(base: Path, adapter: Path | None, out: Path) -> int | None:
    """Load, merge, save weights + tokenizer + generation config; return the end-of-turn id."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    quiet()
    if adapter is not None and is_full_model(adapter):
        # full fine-tuning: the trained model is the merged one (saved in the base's dtype)
        model: Any = AutoModelForCausalLM.from_pretrained(str(adapter), dtype=base_dtype(base))
    else:
        model = AutoModelForCausalLM.from_pretrained(str(base), dtype="auto")
    if adapter is not None and not is_full_model(adapter):
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


def base_dtype(base: Path) -> Any:
    """The base's weight dtype (config.json's `dtype`/`torch_dtype`), or "auto"."""
    import json

    cfg = json.loads((base / "config.json").read_text(encoding="utf-8"))
    return cfg.get("dtype") or cfg.get("torch_dtype") or "auto"


def weight_change(base: Path, merged: Path) -> tuple[float | None, str | None]:
    """(largest |merged − base| over all tensors, where), streamed one tensor at a time.

    (None, None) when either side has no safetensors weights (not measured)."""
    import sys
    from contextlib import ExitStack

    from safetensors import safe_open

    base_files, problems = weight_files(base)
    merged_files, merged_problems = weight_files(merged)
    if problems or merged_problems or not base_files:
        why = "; ".join([*problems, *merged_problems]) or "no safetensors weights"
        print(f"merge: weight change not measured ({why})", file=sys.stderr)
        return None, None
    best, where = 0.0, None
    with ExitStack() as stack:
        handles = {
            f: stack.enter_context(safe_open(str(base / f), framework="pt"))
            for f in set(base_files.values())
        }
        for fname in sorted(set(merged_files.values())):
            fm = stack.enter_context(safe_open(str(merged / fname), framework="pt"))
            for name in fm.keys():  # noqa: SIM118 (a safetensors handle, not a dict)
                if name not in base_files:
                    continue
                new = fm.get_tensor(name).float()
                old = handles[base_files[name]].get_tensor(name).float()
                if new.shape != old.shape:
                    return float("inf"), name
                diff = float((new - old).abs().max()) if new.numel() else 0.0
                if where is None or diff > best:
                    best, where = diff, name
    return best, where


def check_change(adapter: Path, diff: float | None, where: str | None, min_change: float) -> None:
    """PhaseFailed when the merged weights are the base's within `min_change`."""
    if diff is None or diff > min_change:
        return
    raise PhaseFailed(
        f"merge: the merged weights equal the base's within merge.min_change = {min_change:g} "
        f"(largest |difference| {diff:.3g}, at {where}): the adapter {adapter} changes nothing "
        "— trained no step, a learning rate too small, or its update lost to rounding in a "
        "low-precision base"
    )
