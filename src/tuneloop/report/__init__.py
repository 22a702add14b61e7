"""The report phase: the paired delta report of two sample logs, and the round's capstone.

    tuneloop compare PRE_LOG POST_LOG --out DIR   # delta.json, delta.md, passk.png, items.png
    tuneloop compare PRE_LOG POST_LOG --out DIR --html DIR   # … and report.html
    tuneloop power --pilot LOG [--effect 0.03]    # items needed, or the MDE

From Python (the loop's report phase): `compare(pre_log, post_log, out_dir, ...)` reads and
writes files; `compute_delta((summary, rows), (summary, rows), ...)` is the pure core. The
names of this face are imported lazily so that importing the package (e.g. for the CLI's
help) stays cheap.
Statistics come from `tuneloop.stats`; this package only lays out data and writes files.
`write_capstone` (`capstone.py`) writes the loop's one-page `report.md` from the round's
artifacts (`CapstoneInputs`, `VerdictView`: `inputs.py`), read typed, and `html.py` the
self-contained `report.html` beside it (also `tuneloop compare --html`), gathered in
`page.py`; `templating.py` holds what it shares with the flywheel's dashboard (`report.css`,
the number filters).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tuneloop.lazy import lazy_exports

if TYPE_CHECKING:
    from tuneloop.report.build import compare
    from tuneloop.report.capstone import write_capstone
    from tuneloop.report.delta import compute_delta
    from tuneloop.report.inputs import CapstoneInputs, CascadeInputs, VerdictView
    from tuneloop.report.record import DeltaReport

__all__ = [
    "CapstoneInputs",
    "CascadeInputs",
    "DeltaReport",
    "VerdictView",
    "compare",
    "compute_delta",
    "write_capstone",
]

_LAZY = {
    "compare": "build",
    "compute_delta": "delta",
    "DeltaReport": "record",
    "CapstoneInputs": "inputs",
    "CascadeInputs": "inputs",
    "VerdictView": "inputs",
    "write_capstone": "capstone",
}


__getattr__ = lazy_exports(__name__, _LAZY)
