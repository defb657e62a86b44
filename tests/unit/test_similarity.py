"""Verification kernels against plain Python sets and byte packing."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from neardup.kernels.similarity import jaccard_between, jaccard_of_pairs, signature_matrix


def _pack(sets: list[set[int]]) -> tuple[np.ndarray, np.ndarray]:
    offsets = np.cumsum([0] + [len(s) for s in sets]).astype(np.int64)
    flat = np.array([h for s in sets for h in sorted(s)], dtype=np.uint64)
    return offsets, flat


def test_jaccard_of_pairs_matches_python_sets() -> None:
    rng = np.random.default_rng(3)
    a_sets, b_sets = [], []
    for _ in range(200):
        universe = rng.integers(0, 2**63, size=60, dtype=np.uint64).tolist()
        a_sets.append(set(rng.choice(universe, size=rng.integers(0, 40), replace=False).tolist()))
        b_sets.append(set(rng.choice(universe, size=rng.integers(0, 40), replace=False).tolist()))
    sets = a_sets + b_sets
    # Every a against its b, then some sets against several others and themselves.
    left = np.concatenate([np.arange(200), rng.integers(0, 400, size=300)])
    right = np.concatenate([np.arange(200, 400), rng.integers(0, 400, size=300)])
    got = jaccard_of_pairs(*_pack(sets), left, right)
    want = [
        len(sets[i] & sets[j]) / len(sets[i] | sets[j]) if sets[i] | sets[j] else 0.0
        for i, j in zip(left, right, strict=True)
    ]
    assert np.allclose(got, want)
    with pytest.raises(IndexError):
        jaccard_of_pairs(*_pack(sets), np.array([0]), np.array([400]))


def test_signature_matrix_reads_binary_columns_including_slices() -> None:
    sigs = np.arange(5 * 8, dtype=np.uint32).reshape(5, 8) * np.uint32(2654435761)
    col = pa.array([row.astype("<u4").tobytes() for row in sigs], pa.binary())
    assert (signature_matrix(col, 8) == sigs).all()
    assert (signature_matrix(col.slice(2, 3), 8) == sigs[2:]).all()
    assert (signature_matrix(pa.chunked_array([col.slice(0, 2), col.slice(2)]), 8) == sigs).all()


def test_jaccard_between_two_collections_matches_python_sets() -> None:
    rng = np.random.default_rng(5)
    universe = rng.integers(0, 2**63, size=50, dtype=np.uint64).tolist()
    a = [set(rng.choice(universe, size=rng.integers(0, 30), replace=False).tolist()) for _ in range(40)]
    b = [set(rng.choice(universe, size=rng.integers(0, 30), replace=False).tolist()) for _ in range(7)]
    left, right = rng.integers(0, 40, size=300), rng.integers(0, 7, size=300)
    got = jaccard_between(*_pack(a), *_pack(b), left, right)
    pairs = zip(left, right, strict=True)
    want = [len(a[i] & b[j]) / len(a[i] | b[j]) if a[i] | b[j] else 0.0 for i, j in pairs]
    assert np.allclose(got, want)
    with pytest.raises(IndexError):
        jaccard_between(*_pack(a), *_pack(b), np.array([0]), np.array([7]))
    with pytest.raises(ValueError, match="same length"):
        jaccard_between(*_pack(a), *_pack(b), np.array([0, 1]), np.array([0]))
