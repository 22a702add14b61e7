import random

import numpy as np
import pytest
from datasketch import MinHash

from tuneloop.data.dedup import (
    LshParams,
    exact_duplicates,
    exact_key,
    near_duplicates,
    near_duplicates_datasketch,
    shingles,
    signatures,
)


def _corpus(n=400, seed=0):
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(40)]
    texts: list[str] = []
    for _ in range(n):
        if texts and rng.random() < 0.3:
            t = rng.choice(texts).split()
            t[rng.randrange(len(t))] = rng.choice(words)
            texts.append(" ".join(t))
        else:
            texts.append(" ".join(rng.choice(words) for _ in range(rng.randint(1, 25))))
    return texts


def test_signatures_equal_datasketch():
    texts = _corpus(50)
    sig = signatures(texts, LshParams())
    for i, text in enumerate(texts):
        m = MinHash(num_perm=128, seed=1)
        m.update_batch(list(shingles(text)))
        assert np.array_equal(m.hashvalues, sig[i])


@pytest.mark.parametrize("threshold", [0.5, 0.8, 0.95])
def test_removals_equal_the_plain_datasketch_loop(threshold):
    texts = _corpus()
    params = LshParams(threshold=threshold)
    fast = near_duplicates(texts, params)
    assert fast  # the corpus has near-duplicates
    assert fast.keys() == near_duplicates_datasketch(texts, params).keys()
    assert all(j < i for i, j in fast.items())


def test_different_arithmetic_problems_are_not_near_duplicates():
    texts = [
        "What is 37 + 45?\n82",
        "What is 37 + 46?\n83",
        "What is 37 - 45?\n8",
        "what is 37+45 ?\n82",
    ]
    assert near_duplicates(texts, LshParams()) == {3: 0}


def test_exact_keys():
    keys = [exact_key("a", "x"), exact_key("b", "x"), exact_key("a", "x"), exact_key("a", "y")]
    assert exact_duplicates(keys) == {2: 0}
