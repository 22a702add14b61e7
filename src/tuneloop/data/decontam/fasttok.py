"""Vectorized tokenization to 64-bit token hashes, with exactly the tokens of `text.tokens`
(`tuneloop.data.text`).

Used by decontamination, where tokenizing every row with a regex was most of the time.
`text.tokens` is `\\w+|[^\\w\\s]` over NFKC-lower-cased text; whether a code point is a word
character, whitespace or punctuation does not depend on its neighbours, so the classes of all
code points are looked up at once (ASCII from a table built with that same regex; the few
distinct non-ASCII code points one by one, also with the regex). A token starts at a word
character after a non-word one or at any punctuation character, and ends after the last
character of its word run (or after its one punctuation character); starts and ends pair up
in order because tokens never overlap.

A token's hash is computed from its UTF-8 bytes (`_pack_hashes`: up to 16 bytes read as two
machine words and mixed, blake2b beyond), so only the token starts cost work, not every
character. A text's whole token sequence is hashed as a polynomial mod 2^64 with an odd base
B: from one prefix-sum array P[i] = Σ_{j<i} h_j·B^j, the hash of any span is
(P[e] − P[s])·B^−s, because odd numbers are invertible mod 2^64. Equal tokens give equal
hashes; different ones collide with probability ~2^−64 per pair, the one way this can differ
from the string rule (the tests compare both on random input, non-ASCII included).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Sequence

import numpy as np

SEP = "\x00"
CHUNK_TEXTS = 20_000
"""Texts tokenized per numpy pass (bounds the size of the temporary arrays)."""
_B = 0x100000001B3
_B_INV = pow(_B, -1, 1 << 64)
_WORD, _SPACE, _PUNCT = 1, 0, 2
_W, _S = re.compile(r"\w"), re.compile(r"\s")
_ASCII = np.array(
    [_WORD if _W.match(chr(c)) else _SPACE if _S.match(chr(c)) else _PUNCT for c in range(128)],
    dtype=np.uint8,
)
_powers: dict[int, np.ndarray] = {}


def _power_table(base: int, n: int) -> np.ndarray:
    """base^0 .. base^(n-1) mod 2^64, cached and grown by doubling."""
    table = _powers.get(base)
    if table is None or len(table) < n:
        size = max(n, 2 * len(table) if table is not None else 1 << 16)
        table = np.full(size, base, dtype=np.uint64)
        table[0] = 1
        with np.errstate(over="ignore"):
            table = np.cumprod(table, dtype=np.uint64)  # wraps mod 2^64, as intended
        _powers[base] = table
    return table[:n]


def span_hashes(values: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Polynomial hash of values[s:e] for every (s, e); an empty span hashes to 0."""
    with np.errstate(over="ignore"):
        prefix = np.zeros(len(values) + 1, dtype=np.uint64)
        np.cumsum(values * _power_table(_B, len(values)), out=prefix[1:])
        return (prefix[ends] - prefix[starts]) * _power_table(_B_INV, len(values) + 1)[starts]


