"""The command line, API key and environment of one champion server of the managed service.

    command = server_command(settings, host, model_dir, port_file, backend, adapter)
    proc = spawn_detached(command.argv, log, {**os.environ, **command.env})

Used by `managed.py` (`ManagedService._start_server`).

The command is the loop's own (`embedded_argv`, or `vllm_argv` with the vLLM environment).
vLLM cannot report a port it picked, so it gets a free one, written to `port_file` here; its
key goes in `VLLM_API_KEY`, never argv.

A CPU build of vLLM pins its worker to cores it picks for itself, the same cores for every
instance: during a switch the candidate's worker is pinned beside the loaded champion's
(measured on 2 cores under load: ready after more than 4 minutes, against 2 min 17 s
unpinned). The service's vLLM servers are therefore left to the OS scheduler
(`VLLM_CPU_OMP_THREADS_BIND=nobind`) unless that variable is set.

An adapter champion (`serve.challenger: adapter`) is served by vLLM as the LoRA module named
`served_name` on its base (served as `<served_name>-base`), in a server that takes the next
adapter champions at runtime (`hot_load.py`).
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from tuneloop.flywheel.service.hot_load import MAX_LORAS, RUNTIME_LORA_ENV
from tuneloop.vllm_env import find_vllm

if TYPE_CHECKING:
    from tuneloop.flywheel.service.settings import ServiceSettings
    from tuneloop.serve.adapter import ServedAdapter


class ServerCommand(NamedTuple):
    argv: list[str]
    api_key: str | None
    """The key the server will require (`serve.api_key_env`), if any."""
    env: dict[str, str]
    """What its environment needs besides ours."""
    lora: ServedAdapter | None
    """The adapter it serves under `served_name`, if any."""


def server_command(
    settings: ServiceSettings,
    host: str,
    model_dir: Path,
    port_file: Path,
    backend: str,
    adapter: Path | None = None,
) -> ServerCommand:
    """The command for `model_dir` (with `adapter` on it) on `backend`; see the module
    docstring."""
    from tuneloop.envkeys import read_api_key
    from tuneloop.serve.adapter import served_adapter
    from tuneloop.serve.backends import embedded_argv, vllm_argv
    from tuneloop.serve.lifecycle import free_port

    server, name = settings.server, settings.served_name
    api_key = read_api_key(server.api_key_env, "serve.api_key_env")
    if backend != "vllm":
        argv = embedded_argv(model_dir, host, 0, server)
        argv += ["--served-model-name", name, "--port-file", str(port_file)]
        return ServerCommand(argv, api_key, {}, None)
    vllm = find_vllm(server.vllm.env)
    port = free_port(host)
    lora, extra = None, {"VLLM_API_KEY": api_key} if api_key else {}
    if adapter is not None:
        lora = dataclasses.replace(served_adapter(adapter.resolve()), name=name)
        name = f"{name}-base"  # the base's own name; clients ask for the adapter
        extra.update(RUNTIME_LORA_ENV)
    argv = vllm_argv(model_dir, host, port, server, vllm, lora, MAX_LORAS)
    port_file.write_text(f"{port}\n")
    if vllm.cpu and "VLLM_CPU_OMP_THREADS_BIND" not in os.environ:
        extra["VLLM_CPU_OMP_THREADS_BIND"] = "nobind"
    return ServerCommand([*argv, "--served-model-name", name], api_key, extra, lora)
