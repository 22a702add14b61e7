"""Phase `train`: SFT / GRPO / DPO with LoRA on TRL + PEFT, merge, and checkpoint doctor.

    train(method, base, data, out_dir, settings, ...) -> adapter dir
    merge(base, adapter | None, out_dir) -> merged checkpoint dir
    doctor(model_dir, fix_stop_tokens=False) -> DoctorReport (.ok, .checks)

Heavy libraries are imported inside the functions, so importing this package is cheap.
"""

from __future__ import annotations

from tuneloop.train.doctor import Check, DoctorReport, doctor
from tuneloop.train.merge import Lineage, merge
from tuneloop.train.run import train
from tuneloop.train.settings import TrainRunRecord, TrainSettings

__all__ = [
    "Check",
    "DoctorReport",
    "Lineage",
    "TrainRunRecord",
    "TrainSettings",
    "doctor",
    "merge",
    "train",
]
