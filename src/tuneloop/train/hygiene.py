"""Training-data hygiene: refuse training prompts that are eval-suite items.

A training row whose user-visible prompt text equals a suite item's after normalization
(`suite.normalize_prompt`: lowercase, whitespace collapsed) is contamination: training on it
inflates the post-eval.
Such rows are refused with the training file:line and the suite item id, unless the caller
allows contamination, in which case the matches are returned so the run can record them.
Deliberately exact-match only: near-duplicate detection (MinHash) lives in the data phase.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from tuneloop.errors import InputError
from tuneloop.records import iter_jsonl
from tuneloop.suite import normalize_prompt
from tuneloop.train.data import Row, user_text


def suite_index(paths: Iterable[Path]) -> dict[str, str]:
    """Normalized prompt text → suite item id, over every suite file."""
    index: dict[str, str] = {}
    for path in paths:
        path = Path(path)
        if not path.is_file():
            raise InputError(f"{path}: suite file not found (needed for the contamination check)")
        for n, item in iter_jsonl(path):
            key = normalize_prompt(user_text(item))
            if key:
                index.setdefault(key, str(item.get("id", f"{path}:{n}")))
    return index


def find_contamination(rows: list[Row], index: dict[str, str]) -> list[str]:
    """`file:line ~ item id` for each training row whose prompt is a suite item."""
    hits = []
    for row in rows:
        key = normalize_prompt(user_text(row.data))
        if key and key in index:
            hits.append(f"{row.where} ~ {index[key]}")
    return hits


def check_contamination(rows: list[Row], suite_paths: Iterable[Path], allow: bool) -> list[str]:
    """Raise InputError on contamination unless `allow`; return the matches either way."""
    hits = find_contamination(rows, suite_index(suite_paths))
    if hits and not allow:
        shown = "\n  ".join(hits[:20])
        more = f"\n  … and {len(hits) - 20} more" if len(hits) > 20 else ""
        raise InputError(
            f"{len(hits)} training prompt(s) match eval-suite items (normalized exact match):\n"
            f"  {shown}{more}\nremove them, or pass --allow-contamination "
            "(train.allow_contamination) to train anyway; the allowance is recorded"
        )
    return hits
