"""The decontamination rule: which training rows contain an evaluation item.

The rule (GPT-3, Brown et al. 2020, app. C; lm-eval-harness `decontamination`): a row is
contaminated by a suite item when they share a normalized token n-gram, n = 13 by default.
Both texts are normalized and tokenized by `tuneloop.data.text.tokens`; the item's text is
its prompt (`tuneloop.suite.item_prompt_text`, never its answer), the row's text is the whole
conversation (every message, tool calls included).

Deliberate deviations, for short prompts (an arithmetic item is ~6 tokens, so it has no
13-gram at all and the textbook rule would never fire):
- an item with L < n tokens uses m = min(n, L): the row is contaminated when the item's
  whole token sequence appears in it contiguously;
- an item with fewer than `min_tokens` tokens (default 4) is matched only by whole-prompt
  exact match, since a 1-3 token window would remove rows for sharing a common phrase;
- whole-prompt exact match — the row's normalized prompt (its user turns) equals the item's —
  is checked for every item, whatever its length.
Every removal names the suite, the item ids and the rule (`exact_prompt` or `ngram_<m>`).
With `number_words` (the corpus default), both sides have their English number words turned
into digits first (`numwords.words_to_digits`): "thirty-eight plus five" matches "38 plus 5",
which the recall audit (`audit.py`) showed the plain rule never catches.

`find_contaminated` is the fast path: all rows are tokenized at once into 64-bit token hashes
(`fasttok.token_hashes`, same tokens as `text.tokens`), every m-gram window of the whole
corpus is hashed by a vectorized polynomial over those, and the windows are probed against the
suite's window hashes through a bitmap filter; whole prompts are compared by span hashes
(taken from the text's own tokens when the text starts with the prompt, the common case).
`find_contaminated_reference` is the same rule in plain Python (tuple n-grams in dicts) — the
tests (hypothesis, non-ASCII included) and `benchmarks/corpus.py` check that both remove
exactly the same rows; the fast path differs only on a 64-bit hash collision.
Measured (benchmarks/corpus.py, 100k rows, 2 shared CPU cores): 4.6-7.5x the reference, bounded
by tokenization, which both must do.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from tuneloop.data.decontam.fasttok import span_hashes, token_hashes
from tuneloop.data.decontam.numwords import words_to_digits
from tuneloop.data.text import tokens

_MULT = np.uint64(0x9E3779B97F4A7C15)


@dataclass(frozen=True)
class RowText:
    """What decontamination looks at in one row."""

    text: str
    """The whole conversation's text."""
    prompt: str
    """The row's prompt (user turns), for whole-prompt exact match."""


@dataclass
class SuiteIndex:
    """One suite's items, indexed for matching."""

    name: str
    n: int
    min_tokens: int
    exact: dict[str, list[str]] = field(default_factory=dict)
    """normalized prompt → item ids."""
    grams: dict[int, dict[tuple[str, ...], list[str]]] = field(default_factory=dict)
    """m → {token m-gram → item ids}."""
    texts: list[tuple[str, str]] = field(default_factory=list)
    """(item id, prompt text) as matched (number words already digits), for the fast path."""
    number_words: bool = False
    """Turn English number words into digits on both sides before matching."""

    def keyed(self, rows: Sequence[RowText]) -> Sequence[RowText]:
        """Rows as this index matches them (number words → digits when set)."""
        if not self.number_words:
            return rows
        return [RowText(words_to_digits(r.text), words_to_digits(r.prompt)) for r in rows]


def build_index(
    name: str,
    items: Sequence[tuple[str, str]],
    n: int = 13,
    min_tokens: int = 4,
    *,
    number_words: bool = False,
) -> SuiteIndex:
    """Index (item id, prompt text) pairs for the rule above."""
    if number_words:
        items = [(item_id, words_to_digits(text)) for item_id, text in items]
    index = SuiteIndex(
        name=name, n=n, min_tokens=min_tokens, texts=list(items), number_words=number_words
    )
    for item_id, text in items:
        toks = tokens(text)
        index.exact.setdefault(" ".join(toks), []).append(item_id)
        if len(toks) < min_tokens:
            continue
        m = min(n, len(toks))
        bucket = index.grams.setdefault(m, {})
        for i in range(len(toks) - m + 1):
            ids = bucket.setdefault(tuple(toks[i : i + m]), [])
            if item_id not in ids:
                ids.append(item_id)
    return index


Hits = dict[int, dict[str, set[str]]]
"""row index → {rule: item ids}."""


def _exact_hits(rows: Sequence[RowText], index: SuiteIndex, hits: Hits) -> None:
    for r, row in enumerate(rows):
        ids = index.exact.get(" ".join(tokens(row.prompt)))
        if ids:
            hits.setdefault(r, {}).setdefault("exact_prompt", set()).update(ids)


def find_contaminated_reference(rows: Sequence[RowText], index: SuiteIndex) -> Hits:
    """The rule in plain Python: tuple m-grams of each row looked up in dicts."""
    rows = index.keyed(rows)
    hits: Hits = {}
    _exact_hits(rows, index, hits)
    for r, row in enumerate(rows):
        toks = tokens(row.text)
        for m, bucket in index.grams.items():
            for i in range(len(toks) - m + 1):
                ids = bucket.get(tuple(toks[i : i + m]))
                if ids:
                    hits.setdefault(r, {}).setdefault(f"ngram_{m}", set()).update(ids)
    return hits


