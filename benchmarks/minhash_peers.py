"""Benchmark tuneloop's MinHash (rensa) against `datasketch` and our former numpy MinHash.

Run: `.venv/bin/python benchmarks/minhash_peers.py [--n 20000] [--threshold 0.8]`.

Every method sees the same texts and the same shingles (`dedup.shingles`: token 5-grams, as the
corpus build uses) with 128 permutations, and is timed from the texts to the keep-first
removals (the corpus build's near-dup rule). Printed, measured in this run:

- throughput (texts/s) of: tuneloop's `dedup.signatures` (rensa's full-set R-MinHash,
  `RMinHash.digest_matrix_from_token_byte_sets`) + `dedup.lsh_duplicates` (our banding); the
  numpy MinHash tuneloop used until issue 19 (`numpy_signatures` below: datasketch's own
  permutations, one matrix product-and-min per chunk, bit-identical to datasketch's `MinHash`)
  in the same banding; the plain datasketch loop (`MinHash` per text,
  `MinHashLSH.query/insert`; it must remove exactly the rows the numpy path removes, and this
  run checks that); and rensa's own `RMinHashDeduplicator` (its LSH plus a check of each
  candidate's estimated similarity);
- quality against exact Jaccard (computed for every pair that shares a shingle): the
  candidate-pair recall of each sketch under the same LSH bands (`dedup.optimal_bands`), the
  candidates' precision, and, for the keep-first removals, the recall of rows that have an
  earlier row at Jaccard ≥ threshold and the rows removed without one.

Timings are the best of `--repeat` runs (the machine this was written on is shared).

The data: texts over a small vocabulary (support-chat-like), each new text followed at random
by copies with 1-6 words changed, so pair similarities spread across the threshold.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import struct
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from peers import require  # benchmarks/ is on sys.path when run

from tuneloop.data.dedup import LshParams, lsh_duplicates, shingles, signatures

WORDS = [
    "order", "refund", "shipping", "account", "password", "invoice", "delivery", "package",
    "address", "payment", "card", "return", "label", "warranty", "charge", "subscription",
    "cancel", "upgrade", "login", "email", "phone", "store",
]  # fmt: skip


def make_texts(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    out: list[str] = []
    while len(out) < n:
        base = [rng.choice(WORDS) for _ in range(rng.randint(20, 60))]
        out.append(" ".join(base))
        for _ in range(rng.choice([0, 0, 1, 2, 3])):
            words = list(base)
            for _ in range(rng.randint(1, 6)):
                words[rng.randrange(len(words))] = rng.choice(WORDS)
            out.append(" ".join(words))
    rng.shuffle(out)
    return out[:n]


def _fmix32(h: np.ndarray) -> np.ndarray:
    # MurmurHash3 32-bit finalizer, as datasketch applies before its affine32 permutations.
    h = h ^ (h >> np.uint32(16))
    h = h * np.uint32(0x85EBCA6B)
    h = h ^ (h >> np.uint32(13))
    h = h * np.uint32(0xC2B2AE35)
    return h ^ (h >> np.uint32(16))


def numpy_signatures(texts: Sequence[str], params: LshParams, chunk: int = 1 << 16) -> np.ndarray:
    """tuneloop's MinHash before issue 19: (len(texts), num_perm) uint32, equal to datasketch's
    `MinHash(num_perm, seed)` (affine32 permutations of sha1_hash32 of each shingle)."""
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
            part_docs = docs[start : start + chunk]
            # docs is non-decreasing: each document's rows are one contiguous run.
            starts = np.flatnonzero(np.r_[True, part_docs[1:] != part_docs[:-1]])
            rows = part_docs[starts]
            sig[rows] = np.minimum(sig[rows], np.minimum.reduceat(part, starts, axis=0))
    return sig


def near_duplicates_datasketch(texts: Sequence[str], params: LshParams) -> dict[int, int]:
    """The plain datasketch loop: `if lsh.query(m): drop; else: lsh.insert(i, m)`."""
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


def exact_pairs(sets: Sequence[set[bytes]]) -> dict[tuple[int, int], float]:
    """Exact Jaccard of every pair sharing at least one shingle (all others are 0)."""
    by_shingle: dict[bytes, list[int]] = defaultdict(list)
    for i, s in enumerate(sets):
        for sh in s:
            by_shingle[sh].append(i)
    shared: dict[tuple[int, int], int] = defaultdict(int)
    for docs in by_shingle.values():
        for a in range(len(docs)):
            for b in range(a + 1, len(docs)):
                shared[(docs[a], docs[b])] += 1
    return {(i, j): c / (len(sets[i]) + len(sets[j]) - c) for (i, j), c in shared.items()}


def candidate_pairs(sig: np.ndarray, params: LshParams) -> set[tuple[int, int]]:
    """Pairs sharing a bucket in any band (the LSH's candidates)."""
    n_bands, rows = params.bands()
    out: set[tuple[int, int]] = set()
    for band in range(n_bands):
        buckets: dict[bytes, list[int]] = defaultdict(list)
        part = np.ascontiguousarray(sig[:, band * rows : (band + 1) * rows])
        for i, row in enumerate(part):
            buckets[row.tobytes()].append(i)
        for docs in buckets.values():
            out.update(
                (docs[a], docs[b]) for a in range(len(docs)) for b in range(a + 1, len(docs))
            )
    return out


def timed(fn: Callable[[], Any], repeat: int = 1) -> tuple[Any, float]:
    """(result, best wall time of `repeat` runs): the best, as the machine may be shared."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return out, best


def tuneloop_rensa(texts: list[str], params: LshParams) -> tuple[np.ndarray, dict[int, int]]:
    sig = signatures(texts, params)
    return sig, lsh_duplicates(sig, params)


def old_numpy(texts: list[str], params: LshParams) -> tuple[np.ndarray, dict[int, int]]:
    sig = numpy_signatures(texts, params)
    return sig, lsh_duplicates(sig, params)


def rensa_dedup(texts: list[str], params: LshParams) -> dict[int, int]:
    from rensa import RMinHashDeduplicator

    dedup = RMinHashDeduplicator(threshold=params.threshold, num_perm=params.num_perm, use_lsh=True)
    pairs = (
        (str(i), [s.decode() for s in shingles(t, params.shingle_size)])
        for i, t in enumerate(texts)
    )
    keep = dedup.add_pairs(pairs)
    return {i: -1 for i, k in enumerate(keep) if not k}


def removal_quality(
    removed: dict[int, int], truth: dict[tuple[int, int], float], t: float, n: int
) -> tuple[float, int, int]:
    """(recall of rows with an earlier row at J ≥ t, such rows, rows removed without one)."""
    should = {j for (i, j), jac in truth.items() if jac >= t}  # pairs are (earlier, later)
    got = set(removed)
    return len(got & should) / max(1, len(should)), len(should), len(got - should)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--threshold", type=float, default=0.8)
    parser.add_argument("--repeat", type=int, default=3, help="timed runs; the best is kept")
    args = parser.parse_args()
    require("datasketch", "rensa")
    params = LshParams(threshold=args.threshold)
    texts = make_texts(args.n)
    sets = [shingles(t, params.shingle_size) for t in texts]
    truth, t_truth = timed(lambda: exact_pairs(sets))
    true_pairs = {p for p, j in truth.items() if j >= args.threshold}
    high_pairs = {p for p, j in truth.items() if j >= 0.9}
    print(
        f"{args.n:,} texts; {len(true_pairs):,} pairs at exact Jaccard ≥ {args.threshold} "
        f"({len(high_pairs):,} at ≥ 0.9; exact Jaccard of {len(truth):,} pairs sharing a "
        f"shingle in {t_truth:.1f} s); "
        f"LSH bands × rows = {params.bands()}"
    )
    tuneloop_rensa(texts[:50], params), old_numpy(texts[:50], params)  # imports before clocks
    k = args.repeat
    (sig_r, rem_r), t_r = timed(lambda: tuneloop_rensa(texts, params), k)
    (sig_n, rem_n), t_n = timed(lambda: old_numpy(texts, params), k)
    rem_d, t_d = timed(lambda: near_duplicates_datasketch(texts, params), k)
    rem_rd, t_rd = timed(lambda: rensa_dedup(texts, params), k)
    assert rem_n.keys() == rem_d.keys(), "old numpy path and datasketch loop must agree"
    rows = [
        ("tuneloop: rensa R-MinHash + bands", t_r, sig_r, rem_r),
        ("old numpy MinHash + bands", t_n, sig_n, rem_n),
        ("datasketch loop", t_d, sig_n, rem_d),  # the numpy signatures, bit for bit
        ("rensa RMinHashDeduplicator", t_rd, None, rem_rd),
    ]
    print(f"{'method':34} {'texts/s':>10} {'vs numpy':>8} {'pair recall':>12} {'(J≥0.9)':>8} "
          f"{'precision':>10} {'row recall':>11} {'false rm':>9}")  # fmt: skip
    for name, seconds, sig, removed in rows:
        if sig is not None:
            cand = candidate_pairs(sig, params)
            recall = len(cand & true_pairs) / max(1, len(true_pairs))
            precision = len(cand & true_pairs) / max(1, len(cand))
            high = len(cand & high_pairs) / max(1, len(high_pairs))
            pr = f"{recall:12.4f} {high:8.4f} {precision:10.4f}"
        else:
            pr = f"{'-':>12} {'-':>8} {'-':>10}"
        row_recall, _, false_rm = removal_quality(removed, truth, args.threshold, args.n)
        print(
            f"{name:34} {args.n / seconds:10,.0f} {t_n / seconds:7.2f}x {pr} "
            f"{row_recall:11.4f} {false_rm:9,}"
        )


if __name__ == "__main__":
    main()
