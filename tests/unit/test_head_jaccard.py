"""kernels/head_jaccard.py against Python sets of the reference shingles: heavy-tailed
lengths (empty, shorter than a shingle, thousands of words), texts that repeat themselves,
a head carried in from an earlier batch, and the tables grown and reused in any order."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

from neardup.kernels.arrow import text_buffers
from neardup.kernels.hashing import MASK64, shingle_hashes, shingle_keys
from neardup.kernels.head_jaccard import TABLE_SHINGLES, jaccard_to_heads
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


def test_documents_past_the_tables_are_scored_from_sorted_sets() -> None:
    """Documents of more shingles than a table takes (a head, a member, both), against Python
    sets: the same Jaccard by the sorted path."""
    rng = random.Random(3)
    vocab = [f"v{i}" for i in range(50_000)]
    base = [rng.choice(vocab) for _ in range(TABLE_SHINGLES + 5_000)]
    edited = list(base)
    for _ in range(40_000):
        edited[rng.randrange(len(edited))] = rng.choice(vocab)
    small = " ".join(base[:300])
    texts = [" ".join(base), small, " ".join(edited), small, " ".join(edited)]
    head_of = np.array([0, 0, 0, 3, 3])  # a long head; a short head with a long member
    members = np.array([1, 2, 4])
    starts, ends, data = text_buffers(pa.array(texts))
    keys = shingle_keys(SEED & MASK64)
    sim, _ = jaccard_to_heads(starts, ends, data, True, 4, 3, keys, head_of, members, np.zeros(0, np.uint64))
    # The sorted sets of the kernel verification used before (`shingle_hashes`, checked
    # against the reference's definitions in test_hashing.py): Python's sets of a million
    # shingles would take seconds.
    offsets, hashes = shingle_hashes(pa.array(texts), "word", 4, 3, SEED)
    sets = [hashes[offsets[i] : offsets[i + 1]] for i in range(len(texts))]
    assert len(sets[0]) > TABLE_SHINGLES
    want = []
    for m in members:
        a, b = sets[head_of[m]], sets[m]
        inter = len(np.intersect1d(a, b, assume_unique=True))
        want.append(inter / (len(a) + len(b) - inter))
    assert sim.tolist() == want
