"""The embedded server's process: bind, load the model, serve the routes until a signal.

Process hygiene (for `lifecycle.py`, which spawns it): the socket is bound before the model
loads, so a busy port fails in milliseconds (`lifecycle.EXIT_BIND`) rather than after loading; a
model that fails to load exits `EXIT_LOAD`; with `--parent-pid` the server dies with its parent
(PR_SET_PDEATHSIG plus a watchdog). Started by `tuneloop serve MODEL_DIR` (`serve/command.py`)
or `python -m tuneloop.serve.app`. torch, the engine and uvicorn are imported only once the port
is bound and the folder looks like a model.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

from tuneloop.records import atomic_write_text
from tuneloop.serve.embedded.routes import ServerSettings, create_app
from tuneloop.serve.guard import BrowserGuard
from tuneloop.serve.lifecycle import EXIT_BIND, bind, set_pdeathsig

EXIT_LOAD = 4
"""The exit status of a model that fails to load."""


def die_with_parent(parent_pid: int) -> None:
    """Exit when `parent_pid` stops being our parent: PR_SET_PDEATHSIG where the kernel has it,
    and a watchdog thread as well (the prctl is lost if the parent died before it was set)."""
    set_pdeathsig()

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, name="tuneloop-parent-watchdog", daemon=True).start()


def _log(msg: str) -> None:
    print(f"tuneloop-serve: {msg}", file=sys.stderr, flush=True)


def preflight(model_dir: Path) -> None:
    """Cheap checks before the slow imports: a readable config.json naming an architecture."""
    try:
        config = json.loads((model_dir / "config.json").read_text())
    except (OSError, ValueError) as err:
        raise ValueError(f"{model_dir / 'config.json'}: {err}") from None
    if not isinstance(config, dict) or "model_type" not in config:
        raise ValueError(f"{model_dir / 'config.json'}: expected an object with 'model_type'")


def run_server(model_dir: str, settings: ServerSettings) -> int:
    """Bind, load, serve until SIGTERM/SIGINT. Returns the process exit status."""
    if settings.parent_pid is not None:
        die_with_parent(settings.parent_pid)
    try:
        sock = bind(settings.config.host, settings.config.port)
    except OSError as err:
        where = f"{settings.config.host}:{settings.config.port}"
        _log(f"error: cannot bind {where}: {err.strerror or err}")
        return EXIT_BIND
    port = sock.getsockname()[1]
    if settings.port_file:
        atomic_write_text(Path(settings.port_file), f"{port}\n")
    _log(f"loading {model_dir} (port {port})")
    try:
        preflight(Path(model_dir))
        # Heavy imports only now, so that a busy port or a broken folder fails in milliseconds.
        import torch

        from tuneloop.serve.embedded.engine import load_engine

        threads = settings.config.threads or max(1, min(4, (os.cpu_count() or 1) // 2))
        torch.set_num_threads(threads)
        engine = load_engine(
            model_dir,
            max_batch_size=settings.config.max_batch_size,
            batch_wait_ms=settings.config.batch_wait_ms,
            stop_token_ids=settings.stop_token_ids,
            max_model_len=settings.config.max_model_len,
        ).start()
    except Exception as err:
        _log(f"error: model {model_dir} failed to load: {type(err).__name__}: {err}")
        return EXIT_LOAD
    import uvicorn

    name = settings.name_for(model_dir)
    app = create_app(engine, name, settings)
    if settings.traffic_log:
        from tuneloop.serve.traffic import TrafficLog, install_traffic  # only when asked for

        install_traffic(app, TrafficLog(Path(settings.traffic_log)), api_key=settings.api_key)
    _log(f"serving {name!r} on http://{settings.config.host}:{port}/v1")
    guarded = BrowserGuard(app, settings.config.host)  # no web page of another site
    config = uvicorn.Config(guarded, log_level="warning", timeout_graceful_shutdown=5)
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        engine.close()
    return 0
