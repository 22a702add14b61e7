"""A new adapter champion loaded into the vLLM server already serving its base.

    if hot_loadable(current, model_dir, adapter):      # same base, a runtime-LoRA vLLM server
        names = loaded_adapters(root, key)             # {name: folder}, as /v1/models lists them
        load_adapter(root, "champion-v2", adapter, key)    # POST /v1/load_lora_adapter
        unload_adapter(root, "champion-v1", key)           # POST /v1/unload_lora_adapter

A managed vLLM server that serves an adapter champion is started with
`VLLM_ALLOW_RUNTIME_LORA_UPDATING=True` (vLLM adds the two routes only then) and room for two
adapters in a batch (`--max-loras 2`). A promotion whose champion is another adapter on the
same base then loads it under a new name, `<served_name>-v<version>`, instead of starting a
second vLLM (about a second against two minutes here): the steps, the proxy's renaming and
the drain are `ManagedService._hot_load`'s (`managed.py`).

Why a new name per version, never `load_inplace`: `load_inplace` swaps the weights under
requests already running, so one answer could come from two champions, and a name reused for
other weights is what vLLM's prefix cache is keyed by (vLLM 0.32 keys it by name and path,
older releases by name only). Under a new name the old adapter keeps answering what it
started until the proxy's drain says it is idle, and only then is it unloaded.

A rank above what the server was started to hold (`--max-lora-rank`) cannot be loaded into
it; such a champion gets a new server, as a merged one does.
"""

from __future__ import annotations

from pathlib import Path

import httpx

from tuneloop.errors import PhaseFailed
from tuneloop.flywheel.service.processes import ProcessRecord

RUNTIME_LORA_ENV = {"VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True"}
"""What a vLLM server needs in its environment to take adapters at runtime."""
MAX_LORAS = 2
"""Adapters in one batch: the new champion beside the old one while it drains."""
TIMEOUT_S = 120.0
"""Longest wait for a load (vLLM reads the adapter's weights from disk)."""


def version_name(served_name: str, version: int) -> str:
    """The name champion `version`'s adapter is loaded under: new for every version."""
    return f"{served_name}-v{version}"


def hot_loadable(current: ProcessRecord | None, model_dir: Path, rank: int) -> str | None:
    """Why `current` cannot take an adapter of `rank` on `model_dir` at runtime (None: it can)."""
    if current is None:
        return "no server is serving"
    if current.lora_name is None or current.max_lora_rank is None:
        return "the server was not started to take adapters at runtime"
    if current.model_dir != str(model_dir.resolve()):
        return f"the server serves another base ({current.model_dir})"
    if rank > current.max_lora_rank:
        return f"rank {rank} is above the server's --max-lora-rank {current.max_lora_rank}"
    return None


def loaded_adapters(root: str, api_key: str | None) -> dict[str, str]:
    """The adapters `root`'s vLLM serves: name → the folder it was loaded from (`root` in
    `/v1/models`, the entries that have a `parent`)."""
    answer = _call("GET", f"{root}/v1/models", None, api_key)
    try:
        listed = answer.json()["data"]
        return {m["id"]: m["root"] for m in listed if m.get("parent") is not None}
    except (ValueError, KeyError, TypeError) as err:
        raise PhaseFailed(f"{root}/v1/models: not a model list ({err})") from None


def load_adapter(root: str, name: str, folder: Path, api_key: str | None) -> None:
    """Load the adapter in `folder` as `name`; PhaseFailed with vLLM's reason otherwise."""
    body = {"lora_name": name, "lora_path": str(folder)}
    _call("POST", f"{root}/v1/load_lora_adapter", body, api_key)


def unload_adapter(root: str, name: str, api_key: str | None) -> None:
    """Unload the adapter `name`; PhaseFailed with vLLM's reason otherwise."""
    _call("POST", f"{root}/v1/unload_lora_adapter", {"lora_name": name}, api_key)


def _call(
    method: str, url: str, body: dict[str, str] | None, api_key: str | None
) -> httpx.Response:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        answer = httpx.request(method, url, json=body, headers=headers, timeout=TIMEOUT_S)
    except httpx.HTTPError as err:
        raise PhaseFailed(f"{url} did not answer ({type(err).__name__}: {err})") from None
    if answer.status_code != 200:
        raise PhaseFailed(f"{url} answered HTTP {answer.status_code}: {answer.text[:300]}")
    return answer
