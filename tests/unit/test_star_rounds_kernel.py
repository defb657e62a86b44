"""The star rounds' driver bookkeeping (kernels/star_rounds.py), without a JVM: its
union-find against breadth-first search, and rounds run against a similarity oracle that
make a group whole whose own centre is like none of its members."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from neardup.kernels.star_rounds import FRACTION, StarGroups, next_round, rest, split_groups
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
        src, dst = star.src, star.dst
        for step in range(2):
            if step:
                src, dst = rest(groups, star)
            tried += len(src)
            ok = [(a, b) for a, b in zip(src.tolist(), dst.tolist(), strict=True) if (a, b) in similar]
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


def _h64(*parts: object) -> int:
    """A stable signed 64-bit hash (blake2b), standing for Spark's xxhash64."""
    x = int.from_bytes(hashlib.blake2b(repr(parts).encode(), digest_size=8).digest(), "little")
    return x - (1 << 64) if x >= 1 << 63 else x


Case = tuple[list[tuple[str, str]], dict[str, str], set[tuple[str, str]], int, int]


def _model(case: Case, sampled: bool = True) -> tuple[list[tuple[str, str]], int, int]:
    """The rule in plain Python, a (group, member) and a pair at a time, its components a
    dict union-find over the starting labels: (verified edges, pairs tried, groups split).
    `sampled` False: every star pair verified at once (the rule before the two steps)."""
    stars, labels, similar, max_rounds, all_up_to = case
    members = sorted(set(stars) | {(c, c) for c, _ in stars})
    parent: dict[str, str] = {}

    def label(x: str) -> str:
        y = labels.get(x, x)
        while parent.get(y, y) != y:
            y = parent[y]
        return y

    def merge(verified: list[tuple[str, str]]) -> None:
        for a, b in verified:
            ra, rb = label(a), label(b)
            if ra != rb:
                parent[max(ra, rb)] = min(ra, rb)

    def taken(ms: list[str], g: str, number: int, up_to: int, share_of: float) -> list[str]:
        """Of ms: all up to `up_to`, else the least by hash and those in the hash's share."""
        hs = [(_h64(g, m, number), m) for m in ms]
        least = min(hs)[1]
        share = float(FRACTION) * share_of / len(ms)
        return [m for h, m in hs if len(ms) <= up_to or m == least or h % FRACTION < share]

    centres = {(c, c) for c, _ in stars}
    found: list[tuple[str, str]] = []
    pairs = 0
    for number in range(1, max_rounds + 2):
        covered = {(g, label(c)) for g, c in centres}
        outside: dict[str, list[str]] = {}
        parts: dict[tuple[str, str], list[str]] = {}
        for g, m in members:
            parts.setdefault((g, label(m)), []).append(m)
            if (g, label(m)) not in covered:
                outside.setdefault(g, []).append(m)
        chosen = [
            (g, m) for g, ms in outside.items() for m in taken(ms, g, number, all_up_to, 2 ** (number - 1))
        ]
        if not chosen or number > max_rounds:
            return sorted(found), pairs, len({g for g, _ in chosen})
        sample = {
            (g, m)
            for (g, _), ms in parts.items()
            for m in (taken(ms, g, number, all_up_to, all_up_to) if sampled else ms)
        }
        first: set[tuple[str, str]] = set()
        held: set[tuple[str, str]] = set()
        for g, c in chosen:
            for gg, m in members:
                if gg == g and label(m) != label(c):
                    (first if (g, m) in sample else held).add((min(m, c), max(m, c)))
        early = sorted(p for p in first if p in similar)
        merge(early)
        # The held pairs whose ends the first step left apart.
        second = sorted(p for p in held - first if label(p[0]) != label(p[1]))
        late = [p for p in second if p in similar]
        merge(late)
        pairs += len(first) + len(second)
        found += early + late
        centres |= set(chosen)
    raise AssertionError("unreachable")


