"""Duplicate removal: exact on a canonical key, near-duplicate by MinHash LSH.

Exact: the key is sha256(source + NUL + normalized prompt) (`text.normalized_prompt`); the
first row with a key is kept, later ones are removed naming the row they duplicate.

Near-duplicates: MinHash LSH (Broder 1997; Leskovec, Rajaraman & Ullman, *Mining of Massive
Datasets*, ch. 3) over the set of token 5-gram shingles of a row's whole text, at Jaccard
threshold 0.8 by default. Rows are visited in order; a row is removed when it shares an LSH
band bucket with a row already kept — exactly the plain datasketch loop
(`if lsh.query(m): drop; else: lsh.insert(key, m)`), with datasketch's own permutations
(scheme affine32, sha1_hash32 of each shingle, seed 1) and its band/row choice, so the
removals are identical to that loop (tests/data/test_dedup.py and benchmarks/corpus.py check
this). What differs is speed: signatures for all rows are computed at once with numpy
(one matrix product-and-min per chunk instead of one datasketch object per row).
Token shingles, not character shingles, on purpose: "what is 37 + 45 ?" and
"what is 37 + 46 ?" are different problems and must not collide. Texts shorter than the
shingle size are one shingle.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tuneloop.data.text import tokens


def exact_key(source: str, normalized_prompt: str) -> str:
    """The exact-dedup key of a row."""
    return hashlib.sha256(f"{source}\0{normalized_prompt}".encode()).hexdigest()


def exact_duplicates(keys: Sequence[str]) -> dict[int, int]:
    """{index of a removed row: index of the first row with its key}."""
    first: dict[str, int] = {}
    removed: dict[int, int] = {}
    for i, key in enumerate(keys):
        if key in first:
            removed[i] = first[key]
        else:
            first[key] = i
    return removed


def shingles(text: str, size: int = 5) -> set[bytes]:
    """Token `size`-gram shingles of a text (the whole token list when it is shorter)."""
    toks = tokens(text)
    if len(toks) <= size:
        return {" ".join(toks).encode()}
    return {" ".join(toks[i : i + size]).encode() for i in range(len(toks) - size + 1)}


@dataclass(frozen=True)
class LshParams:
    """MinHash LSH settings; bands × rows ≤ num_perm, chosen by datasketch for `threshold`."""

    threshold: float = 0.8
    num_perm: int = 128
    shingle_size: int = 5
    seed: int = 1

    def bands(self) -> tuple[int, int]:
        from datasketch.lsh import _optimal_param

        return _optimal_param(self.threshold, self.num_perm, 0.5, 0.5)


def _fmix32(h: np.ndarray) -> np.ndarray:
    # MurmurHash3 32-bit finalizer, as datasketch applies before its affine32 permutations.
    h = h ^ (h >> np.uint32(16))
    h = h * np.uint32(0x85EBCA6B)
    h = h ^ (h >> np.uint32(13))
    h = h * np.uint32(0xC2B2AE35)
    return h ^ (h >> np.uint32(16))


def signatures(texts: Sequence[str], params: LshParams, chunk: int = 1 << 16) -> np.ndarray:
    """(len(texts), num_perm) uint32 MinHash signatures, equal to datasketch's MinHash."""
    from datasketch import MinHash

    a, b = MinHash(num_perm=params.num_perm, seed=params.seed).permutations
    hashes: list[int] = []
    doc_of: list[int] = []
    seen: dict[bytes, int] = {}  # shingles repeat across rows ("what is"): hash each once
    for i, text in enumerate(texts):
        for sh in shingles(text, params.shingle_size):
            h = seen.get(sh)
            if h is None:
                h = seen[sh] = struct.unpack("<I", hashlib.sha1(sh).digest()[:4])[0]
            hashes.append(h)
            doc_of.append(i)
    hv = _fmix32(np.asarray(hashes, dtype=np.uint32))
    docs = np.asarray(doc_of, dtype=np.int64)
    sig = np.full((len(texts), params.num_perm), np.iinfo(np.uint32).max, dtype=np.uint32)
    with np.errstate(over="ignore"):
        for start in range(0, len(hv), chunk):
            part = hv[start : start + chunk, None] * a[None, :] + b[None, :]  # wraps mod 2^32
            _min_into(sig, docs[start : start + chunk], part)
    return sig


def _min_into(sig: np.ndarray, docs: np.ndarray, part: np.ndarray) -> None:
    # docs is non-decreasing, so each document's rows are one contiguous run: reduceat per run.
    starts = np.flatnonzero(np.r_[True, docs[1:] != docs[:-1]])
    mins = np.minimum.reduceat(part, starts, axis=0)
    rows = docs[starts]
    sig[rows] = np.minimum(sig[rows], mins)


def near_duplicates(texts: Sequence[str], params: LshParams) -> dict[int, int]:
    """{index of a removed row: index of a kept earlier row it collided with}."""
    if not texts:
        return {}
    return lsh_duplicates(signatures(texts, params), params)


def lsh_duplicates(sig: np.ndarray, params: LshParams) -> dict[int, int]:
    """`near_duplicates` from the rows' signatures (computed elsewhere: the Ray executor
    computes them per row, where the rows are made): the banding pass, in row order."""
    n_bands, rows = params.bands()
    width = rows * 4
    raw = np.ascontiguousarray(sig[:, : n_bands * rows]).tobytes()
    stride = n_bands * width
    tables: list[dict[bytes, int]] = [{} for _ in range(n_bands)]
    removed: dict[int, int] = {}
    for i in range(len(sig)):
        base = i * stride
        keys = [raw[base + j * width : base + (j + 1) * width] for j in range(n_bands)]
        hit = next((t[k] for t, k in zip(tables, keys, strict=True) if k in t), None)
        if hit is not None:
            removed[i] = hit
            continue
        for t, k in zip(tables, keys, strict=True):
            t[k] = i
    return removed


def near_duplicates_datasketch(texts: Sequence[str], params: LshParams) -> dict[int, int]:
    """The plain datasketch loop (the reference `near_duplicates` must equal)."""
    from datasketch import MinHash, MinHashLSH

    lsh = MinHashLSH(threshold=params.threshold, num_perm=params.num_perm)
    removed: dict[int, int] = {}
    for i, text in enumerate(texts):
        m = MinHash(num_perm=params.num_perm, seed=params.seed)
        m.update_batch(list(shingles(text, params.shingle_size)))
        hits = lsh.query(m)
        if hits:
            removed[i] = min(hits)
        else:
            lsh.insert(i, m)
    return removed
