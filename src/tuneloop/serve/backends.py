"""The built-in serving backends, registered in `tuneloop.registry.serve_backends`.

A backend is a context-manager factory `(model, *, host, port, startup_timeout_s, log_path,
options, arm, decoding) -> ContextManager[Endpoint]`.

- `embedded`: `python -m tuneloop.serve.app MODEL_DIR` in its own process group (CPU default);
  a `Decoding` contract reaches it as `--stop-token-ids`.
- `vllm`: `vllm serve MODEL …` built by `vllm_argv` from the `serve.vllm` settings (tool
  calling with `serve.vllm.tool_call_parser`); the API key, if any, reaches vLLM through
  `VLLM_API_KEY` in its environment, never through argv. A
  `Decoding` contract is written to a generation_config.json that both arms load through
  `--generation-config DIR` (vLLM's stop ids and sampling defaults come from it).
- `external`: any OpenAI-compatible base URL; nothing is started, readiness is `/models` plus
  one real completion. Each arm names its own model (`serve.external.pre` / `.post`); the
  `model` argument (a local checkpoint) is not what it serves and is never its identity. The
  API key is read from the env var the config names and is never written to config, logs or
  artifacts.

`options` may hold the flattened settings of every backend (the loop passes the whole `serve`
section); keys that belong to another backend are ignored, unknown keys are an `InputError`.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tuneloop.config import ExternalConfig, ServerConfig, VllmConfig
from tuneloop.config.options import flag
from tuneloop.envkeys import read_api_key
from tuneloop.errors import InputError, PhaseFailed
from tuneloop.registry import did_you_mean, serve_backends
from tuneloop.serve import Arm, Decoding, Endpoint
from tuneloop.serve.lifecycle import Launch, free_port, launched, log_file, probe

EMBEDDED_KEYS = set(ServerConfig.model_fields) - {"host", "port"}
VLLM_KEYS = set(VllmConfig.model_fields) | {"api_key_env"}
EXTERNAL_KEYS = set(ExternalConfig.model_fields)
# ServeConfig's own fields that the loop may pass along; serving() takes them as arguments.
COMMON_KEYS = {"backend", "host", "port", "startup_timeout_s"}
ALL_KEYS = EMBEDDED_KEYS | VLLM_KEYS | EXTERNAL_KEYS | COMMON_KEYS | {"vllm", "external"}


def select_options(options: dict[str, Any], backend: str, allowed: set[str]) -> dict[str, Any]:
    """The options for `backend`: a nested `vllm:`/`external:` section is flattened into the
    top level; other backends' keys are dropped; unknown keys raise `InputError`."""
    if "model" in options or "model" in (options.get("external") or {}):
        raise InputError(
            "serve.external.model names one model for both arms and is no longer accepted; "
            "give serve.external.pre.model and serve.external.post.model"
        )
    unknown = sorted(k for k in options if k not in ALL_KEYS)
    if unknown:
        hints = "".join(did_you_mean(k, ALL_KEYS) for k in unknown)
        raise InputError(f"serve: unknown option(s) {', '.join(unknown)}{hints}")
    flat = {k: v for k, v in options.items() if k in allowed and k not in ("vllm", "external")}
    nested = options.get(backend)
    if isinstance(nested, dict):
        flat.update(nested)  # the backend's own section wins over the flat keys
    return {k: v for k, v in flat.items() if k in allowed}


def _model_dir(model: str | Path) -> Path:
    path = Path(model)
    if not (path / "config.json").is_file():
        raise InputError(
            f"{model}: not a model folder (expected config.json in it); "
            "`tuneloop merge` writes one, or use serve.backend: external"
        )
    return path


def embedded_argv(
    model_dir: Path, host: str, port: int, opts: dict[str, Any], decoding: Decoding | None = None
) -> list[str]:
    """The `python -m tuneloop.serve.app` command line (no secrets: only the key's env var)."""
    argv = [sys.executable, "-m", "tuneloop.serve.app", str(model_dir), "--host", host]
    argv += ["--port", str(port)]
    for key in sorted(EMBEDDED_KEYS):  # the spawned server's options are ServerConfig's too
        if opts.get(key) is not None:
            argv += [flag((key,)), str(opts[key])]
    if decoding is not None:
        argv += ["--stop-token-ids", ",".join(str(i) for i in decoding.stop_token_ids)]
    return argv


