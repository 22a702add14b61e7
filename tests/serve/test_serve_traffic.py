"""`tuneloop serve --traffic-log DIR`: the embedded server logs its traffic and takes feedback.

The installed command in a subprocess, with the official `openai` client and a real model.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

_BESIDE = Path(sys.executable).with_name("tuneloop")  # the venv's installed script
TUNELOOP = str(_BESIDE) if _BESIDE.is_file() else shutil.which("tuneloop")


@pytest.fixture
def served(tiny_model: Path, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    assert TUNELOOP, "the tuneloop script is installed with the package"
    port_file, logs = tmp_path / "port", tmp_path / "traffic"
    proc = subprocess.Popen(
        [TUNELOOP, "serve", str(tiny_model), "--port", "0", "--port-file", str(port_file)]
        + ["--served-model-name", "tiny", "--traffic-log", str(logs)],
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not _healthy(port_file):
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.2)
        yield f"http://127.0.0.1:{port_file.read_text().strip()}", logs
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _healthy(port_file: Path) -> bool:
    if not port_file.exists() or not port_file.read_text().strip():
        return False
    try:
        url = f"http://127.0.0.1:{port_file.read_text().strip()}/health"
        return httpx.get(url, timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def test_exchanges_and_feedback_are_logged(served: tuple[str, Path]) -> None:
    url, logs = served
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="none")
    answer = client.chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "What is 2 + 3?"}], max_tokens=4
    )
    fb = httpx.post(
        f"{url}/v1/feedback",
        json={"completion_id": answer.id, "verdict": "down", "correction": "5"},
        timeout=10,
    )
    assert fb.status_code == 200, fb.text
    unknown = httpx.post(
        f"{url}/v1/feedback", json={"completion_id": "chatcmpl-nope", "verdict": "up"}, timeout=10
    )
    assert unknown.status_code == 404
    health = httpx.get(f"{url}/health", timeout=10).json()
    assert health["traffic"]["error"] is None
    lines = [json.loads(x) for x in (logs / "traffic.jsonl").read_text().splitlines()]
    exchange = next(x for x in lines if "request" in x)
    assert exchange["response"]["id"] == answer.id
    assert exchange["request"]["messages"][0]["content"] == "What is 2 + 3?"
    feedback = next(x for x in lines if x.get("type") == "feedback")
    assert (feedback["completion_id"], feedback["correction"]) == (answer.id, "5")
