"""Finding the real vLLM's processes, to check that none is left behind.

A test marks the processes it starts: `MARK_VAR` set in its environment (`marked()`) is
inherited by every vLLM process it leads to, engine cores included, which rename themselves
(`VLLM::EngineCore`) and keep no command line to recognise. Only marked processes are counted,
so a second test run on the same machine (another checkout's CI) is never mistaken for a leak.
"""

from __future__ import annotations

import os
import uuid

import psutil

API_SERVER = "vllm.entrypoints.openai.api_server"
MARK_VAR = "TUNELOOP_TEST_MARK"


def marked() -> dict[str, str]:
    """This process's environment with a fresh mark (for a subprocess, or `os.environ`)."""
    return {**os.environ, MARK_VAR: uuid.uuid4().hex}


def vllm_processes(mark: str) -> list[psutil.Process]:
    """Every live process started under `mark` that is vLLM's (an API server, or an engine
    core or worker it spawned)."""
    found = []
    for proc in psutil.process_iter(["cmdline", "name"]):
        try:
            if proc.environ().get(MARK_VAR) != mark or proc.status() == psutil.STATUS_ZOMBIE:
                continue
        except psutil.Error:
            continue
        cmdline = " ".join(proc.info["cmdline"] or [])
        if API_SERVER in cmdline or "VLLM" in (proc.info["name"] or "") or "VLLM" in cmdline:
            found.append(proc)
    return found