def _kernel(case: Case) -> tuple[list[tuple[str, str]], int, int]:
    """The same through kernels/star_rounds.py, driven as stages/stars.py drives it."""
    stars, labels, similar, max_rounds, all_up_to = case
    members = sorted(set(stars) | {(c, c) for c, _ in stars})
    g = np.array([a for a, _ in members], dtype=object)
    m = np.array([b for _, b in members], dtype=object)
    ids, codes = np.unique(np.concatenate([g, m]), return_inverse=True)
    _, label_codes = np.unique(np.array([labels.get(x, x) for x in m], dtype=object), return_inverse=True)
    hashes = np.array([[_h64(a, b, r) for r in range(1, max_rounds + 1)] for a, b in members], dtype=np.int64)
    n = len(members)
    groups = StarGroups(codes[:n], codes[n:], label_codes, hashes)
    centres = groups.first_centres()
    found: list[tuple[str, str]] = []
    pairs = 0
    for number in range(1, max_rounds + 1):
        star = next_round(groups, centres, number, all_up_to)
        if star is None:
            return sorted(found), pairs, 0
        src, dst = star.src, star.dst
        for step in range(2):
            if step:
                src, dst = rest(groups, star)
            pairs += len(src)
            tried = zip(ids[src].tolist(), ids[dst].tolist(), strict=True)
            verified = [(a, b) for a, b in tried if (a, b) in similar]
            found += verified
            ends = np.array(verified, dtype=object).reshape(-1, 2)
            a, b = np.searchsorted(ids, ends[:, 0]), np.searchsorted(ids, ends[:, 1])
            groups.union(groups.label_of(a.astype(np.int64)), groups.label_of(b.astype(np.int64)))
        centres = np.concatenate([centres, star.centre_rows])
    return sorted(found), pairs, split_groups(groups, centres)


def _random_case(rng: np.random.Generator) -> Case | None:
    nodes = [f"d{i:03d}" for i in range(int(rng.integers(6, 70)))]
    centres = rng.choice(nodes, size=int(rng.integers(1, 5)), replace=False).tolist()
    stars = sorted({(c, m) for c in centres for m in nodes if m > c and rng.random() < 0.6})
    if not stars:
        return None
    # Starting components of random edges, labelled by their smallest id (not always a member).
    edges = [tuple(sorted(rng.choice(nodes, 2).tolist())) for _ in range(len(nodes) // 3)]
    labels = {n: c for n, c in bfs_components(nodes, edges).items() if n != c or rng.random() < 0.5}
    variants = int(rng.integers(1, 4))
    similar = {
        (a, b) for a in nodes for b in nodes if a < b and int(a[1:]) % variants == int(b[1:]) % variants
    }
    return stars, labels, similar, int(rng.integers(1, 5)), int(rng.choice([0, 2, 8, 32]))


def test_rounds_match_a_plain_python_model() -> None:
    """Random star groups (members in several groups, starting components not named by a
    member, string ids, variants alike only within themselves): the kernel's edges, pairs
    and split groups are the plain model's, for 1 to 4 rounds and several all_up_to."""
    rng = np.random.default_rng(12)
    cases = [c for c in (_random_case(rng) for _ in range(60)) if c is not None]
    assert len(cases) > 40
    for i, case in enumerate(cases):
        assert _kernel(case) == _model(case), i


def _partition(case: Case, edges: list[tuple[str, str]]) -> list[list[str]]:
    """The components of the starting labels and `edges`, as sorted lists of members."""
    stars, labels, _, _, _ = case
    nodes = sorted({x for pair in stars for x in pair} | set(labels) | set(labels.values()))
    joined = bfs_components(nodes, [*edges, *labels.items()])
    parts: dict[str, list[str]] = {}
    for n in nodes:
        parts.setdefault(joined[n], []).append(n)
    return sorted(parts.values())


def test_the_two_steps_find_the_components_of_every_star_pair() -> None:
    """Verifying a centre first against a sample of each other component, then the rest
    where still apart, gives the components of verifying its whole star at once, in at
    most as many pairs (random cases as above, several all_up_to)."""
    rng = np.random.default_rng(13)
    cases = [c for c in (_random_case(rng) for _ in range(60)) if c is not None]
    fewer = 0
    for i, case in enumerate(cases):
        two_steps, tried, split = _model(case)
        at_once, all_tried, all_split = _model(case, sampled=False)
        assert (_partition(case, two_steps), split) == (_partition(case, at_once), all_split), i
        assert tried <= all_tried, i
        fewer += tried < all_tried
    assert fewer > 0
