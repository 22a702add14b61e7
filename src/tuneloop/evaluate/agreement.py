"""Do two sample logs of the same suite hold the same completions? (Same model, two servers.)

`agreement(a, b)` pairs the rows of two sample-log folders by (item id, sample index) and
counts the pairs whose completion text differs, keeping the first few for a person to read.
Used to show that the embedded server and vLLM answer the same model greedily with the same
text (README, "vLLM"; tests/serve/test_vllm_real.py), and by `doctor` for an adapter served on
its base against the merged model. Only rows both logs hold with status `ok` are compared; the
rest are counted (`unpaired`), never silently dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tuneloop.samplelog import SampleRow, load_sample_log

EXAMPLES = 5
"""How many differing pairs `Agreement.differing` keeps."""


@dataclass(frozen=True)
class Difference:
    item_id: str
    sample_index: int
    a: str
    b: str


@dataclass(frozen=True)
class Agreement:
    compared: int
    """(item, sample) pairs both logs answered (status ok)."""
    same: int
    """Of those, the pairs with identical completion text."""
    unpaired: int
    """Rows only one log answered (or answered with an error)."""
    differing: list[Difference] = field(default_factory=list)
    """The first `EXAMPLES` differing pairs, in suite order."""

    @property
    def different(self) -> int:
        return self.compared - self.same

    def line(self) -> str:
        share = f"{100 * self.same / self.compared:.1f}%" if self.compared else "n/a"
        text = f"{self.same}/{self.compared} identical ({share})"
        if self.unpaired:
            text += f", {self.unpaired} unpaired"
        return text


def _answered(rows: list[SampleRow]) -> dict[tuple[str, int], SampleRow]:
    return {(r.item_id, r.sample_index): r for r in rows if r.status == "ok"}


def agreement(a: Path, b: Path) -> Agreement:
    """How many of the (item, sample) pairs logged in both folders have identical text."""
    _, rows_a = load_sample_log(a)
    summary_b, rows_b = load_sample_log(b)
    answered_a, answered_b = _answered(rows_a), _answered(rows_b)
    order = {item: i for i, item in enumerate(summary_b.item_ids)}
    keys = sorted(answered_a.keys() & answered_b.keys(), key=lambda k: (order.get(k[0], -1), k))
    differing = [
        Difference(
            item,
            index,
            answered_a[item, index].completion or "",
            answered_b[item, index].completion or "",
        )
        for item, index in keys
        if answered_a[item, index].completion != answered_b[item, index].completion
    ]
    unpaired = len(answered_a.keys() ^ answered_b.keys())
    return Agreement(len(keys), len(keys) - len(differing), unpaired, differing[:EXAMPLES])
