"""Five third-party OpenAI clients nobody here wrote, on their defaults, against the installed
`tuneloop serve` (the demo model) and against `tuneloop proxy` in front of it: Inspect AI (chat
and Responses), lm-eval `local-completions` (token-id prompts, a loglikelihood task with echo
and logprobs, a generation), LangChain `with_structured_output`, the OpenAI Agents SDK (its
default Responses model, a forced function call) and litellm (`responses()`, `completion()`).

They run in their own environment (`scripts/setup --clients`: .venv-clients), through
tests/serve/clients/run_clients.py, which reports each client's result or error. Slow-ish:
one server, one proxy, two runs of the five (~20 s each)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tuneloop.serve.lifecycle import Launch, free_port, launched

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "arith" / "model"
RUNNER = Path(__file__).parent / "clients" / "run_clients.py"
TUNELOOP = Path(sys.executable).parent / "tuneloop"


def clients_python() -> Path:
    venv = Path(os.environ.get("TUNELOOP_CLIENTS_VENV", ROOT / ".venv-clients"))
    python = venv / "bin" / "python"
    if not python.is_file():
        pytest.fail(f"no clients environment at {venv}: run scripts/setup --clients")
    return python


@pytest.fixture(scope="module")
def urls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    logs = tmp_path_factory.mktemp("clients")
    server_port, proxy_port = free_port("127.0.0.1"), free_port("127.0.0.1")
    serve = Launch(
        argv=[str(TUNELOOP), "serve", str(DEMO), "--port", str(server_port)],
        served_model="model",  # the folder's name: the default
        host="127.0.0.1",
        port=server_port,
        startup_timeout_s=120,
        log_path=logs / "serve.log",
    )
    with launched(serve) as (server, _):
        upstream = server.removesuffix("/v1")
        proxy = Launch(
            argv=[str(TUNELOOP), "proxy", "--upstream", upstream, "--port", str(proxy_port)],
            served_model="model",
            host="127.0.0.1",
            port=proxy_port,
            startup_timeout_s=60,
            log_path=logs / "proxy.log",
        )
        with launched(proxy) as (proxied, _):
            yield {"server": server, "proxy": proxied}


@pytest.mark.parametrize("where", ["server", "proxy"])
def test_five_clients_get_what_they_ask_for(
    urls: dict[str, str], where: str, tmp_path: Path
) -> None:
    run = subprocess.run(
        [str(clients_python()), str(RUNNER), urls[where], "model", str(DEMO), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=480,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    got: dict[str, Any] = json.loads(run.stdout.strip().splitlines()[-1])
    failed = {name: r["error"] for name, r in got.items() if "error" in r}
    assert not failed, "\n".join(f"{n}: {e}\n{got[n]['trace'][-1500:]}" for n, e in failed.items())
    inspect, lm_eval = got["inspect_ai"], got["lm_eval"]
    assert {inspect[k]["status"] for k in ("default", "responses")} == {"success"}
    assert inspect["default"]["answers"] == inspect["responses"]["answers"]  # greedy, both paths
    assert 0.0 <= lm_eval["acc"] <= 1.0 and isinstance(lm_eval["generated"], str)
    assert 0 <= got["langchain"]["answer"] <= 999 and got["langchain"]["unit"] in (
        "apples",
        "pears",
    )
    [(a, b)] = got["agents"]["calls"]  # the forced call ran the tool, whose result is the answer
    assert got["agents"]["final_output"] == str(a + b)
    assert got["litellm"]["responses"] and got["litellm"]["completion"]
