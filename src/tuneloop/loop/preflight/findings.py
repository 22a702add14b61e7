"""What a preflight check reports: findings keyed by the YAML path of the setting at fault.

Every check (`checks.py`, `gate_power.py`) adds to one `Findings`; `check_before_compute`
then locates each key in the config file and raises the errors together.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Finding:
    key: str
    """Dotted YAML path of the setting at fault, e.g. `gate.slice`."""
    message: str
    """What is wrong and what to do, without the key."""


@dataclass
class Findings:
    errors: list[Finding] = field(default_factory=list)
    warnings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """What was read, for the user to see (the model's facts), neither error nor warning."""

    def error(self, key: str, message: str) -> None:
        self.errors.append(Finding(key, message))

    def warn(self, key: str, message: str) -> None:
        self.warnings.append(Finding(key, message))

    def note(self, line: str) -> None:
        self.notes.append(line)
