"""The base of every config section: frozen, no unknown keys, a docstring under each field;
and `ConfigPath`, a path that resolves against the YAML file's folder."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationInfo


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


class Section(BaseModel):
    model_config = ConfigDict(
        extra="forbid", use_attribute_docstrings=True, frozen=True, validate_default=True
    )
