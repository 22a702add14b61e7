"""`tuneloop corpus stats FILE`: what is in a corpus JSONL.

Rows, messages (turns), tool calls, length percentiles in characters — and in tokens with
`--tokenizer DIR` (a Hugging Face tokenizer folder; the text is the conversation's message
texts joined by newlines, without a chat template, so numbers compare across models) — rows
per source, and the share of rows whose last message is an assistant message (what SFT
learns from). Reads SFT rows (`messages`) and preference rows (`prompt` + `chosen`, counted
as the chosen conversation). Percentiles are nearest-rank (no interpolation).
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from typing import Any

from tuneloop.data.text import conversation_text
from tuneloop.errors import InputError
from tuneloop.records import iter_jsonl

PERCENTILES = (50, 90, 99, 100)


def percentiles(values: list[int], qs: tuple[int, ...] = PERCENTILES) -> dict[str, int]:
    """Nearest-rank percentiles: the smallest value with at least q% of values ≤ it."""
    if not values:
        return {}
    ordered = sorted(values)
    return {f"p{q}": ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)] for q in qs}


def _conversation(row: dict[str, Any], where: str) -> list[dict[str, Any]]:
    if isinstance(row.get("messages"), list):
        return row["messages"]
    if isinstance(row.get("prompt"), list) and isinstance(row.get("chosen"), list):
        return [*row["prompt"], *row["chosen"]]
    raise InputError(f"{where}: expected 'messages' (SFT) or 'prompt' + 'chosen' (preference)")


def corpus_stats(path: Path, tokenizer: Path | None = None) -> dict[str, Any]:
    """Statistics of a corpus JSONL as a JSON-ready dict."""
    texts: list[str] = []
    turns = tool_calls = final_assistant = 0
    sources: Counter[str] = Counter()
    for lineno, row in iter_jsonl(path):
        messages = _conversation(row, f"{path}:{lineno}")
        texts.append(conversation_text(messages))
        turns += len(messages)
        tool_calls += sum(len(m.get("tool_calls") or []) for m in messages)
        final_assistant += bool(messages) and messages[-1].get("role") == "assistant"
        sources[str(row.get("source", "(none)"))] += 1
    n = len(texts)
    out: dict[str, Any] = {
        "file": str(path),
        "rows": n,
        "turns": turns,
        "turns_per_row": turns / n if n else 0.0,
        "tool_calls": tool_calls,
        "chars": percentiles([len(t) for t in texts]),
        "sources": dict(sources.most_common()),
        "final_assistant_share": final_assistant / n if n else 0.0,
    }
    if tokenizer is not None:
        out["tokens"] = percentiles(_token_counts(texts, tokenizer))
    return out


def _token_counts(texts: list[str], tokenizer: Path) -> list[int]:
    """Token counts without special tokens. A folder with `tokenizer.json` is read with the
    light `tokenizers` library; other folders go through transformers' AutoTokenizer."""
    folder = Path(tokenizer)
    if not folder.is_dir():
        raise InputError(f"--tokenizer {folder}: not a folder (expected a Hugging Face tokenizer)")
    if (folder / "tokenizer.json").is_file():
        from tokenizers import Tokenizer

        fast = Tokenizer.from_file(str(folder / "tokenizer.json"))
        return [len(e.ids) for e in fast.encode_batch(texts, add_special_tokens=False)]
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(folder))
    return [len(ids) for ids in tok(texts, add_special_tokens=False)["input_ids"]]
