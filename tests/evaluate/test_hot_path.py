"""A budget of work per sample on the eval's hot path, counted rather than timed.

Issue 35: the eval client's CPU per sample on an instant server grew from ~120 to ~230 µs
(benchmarks/eval_client.py) through per-sample work that no test saw: a redaction walk that
entered a function for every string of every row (~24 calls of `redact_value` a row), a JSON
encode per sample to look up the same scorer, and rows built, redacted and serialized one at
a time between a response and the next request. A timing test cannot catch that on a shared
machine; these counts can. Each is the difference between an eval of 3 samples per item and
one of 1 sample per item, so what an eval does once (load the suite, write the summary, build
the redactor) cancels out, and only what grows with the samples is counted. The budgets:

- JSON encodes: 2 a sample (the request body, the row's line in the log);
- `redact_value` calls: 3 a row (the row, its `detail` and its `tags`; the walk tests each
  string in place and enters a function only for a container);
- `SampleRow.to_json` (pydantic's dump of a row into a dict): 1 a row;
- regular expressions compiled or looked up in `re`'s cache: none (every pattern on the path
  is compiled once, at import or when the eval starts);
- `sha256` calls: 1 a sample (its seed).

And the heap the eval starts with is frozen while it runs (`evaluate/heap.py`): in a process
holding a training stack, one full collection during an eval cost 83 µs a sample.

The fake server runs in a thread of the same process: its calls are not counted. A first eval
warms up what is done once per process (lazy imports, `re`'s cache).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tuneloop import envkeys
from tuneloop.evaluate import EvalSettings, evaluate
from tuneloop.samplelog import SampleRow

BUDGET = {
    "json encode": 2,
    "redact_value": 3,
    "SampleRow.to_json": 1,
    "re compile": 0,
    "sha256": 1,
}
"""Calls a sample may add (see the module docstring)."""


def _counting(
    counts: Counter[str], name: str, fn: Callable[..., Any], server: threading.Thread
) -> Callable[..., Any]:
    def counted(*args: Any, **kwargs: Any) -> Any:
        if threading.current_thread() is not server:
            counts[name] += 1
        return fn(*args, **kwargs)

    return counted


@pytest.fixture
def counts(monkeypatch: pytest.MonkeyPatch, fake_server) -> Counter[str]:
    counts: Counter[str] = Counter()
    for owner, attr, name in [
        (json.JSONEncoder, "encode", "json encode"),
        (envkeys, "redact_value", "redact_value"),
        (SampleRow, "to_json", "SampleRow.to_json"),
        (re, "_compile", "re compile"),
        (hashlib, "sha256", "sha256"),
    ]:
        fn = getattr(owner, attr)
        monkeypatch.setattr(owner, attr, _counting(counts, name, fn, fake_server.thread))
    return counts


def _eval(server, suite: Path, out: Path, n_samples: int, counts: Counter[str]) -> Counter[str]:
    counts.clear()
    settings = EvalSettings(n_samples=n_samples, concurrency=4, max_retries=0)
    summary = evaluate(server.url, "fake", suite, out, settings, progress=False)
    assert summary.counts["ok"] == summary.counts["expected"] == 30 * n_samples
    return Counter(counts)


def test_the_work_per_sample_stays_within_its_budget(fake_server, small_suite, tmp_path, counts):
    _eval(fake_server, small_suite, tmp_path / "warm-up", 1, counts)
    one = _eval(fake_server, small_suite, tmp_path / "one", 1, counts)
    three = _eval(fake_server, small_suite, tmp_path / "three", 3, counts)
    samples = 30 * (3 - 1)
    per_sample = {name: (three[name] - one[name]) / samples for name in BUDGET}
    over = {name: n for name, n in per_sample.items() if n > BUDGET[name]}
    assert not over, f"per sample {per_sample}; budget {BUDGET} (see the module docstring)"
    assert per_sample["json encode"] > 0  # the counters do see the eval's own calls


def test_the_heap_the_eval_starts_with_is_frozen_and_thawed_after(
    fake_server, small_suite, tmp_path, monkeypatch
):
    """In a process holding a training stack, one full collection during the eval cost 83 µs a
    sample (evaluate/heap.py): the eval runs with the heap it started with frozen."""
    import gc

    from tuneloop.plugins import Score
    from tuneloop.registry import scorers

    seen: list[int] = []
    numeric = scorers.get("numeric")()

    def spy(**_: Any) -> Any:
        def score(item: dict[str, Any], completion: str) -> Score:
            seen.append(gc.get_freeze_count())
            return numeric(item, completion)

        return score

    spy.inline = True  # type: ignore[attr-defined]
    scorers.names()  # load the built-ins first, so that the stand-in is only added
    monkeypatch.setitem(scorers._items, "frozen_spy", spy)  # type: ignore[attr-defined]
    assert gc.get_freeze_count() == 0
    settings = EvalSettings(concurrency=4, max_retries=0)
    rows = [json.loads(line) for line in small_suite.read_text().splitlines()]
    suite = tmp_path / "spy.jsonl"
    suite.write_text("".join(json.dumps({**r, "scorer": "frozen_spy"}) + "\n" for r in rows))
    evaluate(fake_server.url, "fake", suite, tmp_path / "log", settings, progress=False)
    assert seen and min(seen) > 1000  # everything that existed before the eval
    assert gc.get_freeze_count() == 0
