"""Where the flywheel keeps its own things in a loop's workdir: one place for those paths.

    paths = FlywheelPaths(cfg.workdir)
    paths.state                   # <workdir>/flywheel.db: the watcher's rounds, decisions, pacing
    paths.trigger_file("r0003")   # <workdir>/flywheel/r0003.trigger.json: what the round receives
    paths.round_log("r0003")      # <workdir>/flywheel/r0003.log: the round command's output
    paths.service                 # <workdir>/flywheel/service/: the managed champion service

A round's own folder is a run of its own, so the run layout names it and what it holds
(`RunLayout(workdir).round("r0003")`, `tuneloop.loop.layout`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

STATE_FILE = "flywheel.db"
"""The watcher's SQLite state (`watch.state.WatchState`), at the top of the workdir."""
FOLDER = "flywheel"
"""The folder under the workdir for the watcher's per-round files and the service's state."""


@dataclass(frozen=True)
class FlywheelPaths:
    """The flywheel's files and folders in one loop workdir."""

    workdir: Path

    @property
    def state(self) -> Path:
        return Path(self.workdir) / STATE_FILE

    @property
    def folder(self) -> Path:
        return Path(self.workdir) / FOLDER

    def trigger_file(self, round_id: str) -> Path:
        """The round's trigger record (`RoundTrigger`), handed to the round command."""
        return self.folder / f"{round_id}.trigger.json"

    def round_log(self, round_id: str) -> Path:
        """The round command's output, appended over its attempts."""
        return self.folder / f"{round_id}.log"

    @property
    def service(self) -> Path:
        """The managed service's state folder (`service.json`, its lock, port files, logs)."""
        return self.folder / "service"
