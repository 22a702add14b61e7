"""A round's run state as phases outside the loop may read it.

The loop owns `state.json` (`tuneloop.loop.state.RunState`, read typed with `read_record`).
The capstone report and the archive are handed that typed state by the loop and read it
through these protocols — the fields they rely on, read-only — so that no phase imports the
loop to know its type.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol


class PhaseView(Protocol):
    """One phase's record in the run state."""

    @property
    def status(self) -> str:
        """running, done, failed or skipped."""
        ...

    @property
    def inputs(self) -> Mapping[str, str]:
        """Input name → sha256, as the runner recorded it."""
        ...

    @property
    def outputs(self) -> Mapping[str, str]:
        """Output path (relative to the workdir) → sha256."""
        ...

    @property
    def duration_s(self) -> float | None:
        """Wall time inside the phase's work."""
        ...


class RunView(Protocol):
    """The run state: the round's id and its phases in run order."""

    @property
    def run_id(self) -> str: ...

    @property
    def phases(self) -> Mapping[str, PhaseView]: ...
