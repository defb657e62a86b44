"""The star rounds' driver bookkeeping (kernels/star_rounds.py), without a JVM: its
union-find against breadth-first search, and rounds run against a similarity oracle that
make a group whole whose own centre is like none of its members."""

from __future__ import annotations

import numpy as np
import pytest

from neardup.kernels.star_rounds import StarGroups, next_round, split_groups
from neardup_testkit.reference import bfs_components

ROUNDS = 4


def _hashes(group: np.ndarray, member: np.ndarray) -> np.ndarray:
    """A hash of (group, member, round) per row and round, as Spark's xxhash64 stands in the
    stage: any fixed function of the three will do for the bookkeeping."""
    rounds = np.arange(1, ROUNDS + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        x = (
            group.astype(np.uint64)[:, None] * np.uint64(0x9E3779B97F4A7C15)
            + member.astype(np.uint64)[:, None]
        )
        x = (x ^ (x >> np.uint64(29))) * np.uint64(0xBF58476D1CE4E5B9) + rounds * np.uint64(
            0x94D049BB133111EB
        )
        x = (x ^ (x >> np.uint64(32))) * np.uint64(0xBF58476D1CE4E5B9)
    return x.view(np.int64)


def _groups(group: np.ndarray, member: np.ndarray, label: np.ndarray) -> StarGroups:
    return StarGroups(group, member, label, _hashes(group, member))


@pytest.mark.parametrize("seed", [3, 4, 5])
def test_union_find_merges_as_bfs_does(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 400
    groups = _groups(np.zeros(n, np.int64), np.arange(n, dtype=np.int64), np.arange(n, dtype=np.int64))
    edges: list[tuple[int, int]] = []
    for _ in range(5):  # merges in several batches, as rounds do
        batch = rng.integers(0, n, size=(60, 2))
        edges += [(int(a), int(b)) for a, b in batch]
        groups.union(batch[:, 0].astype(np.int64), batch[:, 1].astype(np.int64))
    roots = groups.roots(np.arange(n, dtype=np.int64))
    # Same partition as BFS, each root the smallest label of its component.
    labels = bfs_components(range(n), edges)
    assert roots.tolist() == [labels[i] for i in range(n)]


def _run(
    groups: StarGroups, similar: set[tuple[int, int]], rounds: int, all_up_to: int
) -> tuple[int, int, list[tuple[int, int]]]:
    """The stage's loop with an oracle for verification: (groups still split, pairs tried,
    the verified pairs)."""
    centres = groups.first_centres()
    tried = 0
    verified: list[tuple[int, int]] = []
    for number in range(1, rounds + 1):
        star = next_round(groups, centres, number, all_up_to)
        if star is None:
            break
        tried += len(star.src)
        ok = [(a, b) for a, b in zip(star.src.tolist(), star.dst.tolist(), strict=True) if (a, b) in similar]
        verified += ok
        arr = np.array(ok, dtype=np.int64).reshape(-1, 2)  # a round may verify none
        groups.union(groups.label_of(arr[:, 0]), groups.label_of(arr[:, 1]))
        centres = np.concatenate([centres, star.centre_rows])
    return split_groups(groups, centres), tried, verified


def test_copies_split_by_a_long_centre_are_joined() -> None:
    """Group 0: centre 0 (a long file that quotes a licence) and 200 copies of the licence
    (1..200), each alike to every other copy and to no centre; every copy its own
    component at first. After the rounds the group is whole and the pairs tried stay
    linear in the group (not the 19,900 of all pairs)."""
    n = 201
    member = np.arange(n, dtype=np.int64)
    groups = _groups(np.zeros(n, dtype=np.int64), member, member.copy())
    similar = {(a, b) for a in range(1, n) for b in range(a + 1, n)}
    split, tried, verified = _run(groups, similar, rounds=ROUNDS, all_up_to=32)
    assert split == 0
    labels = bfs_components(range(n), verified)
    assert len({labels[m] for m in range(1, n)}) == 1
    assert tried <= 16 * n


def test_the_same_rows_in_any_order_give_the_same_rounds() -> None:
    """Five groups of 60 (each named by its first member, its centre): the rows' order
    does not change the centres or the pairs."""
    member = np.arange(1, 301, dtype=np.int64)
    group = (member - 1) // 60 * 60 + 1
    first_groups = _groups(group, member, member.copy())
    first = next_round(first_groups, first_groups.first_centres(), 1, 8)
    order = np.random.default_rng(9).permutation(len(member))
    hashes = _hashes(group, member)
    shuffled = StarGroups(group[order], member[order], member[order].copy(), hashes[order])
    second = next_round(shuffled, shuffled.first_centres(), 1, 8)
    assert first is not None and second is not None
    assert (first.src.tolist(), first.dst.tolist()) == (second.src.tolist(), second.dst.tolist())
    assert len(first.src) > 0


def test_a_group_alike_to_nothing_stays_split_and_is_counted() -> None:
    """No pair verifies: every round verifies none, and the group is counted as split."""
    member = np.arange(40, dtype=np.int64)
    groups = _groups(np.zeros(40, dtype=np.int64), member, member.copy())
    split, tried, verified = _run(groups, set(), rounds=3, all_up_to=8)
    assert (split, verified) == (1, [])
    assert tried > 0


def test_no_star_groups_no_round() -> None:
    """Empty input (no star edge): no round, nothing split."""
    empty = np.empty(0, dtype=np.int64)
    groups = StarGroups(empty, empty, empty, np.empty((0, ROUNDS), dtype=np.int64))
    assert next_round(groups, groups.first_centres(), 1, 8) is None
    assert split_groups(groups, groups.first_centres()) == 0
