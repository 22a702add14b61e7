"""Each training row's token length, and what truncation at `train.max_length` drops from it.

Nothing is packed (`packing=False`: one row a sequence), so truncation is the only thing that
changes a row's tokens, and it is silent in the libraries: a long row simply loses its tail
(SFT: our tokenizer call keeps the first `max_length` tokens; DPO: TRL's `keep_start`, the only
mode it supports). A user whose real conversations exceed the limit would train on cut replies
without knowing. `row_lengths` renders every row as its method does and counts; the training
run writes one line per row to `lengths.jsonl` beside the adapter
(`{"row": "data.jsonl:3", "tokens": 611, "kept": 512, "truncated": 99}`), adds the totals to
`train_settings.json` and prints one line when any row was cut.

Counted for the methods that truncate: `sft` (the rendered conversation) and `dpo` (prompt plus
the longer reply). GRPO prompts are not truncated (TRL 1.x has no prompt limit) and its
completions are capped at generation by `grpo.max_completion_length`, which its per-step metrics
report; the composite objective's replay pairs are cut by `preference.tokenize_pairs`, which
follows the same rule as DPO but is not counted here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

from tuneloop.records import atomic_write_text
from tuneloop.train.data import Row, dpo_rows, sft_rows

LENGTHS_FILE = "lengths.jsonl"
COUNTED_METHODS = frozenset({"sft", "dpo"})


class RowLength(NamedTuple):
    row: str
    """`file:line` of the training row."""
    tokens: int
    """Its tokens as the method renders it."""
    kept: int
    """What `max_length` leaves of them."""


class LengthSummary(NamedTuple):
    max_length: int
    rows: int
    truncated_rows: int
    truncated_tokens: int
    longest: int

    def line(self, method: str) -> str | None:
        """One line for the user when rows were cut, else None."""
        if not self.truncated_rows:
            return None
        return (
            f"{method}: {self.truncated_rows} of {self.rows} rows longer than train.max_length "
            f"{self.max_length} were truncated ({self.truncated_tokens} tokens dropped; longest "
            f"{self.longest}); per row in {LENGTHS_FILE}"
        )


def row_lengths(tokenizer: Any, rows: list[Row], method: str, max_length: int) -> list[RowLength]:
    """Every row's length as `method` renders it; [] for a method that does not truncate."""
    if method == "sft":
        counts = [_sft_tokens(tokenizer, r) for r in sft_rows(rows)]
    elif method == "dpo":
        counts = [_dpo_tokens(tokenizer, r) for r in dpo_rows(rows)]
    else:
        return []
    return [RowLength(r.where, n, min(n, max_length)) for r, n in zip(rows, counts, strict=True)]


def summarize(lengths: list[RowLength], max_length: int) -> LengthSummary:
    cut = [x for x in lengths if x.kept < x.tokens]
    return LengthSummary(
        max_length=max_length,
        rows=len(lengths),
        truncated_rows=len(cut),
        truncated_tokens=sum(x.tokens - x.kept for x in cut),
        longest=max((x.tokens for x in lengths), default=0),
    )


def write_lengths(folder: Path, lengths: list[RowLength]) -> None:
    lines = (json.dumps({**x._asdict(), "truncated": x.tokens - x.kept}) + "\n" for x in lengths)
    atomic_write_text(Path(folder) / LENGTHS_FILE, "".join(lines))


def _sft_tokens(tokenizer: Any, row: dict[str, Any]) -> int:
    from tuneloop.train.methods.sft import assistant_spans

    full, _ = assistant_spans(tokenizer, row["messages"], row.get("tools"))
    return len(tokenizer(full, add_special_tokens=False)["input_ids"])


def _dpo_tokens(tokenizer: Any, row: dict[str, Any]) -> int:
    def rendered(messages: list[dict[str, Any]]) -> int:
        text = tokenizer.apply_chat_template(messages, tokenize=False)
        return len(tokenizer(str(text), add_special_tokens=False)["input_ids"])

    return max(rendered([*row["prompt"], *row[k]]) for k in ("chosen", "rejected"))
