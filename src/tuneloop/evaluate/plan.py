"""The pure parts of an eval: per-sample seeds, request payloads, resume checks, totals.

Seeds: sample k of item i under base seed s is sent with
`int.from_bytes(sha256(f"{s}\\0{i}\\0{k}")[:4], "big") & 0x7FFFFFFF` (a non-negative int32,
which every OpenAI-compatible server accepts), so the pre and post evals of one loop send the
same seed for the same (item, sample) whatever the order requests finish in. Turn t > 0 of an
agent sample is sent with the same construction over `f"{s}\0{i}\0{k}\0{t}"` (turn 0 uses the
sample's seed, which is the one its row records).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tuneloop.errors import InputError
from tuneloop.records import iter_jsonl, parse_record
from tuneloop.samplelog import EvalSummary, SampleRow, SamplingParams
from tuneloop.suite import SuiteItem

Key = tuple[str, int]


def sample_seed(seed: int, item_id: str, sample_index: int) -> int:
    """The request seed of one (item, sample); see the module docstring."""
    digest = hashlib.sha256(f"{seed}\0{item_id}\0{sample_index}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def turn_seed(seed: int, item_id: str, sample_index: int, turn: int) -> int:
    """The request seed of one turn of an agent sample; see the module docstring."""
    if turn == 0:
        return sample_seed(seed, item_id, sample_index)
    digest = hashlib.sha256(f"{seed}\0{item_id}\0{sample_index}\0{turn}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def build_payload(
    item: SuiteItem, model: str, sampling: SamplingParams, seed: int
) -> tuple[dict[str, Any], bool]:
    """(request body, is_chat) for one sample."""
    body: dict[str, Any] = {
        "model": model,
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "max_tokens": sampling.max_tokens,
        "seed": seed,
        "n": 1,
        "stream": False,
    }
    if item.messages is not None:
        if sampling.logprobs:  # the answer's tokens and their two most likely alternatives
            body |= {"logprobs": True, "top_logprobs": 2}
        return {**body, "messages": item.messages}, True
    if sampling.logprobs:
        body["logprobs"] = 2
    return {**body, "prompt": item.prompt}, False


def endpoint_list(base_url: str | Sequence[str]) -> list[str]:
    """The replicas to spread the eval over: one URL, or several, each given once."""
    urls = [base_url] if isinstance(base_url, str) else list(base_url)
    if not urls:
        raise InputError("no endpoint given (--endpoint)")
    twice = sorted({u for u in urls if urls.count(u) > 1})
    if twice:
        raise InputError(f"--endpoint {twice[0]} given twice; list each replica once")
    return urls


def check_resumable(old: EvalSummary, new: EvalSummary, where: Path) -> None:
    """Refuse to resume into a log written with other settings; name the first difference."""
    fields = {
        "suite revision": (old.suite_revision, new.suite_revision),
        "model": (old.model, new.model),
        "sampling params": (old.sampling, new.sampling),
        "slice": (old.slice, new.slice),
        "items": (old.item_ids, new.item_ids),
        "agent limits": (old.agent, new.agent),
        "metrics": (old.metrics, new.metrics),
        "judge": (old.judge, new.judge),
    }
    for name, (was, now) in fields.items():
        if was != now:
            shown = (
                (f"{len(was)} items", f"{len(now)} items")  # type: ignore[arg-type]
                if name == "items"
                else (was, now)
            )
            raise InputError(
                f"{where}: existing sample log has {name} {shown[0]!r}, this eval has "
                f"{shown[1]!r}; use another --out folder or delete this one"
            )


def read_existing_rows(
    samples: Path, summary: EvalSummary, seed: int
) -> tuple[dict[Key, SampleRow], int]:
    """Rows of a log being resumed (last row per key) and how many rows the file holds.

    Each row must match the eval being resumed: suite revision, model and the derived seed
    (which pins the base seed); anything else is an InputError naming file:line.
    """
    rows: dict[Key, SampleRow] = {}
    count = 0
    wanted = set(summary.item_ids)
    for lineno, obj in iter_jsonl(samples):
        where = f"{samples}:{lineno}"
        row = parse_record(obj, SampleRow, where)
        count += 1
        if row.suite_revision != summary.suite_revision:
            raise InputError(
                f"{where}: row is from suite revision {row.suite_revision[:12]}, "
                f"this eval uses {summary.suite_revision[:12]}"
            )
        if row.model != summary.model:
            raise InputError(
                f"{where}: row is from model {row.model!r}, this eval uses {summary.model!r}"
            )
        if row.seed != sample_seed(seed, row.item_id, row.sample_index):
            raise InputError(f"{where}: row seed {row.seed} does not derive from base seed {seed}")
        if row.item_id not in wanted or not 0 <= row.sample_index < summary.sampling.n_samples:
            raise InputError(
                f"{where}: row ({row.item_id!r}, {row.sample_index}) is not part of this eval"
            )
        rows[(row.item_id, row.sample_index)] = row
    return rows, count


def missing_row(
    item: SuiteItem, index: int, revision: str, model: str, seed: int, error: str | None
) -> SampleRow:
    return SampleRow(
        suite_revision=revision,
        item_id=item.id,
        sample_index=index,
        model=model,
        seed=sample_seed(seed, item.id, index),
        scorer=item.scorer,
        status="missing",
        error=error or "no completion",
        tags=list(item.tags),
    )


def totals(rows: dict[Key, SampleRow], item_ids: list[str], n_samples: int) -> dict[str, Any]:
    """Counts by status (+ expected) and the mean item score with missing/errors as 0."""
    counts = {"expected": len(item_ids) * n_samples, "ok": 0, "harness_error": 0, "missing": 0}
    item_means = []
    for item_id in item_ids:
        values = []
        for k in range(n_samples):
            row = rows.get((item_id, k))
            counts[row.status if row else "missing"] += 1
            values.append(row.value if row else 0.0)
        item_means.append(sum(values) / n_samples)
    mean = sum(item_means) / len(item_means) if item_means else None
    return {"counts": counts, "mean_score": mean}
