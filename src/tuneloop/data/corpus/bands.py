"""Difficulty bands: tag corpus rows by the pass rate of their prompt in a sample log.

Run `tuneloop eval` of the current model on the training prompts (as a suite), then name
that sample log in the corpus config (`bands.sample_log`). Each suite item's pass rate is the
mean of its sample values (missing and errors count as 0, as everywhere in tuneloop); rows are
matched to items by normalized prompt (`tuneloop.data.text.normalized_prompt` of the row's
user turns vs the item's `item_prompt_text`). Bands, with edges (lo, hi) = (0.2, 0.8) by
default: `hard` p ≤ lo, `easy` p ≥ hi, `medium` in between, `unknown` when the prompt is not in
the log. Keeping only some bands is the corpus config's choice (e.g. GRPO-style curricula keep
prompts the model sometimes but not always solves).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from tuneloop.data.text import tokens
from tuneloop.errors import InputError
from tuneloop.samplelog import load_sample_log
from tuneloop.suite import item_prompt_text, load_suite

BANDS = ("hard", "medium", "easy", "unknown")


def band_of(rate: float | None, lo: float = 0.2, hi: float = 0.8) -> str:
    """The band of one pass rate (None → unknown)."""
    if rate is None:
        return "unknown"
    if rate <= lo:
        return "hard"
    return "easy" if rate >= hi else "medium"


def prompt_pass_rates(sample_log: Path, suite_path: Path | None = None) -> dict[str, float]:
    """normalized prompt → pass rate, from a sample-log folder and the suite it evaluated."""
    summary, rows = load_sample_log(sample_log)
    path = Path(suite_path or summary.suite_path)
    if not path.is_file():
        raise InputError(
            f"{sample_log}: its suite {path} is not found; set bands.suite in the corpus config"
        )
    suite = load_suite(path)
    if suite.revision != summary.suite_revision:
        raise InputError(
            f"{sample_log}: evaluated suite revision {summary.suite_revision[:12]}, but {path} "
            f"is revision {suite.revision[:12]}; re-run `tuneloop eval` on it"
        )
    values: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        values[row.item_id].append(row.value)
    rates: dict[str, float] = {}
    for item in suite.items:
        if item.id in values:
            vals = values[item.id]
            rates[" ".join(tokens(item_prompt_text(item)))] = sum(vals) / len(vals)
    return rates
