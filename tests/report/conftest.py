"""Tiny sample logs written through the real sample-log contract."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tuneloop.records import append_jsonl, write_record
from tuneloop.samplelog import EvalSummary, SampleRow, SamplingParams

REVISION = "a" * 64


def write_log(
    folder: Path,
    scores: dict[str, list[float | None]],
    *,
    model: str = "m0",
    revision: str = REVISION,
    tags: dict[str, list[str]] | None = None,
    temperature: float = 1.0,
    n_samples: int | None = None,
    item_ids: list[str] | None = None,
) -> Path:
    """One row per score; None writes a `missing` row, -1 a `harness_error` row."""
    n = n_samples if n_samples is not None else max(len(v) for v in scores.values())
    rows = []
    for item, values in scores.items():
        for j, v in enumerate(values):
            status = (
                "ok" if v is not None and v >= 0 else ("missing" if v is None else "harness_error")
            )
            rows.append(
                SampleRow(
                    suite_revision=revision,
                    item_id=item,
                    sample_index=j,
                    model=model,
                    seed=j,
                    completion="x" if status == "ok" else None,
                    score=v if status == "ok" else None,
                    status=status,  # type: ignore[arg-type]
                    tags=(tags or {}).get(item, []),
                ).to_json()
            )
    append_jsonl(folder / "samples.jsonl", rows)
    write_record(
        folder / "summary.json",
        EvalSummary(
            suite_path="suite.jsonl",
            suite_revision=revision,
            item_ids=item_ids if item_ids is not None else list(scores),
            model=model,
            endpoint="http://127.0.0.1:1/v1",
            sampling=SamplingParams(n_samples=n, temperature=temperature, max_tokens=16),
        ),
    )
    return folder


@pytest.fixture
def make_log(tmp_path: Path) -> Callable[..., Path]:
    counter = iter(range(1000))

    def make(scores: dict[str, list[float | None]], **kw: object) -> Path:
        return write_log(tmp_path / f"log{next(counter)}", scores, **kw)  # type: ignore[arg-type]

    return make


@pytest.fixture(scope="session")
def html_round(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The workdir of a finished round with a full report.html (tests/report/htmlround.py)."""
    from .htmlround import run_round

    return run_round(tmp_path_factory.mktemp("html_round"))
