"""The base of every config section: frozen, no unknown keys, a docstring under each field;
`ConfigPath`, a path that resolves against the YAML file's folder; and `SafeName`, a name
that becomes one path component (a run's archive folder, a workdir entry)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationInfo

from tuneloop.errors import InputError


def _resolve(value: Path | None, info: ValidationInfo) -> Path | None:
    if value is None:
        return None
    base = (info.context or {}).get("base_dir")
    value = Path(value).expanduser()
    if base is not None and not value.is_absolute():
        value = Path(base) / value
    return value.resolve() if base is not None else value


ConfigPath = Annotated[Path, AfterValidator(_resolve)]
"""A path in loop.yaml; relative paths resolve against the YAML file's folder."""


def path_component_problem(name: str) -> str | None:
    """Why `name` cannot be used as one path component (a folder or file name inside a folder
    tuneloop writes to), or None. The one rule for every name that becomes a path: not empty,
    not `.` or `..`, no `/` or `\\`, no control character, no leading or trailing space."""
    if not name:
        return "must not be empty"
    if name in (".", ".."):
        return f"{name!r} is not a name (it names a folder relative to another)"
    bad = sorted({c for c in name if c in "/\\" or ord(c) < 32 or ord(c) == 127})
    if bad:
        shown = ", ".join(repr(c) for c in bad)
        return f"must be a plain name, one path component: {shown} not allowed"
    if name != name.strip():
        return "must not start or end with a space"
    return None


def check_path_component(name: str, what: str) -> str:
    """`name` itself, or InputError naming `what` when it is not one safe path component."""
    problem = path_component_problem(name)
    if problem is not None:
        raise InputError(f"{what}: {problem} (got {name!r})")
    return name


def _safe_name(value: str) -> str:
    problem = path_component_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


SafeName = Annotated[str, AfterValidator(_safe_name)]
"""A name that becomes a path component (`name` → `<archive root>/<name>-<time>/`): refused at
load when it could climb out of its folder (`../x`) or name a sub-folder."""


class Section(BaseModel):
    model_config = ConfigDict(
        extra="forbid", use_attribute_docstrings=True, frozen=True, validate_default=True
    )
