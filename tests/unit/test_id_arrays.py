"""kernels/id_arrays.py: numpy's answers for string ids, from Arrow's kernels, at the cost of
integers; and the driver kernels that use it, for string ids as for int ones."""

from __future__ import annotations

import numpy as np
import pytest

from neardup.kernels import id_arrays
from neardup.kernels.cluster_sizes import cluster_sizes
from neardup.kernels.graph_labels import smallest_labels

# Characters whose UTF-8 bytes and code points order differently from their UTF-16 units
# (an astral character against one just below the surrogates), a NUL, a prefix of another.
ALPHABET = ["a", "b", "ab", "/", "0", "é", "\ufffd", "\U0001f600", "\u4e2d", "\x00", "A"]


def _strings(rng: np.random.Generator, n: int) -> np.ndarray:
    picks = rng.integers(0, len(ALPHABET), (n, 4))
    lengths = rng.integers(0, 5, n)
    return np.array(
        ["".join(ALPHABET[j] for j in row[:k]) for row, k in zip(picks, lengths, strict=True)], object
    )


@pytest.mark.parametrize("seed", range(5))
def test_string_answers_are_numpys(seed: int) -> None:
    rng = np.random.default_rng(seed)
    values, among = _strings(rng, 400), _strings(rng, 300)
    found, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    got = id_arrays.unique(values)
    assert got[0].tolist() == found.tolist()
    assert got[1].tolist() == inverse.reshape(-1).tolist()
    assert got[2].tolist() == counts.tolist()
    assert id_arrays.argsort(values).tolist() == np.argsort(values, kind="stable").tolist()
    assert id_arrays.isin(values, among).tolist() == np.isin(values, among).tolist()
    held = np.unique(among)
    place = {v: i for i, v in enumerate(held.tolist())}
    assert id_arrays.lookup(held, values).tolist() == [place.get(v, -1) for v in values.tolist()]


def test_integer_answers_are_numpys() -> None:
    rng = np.random.default_rng(0)
    values, among = rng.integers(-50, 50, 500), rng.integers(-50, 50, 300)
    held = np.unique(among)
    want = np.where(np.isin(values, held), np.searchsorted(held, values), -1)
    assert id_arrays.lookup(held, values).tolist() == want.tolist()
    assert id_arrays.isin(values, among).tolist() == np.isin(values, among).tolist()
    assert id_arrays.unique(values)[0].tolist() == np.unique(values).tolist()


def test_empty() -> None:
    none = np.zeros(0, object)
    assert len(id_arrays.unique(none)[0]) == 0
    assert id_arrays.lookup(np.array(["a"], object), none).tolist() == []
    assert id_arrays.isin(none, np.array(["a"], object)).tolist() == []


def _padded(ids: np.ndarray) -> np.ndarray:
    """Strings that order as the integers do."""
    return np.array([f"doc-{i:012d}" for i in ids.tolist()], object)


def test_cluster_sizes_and_labels_of_string_ids_are_those_of_int_ids() -> None:
    """Clustered representatives and exact groups with string ids: the answers are the int
    ids' answers, mapped. (Their speed is the benchmark's: `python -m bench --ids
    int,string` prints each stage's string/int ratio; np.isin of Python strings, which
    compared every pair, took 45 s of the survivors stage on a million documents.)"""
    rng = np.random.default_rng(1)
    n = 6_000
    ids = rng.permutation(np.arange(n, dtype=np.int64) * 3 + 7)
    kept = ids[rng.integers(0, n // 4, n)]
    reps = rng.choice(np.arange(2 * n, dtype=np.int64) * 3 + 7, n // 2, replace=False)
    copies = rng.integers(1, 4, n // 2)
    got = cluster_sizes(_padded(ids), _padded(kept), _padded(reps), copies)
    nodes, labels = smallest_labels(_padded(ids), _padded(kept))
    want = cluster_sizes(ids, kept, reps, copies)
    assert sorted(zip(got[0].tolist(), got[1].tolist(), strict=True)) == sorted(
        zip(_padded(want[0]).tolist(), want[1].tolist(), strict=True)
    )
    want_nodes, want_labels = smallest_labels(ids, kept)
    assert nodes.tolist() == _padded(want_nodes).tolist()
    assert labels.tolist() == _padded(want_labels).tolist()


def test_first_index_is_numpys() -> None:
    values = _strings(np.random.default_rng(7), 500)
    _, first = np.unique(values, return_index=True)
    _, inverse, counts = id_arrays.unique(values)
    assert id_arrays.first_index(inverse, counts).tolist() == first.tolist()