def _classes(cps: np.ndarray) -> np.ndarray:
    if cps.max(initial=0) < 128:
        return _ASCII[cps]
    cls = np.empty(len(cps), dtype=np.uint8)
    ascii_ = cps < 128
    cls[ascii_] = _ASCII[cps[ascii_]]
    uniq, inv = np.unique(cps[~ascii_], return_inverse=True)
    table = np.array(
        [
            _WORD if _W.match(chr(c)) else _SPACE if _S.match(chr(c)) else _PUNCT
            for c in uniq.tolist()
        ],
        dtype=np.uint8,
    )
    cls[~ascii_] = table[inv]
    return cls


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64 finalizer: a fixed bijection of uint64 that spreads nearby values apart."""
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


_LOW_MASK = np.array([(1 << (8 * min(n, 8))) - 1 for n in range(17)], dtype=np.uint64)
_HIGH_MASK = np.array([(1 << (8 * max(n - 8, 0))) - 1 for n in range(17)], dtype=np.uint64)


def _pack_hashes(raw: bytes, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Hash of each token's UTF-8 bytes raw[s:e].

    A token of ≤ 16 bytes (nearly all) is read as two little-endian uint64 words (through an
    unaligned uint64 view with a one-byte stride, so word i starts at byte i), masked to its
    length and mixed with it — no per-character arithmetic. Longer tokens are hashed with
    blake2b in Python (they are rare).
    """
    buf = raw + bytes(24)
    words = np.ndarray((len(raw) + 16,), dtype="<u8", buffer=buf, strides=(1,))
    length = ends - starts
    short = np.minimum(length, 16)
    low = words[starts] & _LOW_MASK[short]
    high = words[starts + 8] & _HIGH_MASK[short]
    with np.errstate(over="ignore"):
        key = low ^ (length.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15))
        out = _mix(key ^ (high * np.uint64(0xD6E8FEB86659FD93)))
    for i in np.flatnonzero(length > 16).tolist():
        digest = hashlib.blake2b(raw[starts[i] : ends[i]], digest_size=8).digest()
        out[i] = int.from_bytes(digest, "little")
    return out


Tokens = tuple[np.ndarray, np.ndarray, np.ndarray]
"""(token hashes, index of each token's text, newlines in its text before each token)."""


def _empty() -> Tokens:
    return np.empty(0, dtype=np.uint64), np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)


def _chunk(texts: Sequence[str]) -> Tokens:
    joined = SEP.join(texts)
    if joined.count(SEP) != max(len(texts) - 1, 0):  # a text holds the separator: blank it
        joined = SEP.join(t.replace(SEP, " ") for t in texts)
    joined = unicodedata.normalize("NFKC", joined).lower()
    if not joined:
        return _empty()
    if joined.isascii():  # the common case: bytes are code points
        raw = joined.encode("ascii")
        cps = np.frombuffer(raw, dtype=np.uint8)
        cls = _ASCII[cps]
        offsets = None
    else:
        raw = joined.encode("utf-8")
        cps = np.frombuffer(joined.encode("utf-32-le"), dtype=np.uint32)
        cls = _classes(cps)
        nbytes = 1 + (cps >= 0x80).astype(np.int64) + (cps >= 0x800) + (cps >= 0x10000)
        offsets = np.zeros(len(cps) + 1, dtype=np.int64)
        np.cumsum(nbytes, out=offsets[1:])
    word = cls == _WORD
    punct = cls == _PUNCT
    first = punct.copy()  # a token starts at punctuation or at a word char after a non-word
    first[0] |= word[0]
    first[1:] |= word[1:] & ~word[:-1]
    last = punct  # ... and ends at punctuation or at a word char before a non-word
    last[:-1] |= word[:-1] & ~word[1:]
    last[-1] |= word[-1]
    starts = np.flatnonzero(first)
    ends = np.flatnonzero(last) + 1
    is_sep = cps[starts] == 0
    # "\n" before each token, from the chunk start (newlines are few: search, don't cumsum)
    newlines = np.searchsorted(np.flatnonzero(cps == 10), starts)
    text_of = np.cumsum(is_sep)
    base = np.r_[0, newlines[is_sep]]  # ... and before each text's start
    if offsets is not None:
        starts, ends = offsets[starts], offsets[ends]
    hashes = _pack_hashes(raw, starts, ends)
    keep = ~is_sep
    return hashes[keep], text_of[keep], newlines[keep] - base[text_of[keep]]


def token_hashes(texts: Sequence[str]) -> Tokens:
    """For all texts, in order: every token's hash, the index of its text, and how many
    newlines precede it in its text (tokens never contain one, so this locates line ends)."""
    parts: list[Tokens] = []
    for first in range(0, len(texts), CHUNK_TEXTS):
        h, of, nl = _chunk(texts[first : first + CHUNK_TEXTS])
        parts.append((h, of + first, nl))
    if not parts:
        return _empty()
    h, of, nl = (np.concatenate(col) for col in zip(*parts, strict=True))
    return h, of, nl