@serve_backends.register("embedded")
@contextmanager
def embedded(
    model: str | Path,
    *,
    host: str,
    port: int,
    startup_timeout_s: float,
    log_path: Path | None,
    options: dict[str, Any],
    arm: Arm | None = None,
    decoding: Decoding | None = None,
) -> Iterator[Endpoint]:
    """FastAPI + transformers with request batching, in a child process."""
    opts = select_options(options, "embedded", EMBEDDED_KEYS)
    model_dir = _model_dir(model)
    api_key = read_api_key(opts.get("api_key_env"), "serve.api_key_env")
    with log_file(log_path) as log, tempfile.TemporaryDirectory(prefix="tuneloop-port-") as tmp:
        port_file = Path(tmp) / "port"
        argv = embedded_argv(model_dir, host, port, opts, decoding)
        argv += ["--port-file", str(port_file), "--parent-pid", str(os.getpid())]
        launch = Launch(
            argv=argv,
            served_model=str(model),
            host=host,
            port=port or None,
            port_file=port_file,
            startup_timeout_s=startup_timeout_s,
            log_path=log,
            api_key=api_key,
            # A local folder needs no hub; offline mode turns a typo into an error, not a hang.
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
        )
        with launched(launch) as (base_url, pid):
            yield Endpoint(base_url, str(model), api_key, pid, decoding_applied=bool(decoding))


def vllm_argv(model: str | Path, host: str, port: int, opts: dict[str, Any]) -> list[str]:
    """The `vllm serve` command line for the `serve.vllm` settings."""
    argv = [str(opts.get("executable") or "vllm"), "serve", str(model)]
    argv += ["--host", host, "--port", str(port)]
    argv += ["--dtype", str(opts.get("dtype") or "auto")]
    if opts.get("max_model_len") is not None:
        argv += ["--max-model-len", str(opts["max_model_len"])]
    argv += ["--gpu-memory-utilization", str(opts.get("gpu_memory_utilization", 0.9))]
    argv += ["--tensor-parallel-size", str(opts.get("tensor_parallel_size", 1))]
    argv += ["--data-parallel-size", str(opts.get("data_parallel_size", 1))]
    if opts.get("tool_call_parser"):
        argv += ["--enable-auto-tool-choice", "--tool-call-parser", str(opts["tool_call_parser"])]
    return argv + [str(a) for a in opts.get("extra_args") or []]


@serve_backends.register("vllm")
@contextmanager
def vllm(
    model: str | Path,
    *,
    host: str,
    port: int,
    startup_timeout_s: float,
    log_path: Path | None,
    options: dict[str, Any],
    arm: Arm | None = None,
    decoding: Decoding | None = None,
) -> Iterator[Endpoint]:
    """`vllm serve` in its own process group (vLLM is not imported here)."""
    import signal

    opts = select_options(options, "vllm", VLLM_KEYS)
    executable = str(opts.get("executable") or "vllm")
    if shutil.which(executable) is None:
        raise InputError(
            f"serve.vllm.executable: {executable!r} not found on PATH; "
            "install it with `pip install 'tuneloop[vllm]'`"
        )
    api_key = read_api_key(opts.get("api_key_env"), "serve.api_key_env")
    env = dict(os.environ)
    if api_key:
        env["VLLM_API_KEY"] = api_key
    port = port or free_port(host)  # vLLM cannot report a port it picked itself
    with log_file(log_path) as log, tempfile.TemporaryDirectory(prefix="tuneloop-gen-") as tmp:
        argv = vllm_argv(model, host, port, opts)
        if decoding is not None:
            # vLLM reads its stop ids and sampling defaults from this folder's
            # generation_config.json instead of the checkpoint's: the same file for both arms.
            gen = json.dumps(decoding.served_generation_config(), indent=2, sort_keys=True)
            (Path(tmp) / "generation_config.json").write_text(gen + "\n")
            argv += ["--generation-config", tmp]
        launch = Launch(
            argv=argv,
            served_model=str(model),
            host=host,
            port=port,
            startup_timeout_s=startup_timeout_s,
            log_path=log,
            env=env,
            api_key=api_key,
            pdeathsig=signal.SIGTERM,
        )
        with launched(launch) as (base_url, pid):
            yield Endpoint(base_url, str(model), api_key, pid, decoding_applied=bool(decoding))


