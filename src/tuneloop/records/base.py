"""The `Record` base class and the typed reader every tuneloop artifact is read through.

Each JSON artifact carries `"schema": "tuneloop.<kind>/<n>"`. `read_record(path, Cls)` refuses
a record of another kind or of a newer version than this code reads, and a field of the wrong
type, with an error that names the file (exit 2); it is the only way tuneloop reads its own
artifacts back (`tests/test_raw_reads.py` fails on a raw `read_json(...)[key]`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tuneloop.errors import InputError
from tuneloop.records.disk import read_json, write_json

R = TypeVar("R", bound="Record")
M = TypeVar("M", bound=BaseModel)


class Record(BaseModel):
    """Base class of every artifact record. Subclasses set KIND and VERSION."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    KIND: ClassVar[str] = "record"
    VERSION: ClassVar[int] = 1

    schema_: str = Field(default="", alias="schema")
    """`tuneloop.<kind>/<version>`; filled in automatically."""

    def model_post_init(self, __context: Any) -> None:
        if not self.schema_:
            self.schema_ = self.schema_id()

    @classmethod
    def schema_id(cls) -> str:
        return f"tuneloop.{cls.KIND}/{cls.VERSION}"

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


def check_schema(data: dict[str, Any], cls: type[Record], where: str) -> None:
    """Refuse a record of another kind or of a version newer than this code reads."""
    schema = data.get("schema")
    if not isinstance(schema, str) or "/" not in schema:
        raise InputError(f"{where}: missing 'schema' field (expected {cls.schema_id()!r})")
    kind, _, version = schema.rpartition("/")
    if kind != f"tuneloop.{cls.KIND}":
        raise InputError(f"{where}: is a {schema!r} record, expected {cls.schema_id()!r}")
    if not version.isdigit() or int(version) > cls.VERSION:
        raise InputError(
            f"{where}: record version {schema!r} is newer than this tuneloop reads "
            f"({cls.schema_id()!r}); upgrade tuneloop"
        )


def validate_as(cls: type[M], data: dict[str, Any], where: str) -> M:
    """`cls.model_validate(data)`; a failure is an InputError naming `where` and the field."""
    try:
        return cls.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise InputError(f"{where}: field {loc!r}: {first['msg']}") from None


def parse_record(data: dict[str, Any], cls: type[R], where: str) -> R:
    check_schema(data, cls, where)
    return validate_as(cls, {**data, "schema": cls.schema_id()}, where)


def read_record(path: Path, cls: type[R]) -> R:
    """Read one JSON record, checking its schema; errors name the file."""
    return parse_record(read_json(path), cls, str(path))


def read_record_if_exists(path: Path, cls: type[R]) -> R | None:
    """`read_record`, or None when the file is not there (an artifact not measured)."""
    return read_record(path, cls) if Path(path).exists() else None


def write_record(path: Path, record: Record) -> None:
    write_json(path, record.to_json())