def _gram_hashes(values: np.ndarray, m: int) -> np.ndarray:
    """Polynomial hash of every window of m consecutive values (uint64, wrapping)."""
    count = len(values) - m + 1
    if count <= 0:
        return np.empty(0, dtype=np.uint64)
    h = np.zeros(count, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for k in range(m):
            h = h * _MULT + values[k : k + count]
    return h


def _member(values: np.ndarray, keys: dict[int, list[str]]) -> np.ndarray:
    """Indices of values that are keys: a bitmap on the low 22 bits filters, a dict confirms.

    (np.isin loops over a small key set and binary search is cache-unfriendly; the bitmap is
    512 KiB and almost every value misses it.)
    """
    bitmap = np.zeros(1 << 22, dtype=bool)
    mask = np.uint64((1 << 22) - 1)
    bitmap[(np.fromiter(keys, dtype=np.uint64, count=len(keys)) & mask).astype(np.intp)] = True
    candidates = np.flatnonzero(bitmap[(values & mask).astype(np.intp)])
    return np.array(
        [
            i
            for i, v in zip(candidates.tolist(), values[candidates].tolist(), strict=True)
            if v in keys
        ],
        dtype=np.intp,
    )


def _per_text(text_of: np.ndarray, n_texts: int) -> tuple[np.ndarray, np.ndarray]:
    """(start, end) token offsets of each text in the flat token arrays."""
    ends = np.cumsum(np.bincount(text_of, minlength=n_texts))
    return ends - np.bincount(text_of, minlength=n_texts), ends


def _whole_hashes(hashes: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """One hash per text over its token hashes."""
    return span_hashes(hashes, starts, ends)


def _suite_keys(index: SuiteIndex) -> tuple[dict[int, list[str]], dict[int, dict[int, list[str]]]]:
    """The suite side, hashed exactly as rows are: whole prompts and m-gram windows."""
    ids = [item_id for item_id, _ in index.texts]
    hashes, text_of, _ = token_hashes([t for _, t in index.texts])
    starts, ends = _per_text(text_of, len(ids))
    exact: dict[int, list[str]] = {}
    for item_id, h in zip(ids, _whole_hashes(hashes, starts, ends).tolist(), strict=True):
        exact.setdefault(h, []).append(item_id)
    lengths = ends - starts
    sizes = np.where(lengths >= index.min_tokens, np.minimum(index.n, lengths), 0)
    grams: dict[int, dict[int, list[str]]] = {}
    for m in sorted(set(sizes.tolist()) - {0}):
        # Every window of the flat token array that lies inside one item whose window size is m.
        windows = _gram_hashes(hashes, m)
        owner = text_of[: len(windows)]
        inside = (owner == text_of[m - 1 : m - 1 + len(windows)]) & (sizes[owner] == m)
        bucket = grams.setdefault(m, {})
        for pos in np.flatnonzero(inside).tolist():
            item_ids = bucket.setdefault(int(windows[pos]), [])
            if ids[owner[pos]] not in item_ids:
                item_ids.append(ids[owner[pos]])
    return exact, grams


def _prompt_hashes(
    prompts: list[str],
    texts: list[str],
    t_hashes: np.ndarray,
    row_of: np.ndarray,
    newlines: np.ndarray,
) -> np.ndarray:
    """The whole-prompt hash of every row, reusing the text's tokens where we can.

    Usually the text starts with the prompt followed by a newline (a single user turn first):
    then the prompt's tokens are the text's tokens with at most `prompt.count("\\n")` newlines
    before them (a token never holds a newline, and NFKC never joins across one). Other rows'
    prompts are tokenized on their own.
    """
    count = len(prompts)
    prefix = [t == p or t.startswith(p + "\n") for p, t in zip(prompts, texts, strict=True)]
    lines = np.array([p.count("\n") for p in prompts], dtype=np.int64)
    lines[~np.array(prefix, dtype=bool)] = -1  # -1: no token of the text is in the prompt
    starts, _ = _per_text(row_of, count)
    inside = newlines <= lines[row_of]
    whole = _whole_hashes(t_hashes, starts, starts + np.bincount(row_of[inside], minlength=count))
    others = [r for r, ok in enumerate(prefix) if not ok]
    if others:
        p_hashes, p_of, _ = token_hashes([prompts[r] for r in others])
        whole[others] = _whole_hashes(p_hashes, *_per_text(p_of, len(others)))
    return whole


def find_contaminated(rows: Sequence[RowText], index: SuiteIndex, *, keyed: bool = False) -> Hits:
    """The same rule as `find_contaminated_reference`, vectorized (see module docstring).
    `keyed`: the rows already went through `index.keyed` (one pass for many suites)."""
    hits: Hits = {}
    if not rows:
        return hits
    rows = rows if keyed else index.keyed(rows)
    exact, grams = _suite_keys(index)
    texts = [row.text for row in rows]
    t_hashes, row_of, newlines = token_hashes(texts)
    whole = _prompt_hashes([row.prompt for row in rows], texts, t_hashes, row_of, newlines)
    for r in _member(whole, exact).tolist():
        hits.setdefault(r, {}).setdefault("exact_prompt", set()).update(exact[int(whole[r])])
    for m, bucket in grams.items():
        row_grams = _gram_hashes(t_hashes, m)
        for pos in _member(row_grams, bucket).tolist():
            r = int(row_of[pos])
            if row_of[pos + m - 1] != r:  # a window spanning two rows is not a match
                continue
            hits.setdefault(r, {}).setdefault(f"ngram_{m}", set()).update(
                bucket[int(row_grams[pos])]
            )
    return hits


def group_hits(hits: Hits) -> dict[int, list[tuple[str, list[str]]]]:
    """row → sorted [(rule, sorted item ids)] for the report."""
    out: dict[int, list[tuple[str, list[str]]]] = defaultdict(list)
    for r, rules in sorted(hits.items()):
        for rule, ids in sorted(rules.items()):
            out[r].append((rule, sorted(ids)))
    return dict(out)
