"""The heap an eval starts with, left out of the garbage collector's full scans.

    with frozen_heap():
        ...  # the eval: every object that existed before is in the permanent generation

CPython's cyclic collector scans every tracked object in a full (generation 2) collection, and
an eval allocates enough (suite items, requests, rows) to trigger one or two. In a process that
has imported a training stack — the loop's, or a benchmark's beside lm-eval — that is ~250k
objects the eval never frees: measured on this 2-core machine (benchmarks/eval_client.py's
server, 2,000 samples, 2026-12-05), one full collection cost 83 µs a sample (166 ms) and took
the client from 105 to 180 µs of CPU a sample; with the heap frozen, 106. Objects the eval
creates are collected as usual. `gc.freeze` is process-wide, so an eval inside a freeze that
someone else made leaves it as it found it (frozen), rather than thawing their heap.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def frozen_heap() -> Iterator[None]:
    """Move every tracked object to the permanent generation for the block (see above)."""
    thaw = gc.get_freeze_count() == 0
    gc.freeze()
    try:
        yield
    finally:
        if thaw:
            gc.unfreeze()
