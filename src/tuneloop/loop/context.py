"""What a phase adapter is handed (`PhaseContext`), and the names every phase agrees on.

The runner builds one `PhaseContext` per phase it runs; the adapters (`adapters.py`), the
integrity phases (`integrity.py`) and `track` read it. It sits below all of them, so that
none has to import another to know its argument's type.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tuneloop.config import LoopConfig
from tuneloop.loop.layout import ADAPTER, CASCADE_FILE, MODEL, RunLayout

MERGED_MODEL = f"merge/{MODEL}"
"""The merged model's output key in the merge phase's record (a path under the workdir)."""
MERGED = f"merge:{MERGED_MODEL}"
"""The input key of the merged model for a downstream phase (upstream phase `merge`)."""
TRAINED_ADAPTER = f"train/{ADAPTER}"
"""The trained adapter's output key in the train phase's record."""
TRAINED = f"train:{TRAINED_ADAPTER}"
"""The input key of the trained adapter for a downstream phase (upstream phase `train`)."""
COMPOSED_CASCADE = f"compose/{CASCADE_FILE}"
"""The composed cascade's output key in the compose phase's record."""
COMPOSED = f"compose:{COMPOSED_CASCADE}"
"""The input key of the composed cascade for a downstream phase (upstream phase `compose`)."""


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
    nested: Callable[[LoopConfig], Any] | None = None
    """Run a round of its own to the end and return its `RunState` (a portfolio's
    challenger: train → merge → doctor → its evaluation, `loop.portfolio`); the runner's."""

    @property
    def layout(self) -> RunLayout:
        """The run's folders and artifacts (`layout.RunLayout` of the workdir)."""
        return RunLayout(self.workdir)


def model_identity(model_dir: Path, digest: str) -> str:
    """How a served model is named in logs and verdicts: its folder and a short sha256."""
    return f"{model_dir.name}@sha256:{digest[:16]}"


def challenger_descriptor(
    cfg: LoopConfig,
    merged: tuple[Path, str],
    adapter: tuple[Path, str] | None,
    *,
    base_sha256: str,
    run_id: str,
    recipe: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A round's challenger as a champion descriptor (`tuneloop.gate.champion`): the merged
    model `(folder, sha256)`; or, with `serve.challenger: adapter`, the `adapter` served on
    the base — `path`/`sha256` name the base, `adapter` the folder served on it, and `merged`
    the merged model (what a next round trains from, `loop.rounds.lineage`). `recipe` is how
    it was trained (`loop.portfolio.recipe`), recorded for a later `stage: refine`."""
    made = {"recipe": recipe} if recipe is not None else {}
    if adapter is None:
        path, digest = merged
        return {
            "kind": "single",
            "path": str(path),
            "sha256": digest,
            "model": model_identity(path, digest),
            "run_id": run_id,
        } | made
    (adapter_dir, adapter_sha), (merged_dir, merged_sha) = adapter, merged
    return {
        "kind": "single",
        "path": str(cfg.base),
        "sha256": base_sha256,
        "adapter": {"path": str(adapter_dir), "sha256": adapter_sha},
        "merged": {"path": str(merged_dir), "sha256": merged_sha},
        "model": model_identity(adapter_dir, adapter_sha),
        "run_id": run_id,
    } | made


def decoding_contract(cfg: LoopConfig) -> Any:
    """The one `endpoint.Decoding` both arms are served under, from the base checkpoint; None
    for an external endpoint, whose owner decides how it decodes."""
    if cfg.serve.backend == "external":
        return None
    from tuneloop.endpoint import Decoding
    from tuneloop.train.checkpoint import read_decoding

    meta = read_decoding(cfg.base)
    return Decoding(meta.stop_token_ids, meta.generation_config)
