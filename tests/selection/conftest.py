"""Sample logs of several arms on the same items, written with the report tests' `write_log`
(the real sample-log contract), with completion tokens per sample when a test needs a cost."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.report.conftest import REVISION, write_log
from tuneloop.records import iter_jsonl, parse_record, write_jsonl
from tuneloop.samplelog import SAMPLES_FILE, SampleRow

__all__ = ["REVISION", "MakeArm"]

MakeArm = Callable[..., Path]


def _with_tokens(folder: Path, tokens: int) -> None:
    samples = folder / SAMPLES_FILE
    rows = [parse_record(obj, SampleRow, str(samples)) for _, obj in iter_jsonl(samples)]
    write_jsonl(
        samples,
        [
            r.model_copy(
                update={"completion_tokens": tokens if r.status == "ok" else None}
            ).to_json()
            for r in rows
        ],
    )


@pytest.fixture
def make_arm(tmp_path: Path) -> MakeArm:
    """make_arm(name, {item: [sample scores]}, tokens=None, **write_log options) → a log
    folder `tmp_path/name`; `tokens` sets every scored sample's completion tokens."""

    def make(
        name: str, scores: dict[str, list[float | None]], tokens: int | None = None, **kw: object
    ) -> Path:
        folder = write_log(tmp_path / name, scores, **kw)  # type: ignore[arg-type]
        if tokens is not None:
            _with_tokens(folder, tokens)
        return folder

    return make
