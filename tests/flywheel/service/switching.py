"""A bounded request load through the managed service's proxy while it switches champions,
and a ledger entry that makes a checkpoint the champion (shared by the embedded and the vLLM
switch tests)."""

from __future__ import annotations

import json
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from tuneloop.flywheel.service import ManagedService, reserve_champion
from tuneloop.flywheel.service.reserve import Reserved

WORKERS = 4
PACE_S = 0.25
"""Each worker's pause between requests: ~12 requests/s in all, so a switch of ~10 s falls
well inside a loop of ~150 requests."""


def add_champion(ledger: Path, model_dir: Path, adapter: Path | None = None) -> int:
    """`model_dir` (with `adapter` on it: an adapter champion) as the ledger's champion."""
    from tuneloop.gate.ledger import open_ledger

    descriptor: dict[str, object] = {"kind": "single", "path": str(model_dir), "sha256": "0" * 64}
    if adapter is not None:
        descriptor["adapter"] = {"path": str(adapter), "sha256": "1" * 64}
    with open_ledger(ledger) as book, book.transaction():
        return book.add_champion(descriptor, run_id=None, at="2026-12-01T00:00:00Z", via="test")


@dataclass
class Load:
    """A bounded request loop: WORKERS threads (the embedded server does not stream)."""

    url: str
    done: list[tuple[float, float, str | None]] = field(default_factory=list)
    answered: list[tuple[float, str]] = field(default_factory=list)
    """(when it was sent, the model its answer names), for each answer."""
    stop: threading.Event = field(default_factory=threading.Event)

    def worker(self, index: int) -> None:
        import openai

        client = openai.OpenAI(base_url=self.url, api_key="unused", max_retries=0, timeout=60)
        messages = [{"role": "user", "content": f"{index}+{index}="}]
        while not self.stop.is_set():
            began, error = time.monotonic(), None
            try:
                reply = client.chat.completions.create(
                    model="champion",
                    messages=messages,  # type: ignore[arg-type]
                    max_tokens=8,
                )
                assert reply.choices[0].finish_reason is not None
                self.answered.append((began, reply.model))
            except Exception as err:  # every failure counts; none may happen
                error = f"{type(err).__name__}: {err}"
            self.done.append((began, time.monotonic(), error))
            time.sleep(PACE_S)

    def wait_for(self, count: int, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while len(self.done) < count and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(self.done) >= count, f"only {len(self.done)} requests in {timeout_s} s"


def new_version(model: Path, folder: Path) -> Path:
    """A copy of `model` that is another checkpoint to the service (its generation config
    differs: at most 6 new tokens)."""
    shutil.copytree(model, folder)
    config = json.loads((folder / "generation_config.json").read_text())
    (folder / "generation_config.json").write_text(json.dumps({**config, "max_new_tokens": 6}))
    return folder


@dataclass
class Switch:
    """What a client load saw while `reserve_champion` switched the service."""

    load: Load
    reserved: Reserved
    began: float
    ended: float

    @property
    def failed(self) -> list[str]:
        return [error for _, _, error in self.load.done if error is not None]

    @property
    def during(self) -> list[tuple[float, float, str | None]]:
        return [r for r in self.load.done if r[0] < self.ended and r[1] > self.began]

    @property
    def answered_after(self) -> set[str]:
        """The models that answered the requests sent after the switch."""
        return {model for began, model in self.load.answered if began >= self.ended}

    @property
    def after(self) -> list[tuple[float, float, str | None]]:
        return [r for r in self.load.done if r[0] >= self.ended]


def switch_under_load(service: ManagedService, ledger: Path, url: str, around: int = 30) -> Switch:
    """`reserve_champion` while WORKERS clients send requests through `url`: `around`
    requests before the switch and as many after it."""
    load = Load(url)
    threads = [threading.Thread(target=load.worker, args=(i,)) for i in range(WORKERS)]
    for thread in threads:
        thread.start()
    try:
        load.wait_for(around)
        began = time.monotonic()
        reserved = reserve_champion(service, ledger)
        ended = time.monotonic()
        load.wait_for(len(load.done) + around)
    finally:
        load.stop.set()
        for thread in threads:
            thread.join()
    return Switch(load, reserved, began, ended)
