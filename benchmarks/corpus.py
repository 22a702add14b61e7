"""Benchmark the corpus build on ≥ 100,000 synthetic traces.

Run: `.venv/bin/python benchmarks/corpus.py [--n 100000]`. Prints, measured in this run:
- the whole `build_corpus` throughput in traces per second (ingest → shuffle → write);
- decontamination: `find_contaminated` (vectorized) vs `find_contaminated_reference` (the same
  rule in pure Python), with the ratio, after checking they remove identical rows;
- near-duplicate removal: `near_duplicates` (rensa signatures + our banding) vs the plain
  datasketch loop (`MinHash` per row + `MinHashLSH.query/insert`, from minhash_peers.py), with
  the ratio and the rows each removes (different sketches: close, not identical, counts;
  minhash_peers.py measures both against exact Jaccard).
The traces mix short arithmetic exchanges (like the arith example, with planted suite items)
and longer support-chat turns with exact and near duplicates; everything is seeded.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from minhash_peers import near_duplicates_datasketch  # benchmarks/ is on sys.path when run
from peers import require  # benchmarks/ is on sys.path when run

from tuneloop.data.corpus import build_corpus
from tuneloop.data.decontam import (
    RowText,
    build_index,
    find_contaminated,
    find_contaminated_reference,
)
from tuneloop.data.dedup import LshParams, near_duplicates
from tuneloop.suite import item_prompt_text, load_suite

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "examples" / "arith" / "suite.jsonl"
WORDS = [
    "order",
    "refund",
    "shipping",
    "account",
    "password",
    "invoice",
    "delivery",
    "package",
    "address",
    "payment",
    "card",
    "return",
    "label",
    "warranty",
    "charge",
    "subscription",
    "cancel",
    "upgrade",
    "login",
    "email",
    "phone",
    "store",
]


def iter_traces(n: int, seed: int = 0) -> Iterator[dict]:
    """The synthetic traffic log, one exchange at a time (also `corpus_ray.py`'s, streamed to
    a file: 1M traces do not fit as dicts). Half arithmetic (1 in 1,000 a suite leak), half
    support chat, a fifth of that a near duplicate of an earlier chat (one word changed; the
    pool of earlier chats is capped at 50,000, which a run of up to ~125k traces never reaches)."""
    rng = random.Random(seed)
    suite = [json.loads(line) for line in SUITE.open()]
    chats: list[str] = []
    for i in range(n):
        roll = rng.random()
        if roll < 0.5:
            a, b = rng.randint(0, 999), rng.randint(0, 999)
            q, ans = f"What is {a} + {b}?", str(a + b)
            if rng.random() < 0.001:
                item = rng.choice(suite)
                q, ans = item["messages"][0]["content"], item["answer"]
        else:
            if chats and roll > 0.9:  # a near duplicate: one word changed
                words = rng.choice(chats).split()
                words[rng.randrange(len(words))] = rng.choice(WORDS)
                q = " ".join(words)
            else:
                q = " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 60)))
                if len(chats) < 50_000:
                    chats.append(q)
            ans = "Thanks, I have updated your " + rng.choice(WORDS) + "."
        yield {
            "request": {"model": "m", "messages": [{"role": "user", "content": q}]},
            "response": {
                "id": f"r{i}",
                "created": 1780000000 + i,
                "model": "m",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": ans}}],
            },
            "verdict": "up" if rng.random() < 0.8 else "down",
        }


def make_traces(n: int, seed: int = 0) -> list[dict]:
    return list(iter_traces(n, seed))


def timed(fn, *args):
    t0 = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    args = parser.parse_args()
    require("datasketch", what="datasketch (the plain MinHash loop)")
    traces = make_traces(args.n)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "t.jsonl").write_text("".join(json.dumps(t) + "\n" for t in traces))
        (folder / "corpus.yaml").write_text(
            f"sources: [{{path: t.jsonl}}]\ndecontaminate: {{suites: [{SUITE}]}}\n"
        )
        result, seconds = timed(
            lambda: build_corpus(folder / "corpus.yaml", folder / "out", progress=False)
        )
    print(f"build_corpus: {args.n} traces in {seconds:.1f} s = {args.n / seconds:,.0f} traces/s")
    print(f"  counts: {result.counts}")

    rows = [
        RowText(
            t["request"]["messages"][0]["content"]
            + "\n"
            + t["response"]["choices"][0]["message"]["content"],
            t["request"]["messages"][0]["content"],
        )
        for t in traces
    ]
    suite = load_suite(SUITE)
    index = build_index("arith", [(i.id, item_prompt_text(i)) for i in suite.items])
    fast, t_fast = timed(find_contaminated, rows, index)
    ref, t_ref = timed(find_contaminated_reference, rows, index)
    assert fast == ref, "decontamination: fast path and reference disagree"
    # The same again with the heap frozen out of the garbage collector: the reference makes
    # millions of tuples, and collections that scan the build's large heap are part of its
    # time above; this isolates the compute.
    gc.freeze()
    _, t_fast_frozen = timed(find_contaminated, rows, index)
    _, t_ref_frozen = timed(find_contaminated_reference, rows, index)
    gc.unfreeze()
    print(
        f"decontamination: vectorized {t_fast:.2f} s, pure-Python reference {t_ref:.2f} s, "
        f"ratio {t_ref / t_fast:.1f}x ({len(fast)} rows removed by both)"
    )

    print(
        f"  with the heap frozen out of GC: vectorized {t_fast_frozen:.2f} s, reference "
        f"{t_ref_frozen:.2f} s, ratio {t_ref_frozen / t_fast_frozen:.1f}x"
    )

    texts = [r.text for r in rows]
    params = LshParams()
    near_duplicates(texts[:10], params)  # imports before timing either side
    near_duplicates_datasketch(texts[:10], params)
    nd, t_nd = timed(near_duplicates, texts, params)
    ds, t_ds = timed(near_duplicates_datasketch, texts, params)
    print(
        f"near-dup: rensa signatures + our bands {t_nd:.2f} s, datasketch loop {t_ds:.2f} s, "
        f"ratio {t_ds / t_nd:.1f}x (rows removed: {len(nd)} and {len(ds)}, "
        f"{len(nd.keys() & ds.keys())} by both)"
    )


if __name__ == "__main__":
    main()
