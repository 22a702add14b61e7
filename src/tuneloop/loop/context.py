"""What a phase adapter is handed (`PhaseContext`), and the names every phase agrees on.

The runner builds one `PhaseContext` per phase it runs; the adapters (`adapters.py`), the
integrity phases (`integrity.py`) and `track` read it. It sits below all of them, so that
none has to import another to know its argument's type.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tuneloop.config import LoopConfig
from tuneloop.loop.layout import MODEL, RunLayout

MERGED_MODEL = f"merge/{MODEL}"
"""The merged model's output key in the merge phase's record (a path under the workdir)."""
MERGED = f"merge:{MERGED_MODEL}"
"""The input key of the merged model for a downstream phase (upstream phase `merge`)."""


@dataclass
class PhaseContext:
    """What a phase adapter gets: the config, its folder, upstream folders, the run id."""

    cfg: LoopConfig
    workdir: Path
    folder: Path
    run_id: str
    upstream: dict[str, Path]
    log_path: Path
    inputs: dict[str, str] = field(default_factory=dict)
    """Input name → sha256, as hashed into the phase's fingerprint."""
    notes: dict[str, Any] = field(default_factory=dict)

    @property
    def layout(self) -> RunLayout:
        """The run's folders and artifacts (`layout.RunLayout` of the workdir)."""
        return RunLayout(self.workdir)


def model_identity(model_dir: Path, digest: str) -> str:
    """How a served model is named in logs and verdicts: its folder and a short sha256."""
    return f"{model_dir.name}@sha256:{digest[:16]}"
