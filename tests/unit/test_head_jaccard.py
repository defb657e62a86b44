"""kernels/head_jaccard.py against Python sets of the reference shingles: heavy-tailed
lengths (empty, shorter than a shingle, thousands of words), texts that repeat themselves,
a head carried in from an earlier batch, and the tables grown and reused in any order."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

from neardup.kernels.arrow import text_buffers
from neardup.kernels.hashing import MASK64, shingle_keys
from neardup.kernels.head_jaccard import jaccard_to_heads
from neardup_testkit import hashspec

SEED = 11


def _text(rng: random.Random) -> str:
    kind = rng.choice(["empty", "short", "plain", "plain", "repeats", "long"])
    vocab = [f"w{i}" for i in range(rng.choice([3, 40, 400]))]
    sizes = {"empty": 0, "short": rng.randint(1, 3), "plain": rng.randint(5, 60), "repeats": 80, "long": 6000}
    n = sizes[kind]
    words = [rng.choice(vocab) for _ in range(n)]
    if kind == "repeats":
        words = (words[:7] * 12)[:n]
    return " ".join(words)


def _hashes(text: str, unit: str) -> set[int]:
    return {hashspec.shingle_hash(s, SEED) for s in hashspec.shingles(text, unit, 4, 3)}


def _jaccard(a: set[int], b: set[int]) -> float:
    union = len(a | b)
    return len(a & b) / union if union else 0.0


@pytest.mark.parametrize("unit", ["word", "char"])
def test_jaccard_to_heads_is_the_jaccard_of_the_shingle_sets(unit: str) -> None:
    rng = random.Random(7)
    texts = [_text(rng) for _ in range(120)]
    # Groups of 1..8 rows, the first row the head; the first group's head is carried in.
    head_of, row = [], 0
    while row < len(texts):
        size = rng.randint(1, 8)
        head = len(texts) if row == 0 else row
        head_of += [head] * min(size, len(texts) - row)
        row += size
    carried_text = texts[0] + " w1 w2 w3 w4"
    members = np.array([i for i, h in enumerate(head_of) if h != i], dtype=np.int64)
    starts, ends, data = text_buffers(pa.array(texts))
    carried = np.array(sorted(_hashes(carried_text, unit)) * 2, dtype=np.uint64)  # duplicates allowed
    keys = shingle_keys(SEED & MASK64)
    sim, tail = jaccard_to_heads(
        starts, ends, data, unit == "word", 4, 3, keys, np.array(head_of), members, carried
    )
    sets = [_hashes(t, unit) for t in texts] + [_hashes(carried_text, unit)]
    want = [_jaccard(sets[head_of[m]], sets[m]) for m in members]
    assert sim.tolist() == want
    assert set(tail.tolist()) == sets[head_of[-1]]


def test_a_batch_that_only_continues_the_carried_group_carries_it_on() -> None:
    texts = ["a b c d e", "a b c d f"]
    starts, ends, data = text_buffers(pa.array(texts))
    carried = np.array(sorted(_hashes("a b c d e", "word")), dtype=np.uint64)
    keys = shingle_keys(SEED & MASK64)
    head_of = np.array([2, 2])
    sim, tail = jaccard_to_heads(starts, ends, data, True, 4, 3, keys, head_of, np.array([0, 1]), carried)
    assert sim.tolist() == [1.0, 1 / 3]
    assert tail.tolist() == carried.tolist()
