"""Tiny suites and sample logs for the gate tests (no model, no server)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from tuneloop.records import write_jsonl, write_record
from tuneloop.samplelog import EvalSummary, SampleRow, SamplingParams
from tuneloop.suite import load_suite

TAGS = ("add", "sub")


def item_id(i: int) -> str:
    return f"item-{i:04d}"


@pytest.fixture
def suite_file(tmp_path: Path) -> Path:
    """A 200-item suite; even items tagged add, odd items sub."""
    path = tmp_path / "suite.jsonl"
    lines = [
        json.dumps(
            {
                "id": item_id(i),
                "messages": [{"role": "user", "content": f"What is {i} + 1?"}],
                "answer": str(i + 1),
                "scorer": "numeric",
                "tags": [TAGS[i % 2]],
            }
        )
        for i in range(200)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


LogMaker = Callable[..., Path]


@pytest.fixture
def make_log(tmp_path: Path, suite_file: Path) -> LogMaker:
    """make_log(name, scores[item_index][sample]) → a sample-log folder on the suite.

    `scores` maps every suite item to its sample scores; None marks a missing sample.
    """
    revision = load_suite(suite_file).revision

    def make(
        name: str,
        scores: Sequence[Sequence[float | None]],
        *,
        n_samples: int | None = None,
        temperature: float = 0.7,
        revision_: str | None = None,
        item_ids: list[str] | None = None,
        started_at: str | None = None,
    ) -> Path:
        folder = tmp_path / name
        rev = revision_ or revision
        ids = item_ids or [item_id(i) for i in range(len(scores))]
        n = n_samples or max(len(s) for s in scores)
        rows: list[dict[str, Any]] = []
        for idx, item in enumerate(ids):
            for k, value in enumerate(scores[idx]):
                status = "ok" if value is not None else "missing"
                rows.append(
                    SampleRow(
                        suite_revision=rev,
                        item_id=item,
                        sample_index=k,
                        model=name,
                        seed=k,
                        completion="x" if value is not None else None,
                        score=value,
                        scorer="numeric",
                        status=status,
                        tags=[TAGS[int(item[-4:]) % 2]],
                    ).to_json()
                )
        write_jsonl(folder / "samples.jsonl", rows)
        sampling = SamplingParams(n_samples=n, temperature=temperature, max_tokens=16)
        summary = EvalSummary(
            suite_path=str(suite_file),
            suite_revision=rev,
            item_ids=ids,
            model=name,
            endpoint="http://127.0.0.1:0/v1",
            sampling=sampling,
            started_at=started_at,
        )
        write_record(folder / "summary.json", summary)
        return folder

    return make


def flat(n_items: int, value: float, n_samples: int = 2) -> list[list[float | None]]:
    return [[value] * n_samples for _ in range(n_items)]


def improved(n_items: int, every: int = 3, n_samples: int = 2) -> list[list[float | None]]:
    """Champion-like scores with every `every`-th item raised from 0 to 1."""
    return [[1.0 if i % every == 0 else 0.0] * n_samples for i in range(n_items)]
