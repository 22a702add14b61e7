"""Direct preference optimisation with LoRA on TRL's `DPOTrainer`.

Run: `tuneloop train --method dpo --base MODEL --data prefs.jsonl --out DIR` with rows
`{"prompt", "chosen", "rejected"}` (strings or message lists). Rafailov et al. 2023. With a
PEFT model TRL uses the base weights (adapter disabled) as the reference model, so no second
copy is loaded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tuneloop.train.common import (
    common_args,
    load_model,
    load_tokenizer,
    lora_config,
    per_device,
    without_printer,
)
from tuneloop.train.data import Row, dpo_rows
from tuneloop.train.health import fit
from tuneloop.train.metrics import MetricsCallback
from tuneloop.train.settings import TrainSettings


def train_dpo(base: Path, rows: list[Row], out_dir: Path, s: TrainSettings, **kw: Any) -> Any:
    """Train a LoRA adapter by DPO; return the trainer."""
    from datasets import Dataset
    from trl import DPOConfig, DPOTrainer

    args = DPOConfig(
        **common_args(s, out_dir, s.steps, "dpo"),
        per_device_train_batch_size=per_device(s.batch_size, kw.get("nproc", 1), "batch_size"),
        beta=s.dpo_beta,
        max_length=s.max_length,
    )
    metrics = MetricsCallback(
        Path(out_dir) / "metrics.jsonl", phase="dpo", progress=kw.get("progress", True)
    )
    trainer = without_printer(
        DPOTrainer(
            model=load_model(base, s),
            args=args,
            train_dataset=Dataset.from_list(dpo_rows(rows)),
            processing_class=load_tokenizer(base),
            peft_config=lora_config(s),
            callbacks=[metrics],
        )
    )
    return fit(trainer, s, "dpo")
