"""A small world for the watcher's tests: a loop.yaml with a `flywheel:` section, a suite, a
traffic log written line by line, and `fake_round.py` as the round command."""

from __future__ import annotations

import json
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tuneloop.config import load_config
from tuneloop.flywheel.paths import FlywheelPaths
from tuneloop.flywheel.watch import Watcher, WatchState, build_site

FAKE = Path(__file__).with_name("fake_round.py")


@dataclass
class World:
    root: Path
    config: Path
    workdir: Path
    logs: Path
    plan: Path
    _next_id: int = 0
    echoed: list[str] = field(default_factory=list)

    def set_plan(self, **plan: Any) -> None:
        self.plan.write_text(json.dumps(plan), encoding="utf-8")

    def events(self) -> list[str]:
        path = self.workdir / "fake-events.txt"
        return path.read_text(encoding="utf-8").splitlines() if path.exists() else []

    def count(self, kind: str, round_id: str) -> int:
        return sum(1 for e in self.events() if e.split()[:2] == [kind, round_id])

    def add_labels(self, n: int, at: float | None = None) -> None:
        """`n` exchanges, each with a thumbs-down and a correction, timed `at` (default now);
        each asks a question of its own, so each is a new training row (`flywheel.growth`)."""
        when = time.time() if at is None else at
        lines = []
        for _ in range(n):
            self._next_id += 1
            cid = f"chatcmpl-{self._next_id}"
            lines.append(
                {
                    "timestamp": when,
                    "request": {"messages": [{"role": "user", "content": f"{self._next_id} + 30"}]},
                    "response": {
                        "id": cid,
                        "object": "chat.completion",
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": "6"},
                                "finish_reason": "stop",
                            }
                        ],
                    },
                }
            )
            lines.append(
                {
                    "type": "feedback",
                    "completion_id": cid,
                    "verdict": "down",
                    "correction": "5",
                    "timestamp": when,
                }
            )
        with (self.logs / "traffic.jsonl").open("a", encoding="utf-8") as fh:
            fh.writelines(json.dumps(line) + "\n" for line in lines)

    def round_command(self) -> str:
        fixed = shlex.join([sys.executable, str(FAKE), str(self.plan)])
        return fixed + " {workdir} {round} {trigger_file}"

    def watcher(self, clock: Callable[[], float] = time.time) -> Watcher:
        cfg = load_config(self.config)
        flywheel = cfg.flywheel
        site = build_site(cfg, self.config, self.round_command())
        state = WatchState.open(FlywheelPaths(cfg.workdir).state)
        return Watcher(state, flywheel, site, clock=clock, echo=self.echoed.append)

    def state(self) -> WatchState:
        return WatchState.open(FlywheelPaths(self.workdir).state, create=False)


def make_world(tmp_path: Path, **flywheel: Any) -> World:
    """A config whose triggers fire at 2 new labels, polling every 0.2 s, no pacing wait."""
    items = [
        {"id": f"q{i}", "messages": [{"role": "user", "content": f"{i} + 1"}], "answer": str(i + 1)}
        for i in range(4)
    ]
    (tmp_path / "suite.jsonl").write_text(
        "".join(json.dumps(i) + "\n" for i in items), encoding="utf-8"
    )
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "traffic.jsonl").touch()
    section: dict[str, Any] = {
        "traffic": ["logs"],
        "poll_s": 0.2,
        "triggers": {"min_new_labels": 2, "min_interval_s": 0},
    }
    for key, value in flywheel.items():
        section[key] = {**section.get(key, {}), **value} if isinstance(value, dict) else value
    config = {
        "base_model": "model",
        "workdir": "runs/loop",
        "suite": {"path": "suite.jsonl"},
        "eval": {"n_samples": 2},
        "train": {"steps": 40, "sft_warmup_steps": 5},
        "gate": {"ledger": "ledger/loop.db"},
        "flywheel": section,
    }
    path = tmp_path / "loop.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    world = World(tmp_path, path, tmp_path / "runs" / "loop", logs, tmp_path / "plan.json")
    world.set_plan(sleep=0, exit=0)
    return world
