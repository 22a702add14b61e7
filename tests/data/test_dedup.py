import itertools
import os
import random
import subprocess
import sys

import numpy as np
import pytest

from tuneloop.data.dedup import (
    LshParams,
    exact_duplicates,
    exact_key,
    lsh_duplicates,
    near_duplicates,
    optimal_bands,
    shingles,
    signatures,
)


def _families(n_families=400, seed=0):
    """Texts of 40-80 words over 300, each followed by 0-3 copies with 0-6 words replaced, so
    pair similarities spread from 1 down past the threshold; shuffled."""
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(300)]
    texts: list[str] = []
    for _ in range(n_families):
        base = [rng.choice(words) for _ in range(rng.randint(40, 80))]
        texts.append(" ".join(base))
        for _ in range(rng.randint(0, 3)):
            t = list(base)
            for _ in range(rng.randint(0, 6)):
                t[rng.randrange(len(t))] = rng.choice(words)
            texts.append(" ".join(t))
    rng.shuffle(texts)
    return texts


def _exact_jaccard(texts):
    """{(i, j): exact Jaccard of the shingle sets} for every pair i < j sharing a shingle."""
    sets = [shingles(t) for t in texts]
    return {
        (i, j): len(sets[i] & sets[j]) / len(sets[i] | sets[j])
        for i, j in itertools.combinations(range(len(texts)), 2)
        if not sets[i].isdisjoint(sets[j])
    }


def _candidates(sig, params):
    n_bands, rows = params.bands()
    out = set()
    for band in range(n_bands):
        buckets: dict[bytes, list[int]] = {}
        for i, row in enumerate(sig[:, band * rows : (band + 1) * rows]):
            buckets.setdefault(row.tobytes(), []).append(i)
        for docs in buckets.values():
            out.update(itertools.combinations(docs, 2))
    return out


@pytest.fixture(scope="module")
def seeded():
    texts = _families()
    return texts, _exact_jaccard(texts), signatures(texts, LshParams())


def test_lsh_recall_and_precision_against_exact_jaccard(seeded):
    # Measured on this set (1,008 texts; 115 pairs at J ≥ 0.9, 226 at J ≥ 0.8), rensa (the
    # former numpy MinHash in brackets): candidate recall 1.0 (0.991) at J ≥ 0.9, 0.805 (0.796)
    # at J ≥ 0.8, precision 0.883 (0.865), no candidate below J 0.5. Floors with margin.
    texts, jac, sig = seeded
    cand = _candidates(sig, LshParams())
    high = {p for p, j in jac.items() if j >= 0.9}
    at_threshold = {p for p, j in jac.items() if j >= 0.8}
    assert len(high) > 100 and len(at_threshold) > 200
    assert len(cand & high) / len(high) >= 0.9
    assert len(cand & at_threshold) / len(at_threshold) >= 0.7
    assert len(cand & at_threshold) / len(cand) >= 0.75
    assert sum(jac.get(p, 0.0) < 0.5 for p in cand) <= 0.01 * len(cand)


def test_signature_agreement_estimates_jaccard(seeded):
    _, jac, sig = seeded
    err = np.array([(sig[i] == sig[j]).mean() - j_ for (i, j), j_ in jac.items() if j_ >= 0.3])
    assert abs(err.mean()) < 0.01  # unbiased
    assert np.abs(err).mean() < 0.04  # 128 slots: sd ≈ sqrt(J(1 - J)/128) ≤ 0.044


def test_keep_first_removals(seeded):
    texts, jac, _ = seeded
    removed = near_duplicates(texts, LshParams())
    assert all(j < i and j not in removed for i, j in removed.items())  # an earlier kept row
    should = {j for (i, j), v in jac.items() if v >= 0.9}  # rows with an earlier row at J ≥ 0.9
    assert len(should & removed.keys()) / len(should) >= 0.9
    unjustified = [i for i, j in removed.items() if jac.get((j, i), 0.0) < 0.5]
    assert len(unjustified) <= 0.01 * len(removed)


def test_signatures_are_deterministic(seeded):
    texts, _, sig = seeded
    params = LshParams()
    assert sig.dtype == np.uint32 and sig.shape == (len(texts), params.num_perm)
    assert np.array_equal(signatures(texts, params), sig)
    # Chunked as the Ray executor chunks rows: each row's signature is its own.
    assert np.array_equal(signatures(texts, params, chunk=7), sig)
    assert np.array_equal(signatures(texts[100:150], params), sig[100:150])
    assert not np.array_equal(signatures(texts[:50], LshParams(seed=2)), sig[:50])


def test_signatures_do_not_depend_on_the_process_hash_seed(seeded):
    texts, _, sig = seeded
    code = (
        "import sys, numpy as np; from tuneloop.data.dedup import LshParams, signatures; "
        "sys.stdout.buffer.write(signatures(sys.stdin.read().split('\\n'), LshParams()).tobytes())"
    )
    for hash_seed in ("0", "4242"):
        out = subprocess.run(
            [sys.executable, "-c", code],
            input="\n".join(texts[:200]).encode(),
            capture_output=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": hash_seed},
        ).stdout
        assert np.array_equal(np.frombuffer(out, dtype=np.uint32).reshape(200, -1), sig[:200])


def test_lsh_duplicates_on_given_signatures_equal_near_duplicates(seeded):
    texts, _, sig = seeded
    assert lsh_duplicates(sig, LshParams()) == near_duplicates(texts, LshParams())


@pytest.mark.parametrize("threshold", [0.3, 0.5, 0.8, 0.85, 0.95])
@pytest.mark.parametrize("num_perm", [16, 128, 256])
def test_optimal_bands_equal_datasketch(threshold, num_perm):
    from datasketch.lsh import _optimal_param

    assert optimal_bands(threshold, num_perm) == _optimal_param(threshold, num_perm, 0.5, 0.5)


def test_different_arithmetic_problems_are_not_near_duplicates():
    texts = [
        "What is 37 + 45?\n82",
        "What is 37 + 46?\n83",
        "What is 37 - 45?\n8",
        "what is 37+45 ?\n82",
    ]
    assert near_duplicates(texts, LshParams()) == {3: 0}


def test_empty_input():
    assert near_duplicates([], LshParams()) == {}
    assert signatures([], LshParams()).shape == (0, 128)


def test_exact_keys():
    keys = [exact_key("a", "x"), exact_key("b", "x"), exact_key("a", "x"), exact_key("a", "y")]
    assert exact_duplicates(keys) == {2: 0}