def _wait_external(base_url: str, model: str, api_key: str | None, timeout_s: float) -> None:
    import httpx

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


def external_arm(opts: dict[str, Any], arm: Arm | None) -> tuple[str, str]:
    """(base_url, model) of `arm` from the `serve.external` options; refuses the same model
    for both arms unless `aa_control` is set."""
    if arm not in ("pre", "post"):
        raise InputError(
            "the external backend serves one arm of a comparison: call serving(..., arm='pre') "
            "or arm='post' (configured as serve.external.pre / serve.external.post)"
        )
    ends = {}
    for side in ("pre", "post"):
        section = opts.get(side) or {}
        url = str(section.get("base_url") or opts.get("base_url") or "").rstrip("/")
        ends[side] = (url, str(section.get("model") or ""))
    base_url, name = ends[arm]
    if not base_url.startswith(("http://", "https://")):
        raise InputError(
            f"serve.external.{arm}.base_url (or serve.external.base_url): expected an http(s) "
            "URL ending in /v1"
        )
    if not name:
        raise InputError(f"serve.external.{arm}.model: required (the model the {arm} arm asks for)")
    if ends["pre"] == ends["post"] and not opts.get("aa_control"):
        raise InputError(
            f"serve.external.pre and serve.external.post are the same model ({name!r} at "
            f"{base_url}); name the trained model in serve.external.post.model, or set "
            "serve.external.aa_control: true for a deliberate A/A control"
        )
    return base_url, name


@serve_backends.register("external")
@contextmanager
def external(
    model: str | Path,
    *,
    host: str,
    port: int,
    startup_timeout_s: float,
    log_path: Path | None,
    options: dict[str, Any],
    arm: Arm | None = None,
    decoding: Decoding | None = None,
) -> Iterator[Endpoint]:
    """An endpoint someone else runs, one model per arm; `model` (a local checkpoint) is only
    named in the log, never requested nor used as the identity."""
    opts = select_options(options, "external", EXTERNAL_KEYS)
    base_url, name = external_arm(opts, arm)
    env_var = opts.get("api_key_env")
    api_key = read_api_key(env_var, "serve.external.api_key_env")
    if log_path is not None:
        with open(log_path, "a") as log:
            key_note = f"key from ${env_var}" if env_var else "no key"
            aa = ", A/A control" if opts.get("aa_control") else ""
            log.write(
                f"external endpoint {base_url} model {name!r} for arm {arm}{aa} ({key_note})"
                f"{''.join(f', replica {u}' for u in external_replicas(opts, arm))}\n"
            )
            if decoding is not None:
                log.write(
                    "decoding contract not applied: an external endpoint decodes as its owner "
                    "configured it\n"
                )
    replicas = external_replicas(opts, arm)
    for url in (base_url, *replicas):
        _wait_external(url, name, api_key, startup_timeout_s)
    yield Endpoint(base_url, name, api_key, None, identity=name, replicas=replicas)


def external_replicas(opts: dict[str, Any], arm: Arm | None) -> tuple[str, ...]:
    """An external arm's further replicas (`serve.external.<arm>.replicas`), checked."""
    urls = tuple(str(u).rstrip("/") for u in (opts.get(str(arm)) or {}).get("replicas") or ())
    for i, url in enumerate(urls):
        if not url.startswith(("http://", "https://")):
            raise InputError(
                f"serve.external.{arm}.replicas.{i}: expected an http(s) URL ending in /v1 "
                f"(got {url!r})"
            )
    return urls
