"""Duplicate removal: exact on a canonical key, near-duplicate by MinHash LSH.

Exact: the key is sha256(source + NUL + normalized prompt) (`text.normalized_prompt`); the
first row with a key is kept, later ones are removed naming the row they duplicate.

Near-duplicates: MinHash LSH (Broder 1997; Leskovec, Rajaraman & Ullman, *Mining of Massive
Datasets*, ch. 3) over the set of token 5-gram shingles of a row's whole text, at Jaccard
threshold 0.8 by default. Token shingles, not character shingles, on purpose: "what is
37 + 45 ?" and "what is 37 + 46 ?" are different problems and must not collide. Texts shorter
than the shingle size are one shingle.

- **Signatures: rensa** (Rust; full-set R-MinHash, `RMinHash.digest_matrix_from_token_byte_sets`,
  32-bit slots), one call per chunk of rows. Seeded by `LshParams.seed`: a fixed seed gives
  the same signature for the same shingle set in every process (tokens are hashed with FxHash,
  not Python's salted `hash`, and the full-set sketch ignores token order), so the Ray
  executor's per-chunk signatures equal the local build's (tests/data/test_dedup.py checks
  both). rensa's algorithm version is part of that (0.5 is version 2; earlier releases give
  other signatures), so the corpus provenance records it (`sketch_info`).
- **Banding: ours** (`lsh_duplicates`): rows are visited in order and a row is removed when it
  shares a band bucket with a row already kept (keep-first; removed.jsonl names that row,
  while rensa's `RMinHashDeduplicator` returns keep flags only and adds its own similarity
  check). The bands × rows split minimizes the equally weighted false-positive and
  false-negative areas of the LSH S-curve at the threshold (datasketch's `_optimal_param`
  rule; `optimal_bands` integrates exactly by Gauss-Legendre quadrature and picks datasketch's
  split at every threshold 0.05-0.95 and num_perm 16-256 checked).

Why rensa and not our own numpy MinHash (datasketch's permutations, one matrix product-and-min
per chunk, used until issue 19): measured by benchmarks/minhash_peers.py on 20,000 texts at
threshold 0.8 with 128 permutations and the same bands, rensa's sketch + our banding ran at
6,817 texts/s against our numpy code's 3,446 (1.98×; 2-4× in other runs), with candidate-pair
recall 0.658 against 0.655 and precision 0.692 against 0.662 (against exact Jaccard); over
six sketch seeds on those texts, mean recall 0.641 for both at Jaccard ≥ 0.8 and 0.989 against
0.988 at ≥ 0.9, precision 0.691 against 0.670. As good and faster, so the library replaced
ours (the numpy code lives on in that benchmark as the reference). datasketch (a `MinHash`
per row + `MinHashLSH`) ran at 0.37× our numpy code with identical removals: slower than
both, it is only a benchmark peer.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

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
    """MinHash LSH settings; bands × rows ≤ num_perm, chosen by `optimal_bands`."""

    threshold: float = 0.8
    num_perm: int = 128
    shingle_size: int = 5
    seed: int = 1

    def bands(self) -> tuple[int, int]:
        return optimal_bands(self.threshold, self.num_perm)


@cache
def optimal_bands(threshold: float, num_perm: int) -> tuple[int, int]:
    """(bands, rows) with bands × rows ≤ num_perm minimizing ½ P(false positive) + ½ P(false
    negative): the areas under the LSH S-curve 1 - (1 - s^r)^b below the threshold and above
    it under its complement (datasketch's `_optimal_param` rule). The integrands are
    polynomials of degree ≤ num_perm, so Gauss-Legendre with num_perm/2 + 8 nodes is exact."""
    x, w = np.polynomial.legendre.leggauss(num_perm // 2 + 8)
    pairs = [(b, r) for b in range(1, num_perm + 1) for r in range(1, num_perm // b + 1)]
    b = np.array([p[0] for p in pairs], dtype=float)[:, None]
    r = np.array([p[1] for p in pairs], dtype=float)[:, None]
    below = threshold / 2 * (x + 1)  # nodes on [0, threshold]
    above = threshold + (1 - threshold) / 2 * (x + 1)  # nodes on [threshold, 1]
    false_pos = threshold / 2 * ((1 - (1 - below[None] ** r) ** b) @ w)
    false_neg = (1 - threshold) / 2 * (((1 - above[None] ** r) ** b) @ w)
    return pairs[int(np.argmin(0.5 * false_pos + 0.5 * false_neg))]  # first of equal minima


def signatures(texts: Sequence[str], params: LshParams, chunk: int = 1 << 16) -> np.ndarray:
    """(len(texts), num_perm) uint32 rensa R-MinHash signatures of the texts' shingle sets,
    computed `chunk` texts per rensa call (bounding the shingle lists held at once)."""
    from rensa import RMinHash

    sig = np.empty((len(texts), params.num_perm), dtype=np.uint32)
    for start in range(0, len(texts), chunk):
        sets = [list(shingles(t, params.shingle_size)) for t in texts[start : start + chunk]]
        matrix = RMinHash.digest_matrix_from_token_byte_sets(sets, params.num_perm, params.seed)
        sig[start : start + len(sets)] = np.asarray(matrix.to_rows(), dtype=np.uint32)
    return sig


def sketch_info(params: LshParams) -> dict[str, object]:
    """What made the near-dup signatures, for provenance: removals are reproducible only with
    the same rensa algorithm version, seed and bands."""
    from importlib.metadata import version

    from rensa import RMinHash

    return {
        "sketch": "rensa R-MinHash",
        "rensa": version("rensa"),
        "algorithm_version": RMinHash.ALGORITHM_VERSION,
        "seed": params.seed,
        "bands": list(params.bands()),
    }


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
