"""Shared library: put a model behind an OpenAI-compatible endpoint for as long as it is needed.

    with serving("examples/arith/model") as ep:          # embedded FastAPI + transformers
        client = openai.OpenAI(base_url=ep.base_url, api_key=ep.api_key or "none")
        client.chat.completions.create(model=ep.model, messages=[...])

    with serving(model_dir, cfg.serve, log_path=..., arm="pre", decoding=contract) as ep: ...

`serving(model, config)` looks `config.backend` up in the `serve_backends` registry
(`embedded`, `vllm`, `external`, or a plugin) and yields an `Endpoint` once the server answers
a health check and one real completion; on exit the server's whole process group is gone.
A `model` that is a cascade descriptor file (`kind: cascade`, JSON) is served by the
`cascade` backend (`tuneloop.serve.cascade.backend`: its local tiers by `config.backend`,
the cascade server in front). `config` is loop.yaml's typed `serve` section (`ServeConfig`;
None: its defaults, the embedded backend); each backend reads its own part of it (embedded:
the `ServerConfig` keys; vllm: `serve.vllm`; external: `serve.external`). What a backend is
asked and returns, and why pre and post share one `Decoding`, is `tuneloop.endpoint`.

Why here and not in the serve phase: the loop serves the arms it evaluates and the replay phase
serves its embedded teachers, and a phase never imports another phase; so `serving` sits below
both (as `tuneloop.client` does for the OpenAI client), and the backends themselves
(`tuneloop.serve.backends`) are plugins the registry loads by name. Nothing heavy is imported
here.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tuneloop.cascade_spec import is_cascade_file
from tuneloop.config import ServeConfig
from tuneloop.endpoint import Arm, Decoding, Endpoint
from tuneloop.errors import InputError
from tuneloop.registry import serve_backends

__all__ = ["listed_model", "serves_adapters", "serving"]


def serves_adapters(backend: str) -> bool:
    """Whether the registered backend `backend` serves a LoRA adapter on its base (it takes an
    `adapter` argument); False for an unknown name (the registry's error is the caller's)."""
    try:
        start = serve_backends.get(backend)
    except InputError:
        return False
    return "adapter" in inspect.signature(start).parameters


@contextmanager
def serving(
    model: str | Path,
    config: ServeConfig | None = None,
    *,
    log_path: Path | None = None,
    arm: Arm | None = None,
    decoding: Decoding | None = None,
    adapter: Path | None = None,
) -> Iterator[Endpoint]:
    """Serve `model` with `config.backend` for the duration of the `with` block.

    `config` is the `serve` section (None: its defaults); `arm` says which side of a
    comparison this is (the external backend needs it); `decoding` is the contract both arms
    are served under (None: the checkpoint's own metadata). `adapter`, a LoRA adapter folder,
    is served on `model` without merging, by a backend that takes an `adapter` argument
    (`vllm`); the endpoint's model is then the adapter's name (`tuneloop.serve.adapter`).
    """
    config = config if config is not None else ServeConfig()
    # a cascade descriptor file is served by the cascade backend, its tiers by config.backend
    backend = "cascade" if is_cascade_file(model) else config.backend
    start = serve_backends.get(backend)  # a ServeBackend (tuneloop.endpoint)
    extra: dict[str, Path] = {}
    if adapter is not None:
        if not serves_adapters(config.backend):
            raise InputError(
                f"serve.backend {config.backend!r} serves merged models only; a LoRA adapter "
                "on its base is served by serve.backend: vllm"
            )
        extra["adapter"] = adapter
    with start(model, config, log_path=log_path, arm=arm, decoding=decoding, **extra) as endpoint:
        yield endpoint


def listed_model(endpoint: Endpoint, timeout_s: float = 10.0) -> dict[str, Any] | None:
    """The endpoint's own `GET /v1/models` entry for the model it serves (vLLM: `id`, `root`
    — the weights or adapter folder it loaded — and, for an adapter, `parent`), as reported;
    None when the server does not list it. What answered an arm, in the server's words."""
    import httpx

    headers = {"Authorization": f"Bearer {endpoint.api_key}"} if endpoint.api_key else {}
    try:
        r = httpx.get(f"{endpoint.base_url}/models", headers=headers, timeout=timeout_s)
        r.raise_for_status()
        listed = r.json().get("data", [])
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
    keys = ("id", "root", "parent")
    for entry in listed if isinstance(listed, list) else []:
        if isinstance(entry, dict) and entry.get("id") == endpoint.model:
            return {k: entry[k] for k in keys if isinstance(entry.get(k), str)}
    return None
