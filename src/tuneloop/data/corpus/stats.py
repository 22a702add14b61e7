"""`tuneloop corpus stats FILE`: what is in a corpus JSONL.

Rows, messages (turns), tool calls, length percentiles in characters — and in tokens with
`--tokenizer DIR` (a Hugging Face tokenizer folder; the text is the conversation's message
texts joined by newlines, without a chat template, so numbers compare across models) — rows
per source, and the share of rows whose last message is an assistant message (what SFT
learns from). Reads SFT rows (`messages`) and preference rows (`prompt` + `chosen`, counted
as the chosen conversation). Percentiles are nearest-rank (no interpolation).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tuneloop.data.text import conversation_text
from tuneloop.errors import InputError

PERCENTILES = (50, 90, 99, 100)


def percentiles(values: list[int], qs: tuple[int, ...] = PERCENTILES) -> dict[str, int]:
    """Nearest-rank percentiles: the smallest value with at least q% of values ≤ it."""
    if not values:
        return {}
    ordered = sorted(values)
    return {f"p{q}": ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)] for q in qs}


def _conversation(row: dict[str, Any], where: str) -> list[dict[str, Any]]:
    if isinstance(row.get("messages"), list):
        messages = row["messages"]
    elif isinstance(row.get("prompt"), list) and isinstance(row.get("chosen"), list):
        messages = [*row["prompt"], *row["chosen"]]
    else:
        raise InputError(f"{where}: expected 'messages' (SFT) or 'prompt' + 'chosen' (preference)")
    if not all(isinstance(m, dict) for m in messages):
        raise InputError(f"{where}: every message must be a JSON object")
    return messages


def _rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line, object) per non-blank line; every kind of bad file is an InputError naming
    file and line: not readable, binary (a NUL byte, or bytes that are not UTF-8 — the usual
    sign of a wrong file, say a checkpoint given for a corpus), invalid or absurdly deep JSON.
    Read as bytes, one line at a time, so the error names the line and a large corpus is
    never held in memory twice."""
    try:
        fh = path.open("rb")
    except FileNotFoundError:
        raise InputError(f"{path}: file not found (run `tuneloop corpus build`)") from None
    except OSError as err:
        what = "is a folder" if path.is_dir() else f"cannot be read ({err.strerror})"
        raise InputError(f"{path}: {what}; expected a corpus JSONL file") from None
    with fh:
        for lineno, raw in enumerate(fh, start=1):
            where = f"{path}:{lineno}"
            try:
                if b"\0" in raw:
                    raise UnicodeError
                line = raw.decode("utf-8-sig" if lineno == 1 else "utf-8")  # a BOM is no text
            except UnicodeError:
                raise InputError(
                    f"{where}: binary data, not UTF-8 JSON text; expected a corpus JSONL file"
                ) from None
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise InputError(f"{where}: invalid JSON: {err.msg}") from None
            except RecursionError:
                raise InputError(f"{where}: JSON nested too deeply to be a corpus row") from None
            if not isinstance(row, dict):
                hint = (
                    " (a JSON array: write one row per line, JSONL)"
                    if isinstance(row, list)
                    else ""
                )
                raise InputError(f"{where}: expected a JSON object{hint}")
            yield lineno, row


def corpus_stats(path: Path, tokenizer: Path | None = None) -> dict[str, Any]:
    """Statistics of a corpus JSONL as a JSON-ready dict."""
    texts: list[str] = []
    turns = tool_calls = final_assistant = 0
    sources: Counter[str] = Counter()
    for lineno, row in _rows(Path(path)):
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
