"""Round axis ticks for the figures tuneloop draws by hand as SVG (report.html's, the
dashboard's, `tuneloop compose`'s frontier): pure arithmetic, core, so that every phase that
draws may use it."""

from __future__ import annotations

import math


def nice_ticks(lo: float, hi: float, want: int = 5) -> list[float]:
    """Round tick values covering [lo, hi], about `want` of them, in 1-2-5 steps."""
    if not hi > lo:
        return [lo]
    raw = (hi - lo) / want
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step - 1e-9) * step
    return [first + i * step for i in range(int((hi - first) / step + 1e-9) + 1)]
