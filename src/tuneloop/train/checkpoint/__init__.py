"""The trained model as a checkpoint to serve: merge it, check it, read how it decodes.

    merge(base, adapter | None, out_dir) -> merged checkpoint dir (+ lineage.json)
    doctor(model_dir, fix_stop_tokens=False) -> DoctorReport (.ok, .checks)
    doctor_arms(base, merged) -> ArmsReport: both under the base's decoding contract

`merge.py` (`tuneloop merge`, the `Lineage` record), `doctor.py` (`tuneloop doctor`, the
loop's doctor phase), `decoding.py` (a checkpoint's decoding metadata and the contract both
arms are served under), `chat.py` (the chat template's end-of-turn token). Heavy libraries
are imported inside the functions, so importing this package is cheap.
"""

from __future__ import annotations

from tuneloop.train.checkpoint.decoding import (
    DecodingComparison,
    DecodingMetadata,
    compare_decoding,
    read_decoding,
)
from tuneloop.train.checkpoint.doctor import ArmsReport, Check, DoctorReport, doctor, doctor_arms
from tuneloop.train.checkpoint.merge import LINEAGE_FILE, Lineage, merge

__all__ = [
    "LINEAGE_FILE",
    "ArmsReport",
    "Check",
    "DecodingComparison",
    "DecodingMetadata",
    "DoctorReport",
    "Lineage",
    "compare_decoding",
    "doctor",
    "doctor_arms",
    "merge",
    "read_decoding",
]
