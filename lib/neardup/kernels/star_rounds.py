"""Further centres for split star groups, on the driver: the bookkeeping of
stages/stars.py's rounds as numpy, so a round costs one Spark job (verifying its pairs)
instead of a dozen over frames of a few thousand rows. Pure numpy.

The rule is the stage's: a star group is a centre with every document it is the centre
of; it is split while a member is outside the components of all the group's centres so
far. Each round, every split group takes further centres among its outside members (all
of them when at most `all_up_to`, else the least by a hash of (group, member, round) and
about 2^(round-1) more, those whose hash falls in that share of its range), and a star from
each to every member of the group outside the centre's component is verified, in two
steps: first its pairs to a sample of each other component of the group (up to
`all_up_to` members, chosen by the same hash), then the rest of its pairs to the components
the first step did not join it to. The second step skips only pairs whose ends are already
joined, so the components are those of verifying every star pair, at a fraction of the
pairs where a centre is like most of its group. Verified edges merge components (a
union-find over the members' component labels), and the next round looks again.

Ids are codes here: rows of (group, member, label) as int64 codes that the stage makes
from the documents' ids (`np.unique`, so the codes follow the ids' order). The hashes are
Spark's (`xxhash64(group, id, round)`, computed in the job that collects the rows), and a
hash tie goes to the smaller id, as in the distributed rounds: both paths choose the same
centres, verify the same pairs and give the same clusters.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

I64Array = npt.NDArray[np.int64]
FRACTION = 1 << 30  # the hash's resolution for the share of a group's outside members taken


@dataclass
class StarGroups:
    """The star groups' members and their components, as codes.

    `group`, `member`: one row per (group, member), the centre's own row included (group
    == member), sorted by group. `label`: each row's member's component, as a code of
    its own (members of one component share it; a member outside every component has
    one of its own). `hashes`: each row's hash of (group, member, round), a column per
    round from 1."""

    group: I64Array
    member: I64Array
    label: I64Array
    hashes: I64Array
    parent: I64Array = field(init=False)  # union-find over label codes

    def __post_init__(self) -> None:
        order = np.lexsort((self.member, self.group))
        self.group, self.member, self.label = self.group[order], self.member[order], self.label[order]
        self.hashes = self.hashes.reshape(len(order), self.hashes.shape[-1])[order]
        n_labels = int(self.label.max()) + 1 if len(self.label) else 0
        self.parent = np.arange(n_labels, dtype=np.int64)

    def first_centres(self) -> I64Array:
        """The rows of the groups' own centres."""
        return np.flatnonzero(self.group == self.member)

    def label_of(self, members: I64Array) -> I64Array:
        """The label of each member code (a member has one label, whatever its groups)."""
        if len(members) == 0:
            return np.empty(0, dtype=np.int64)
        table = np.full(int(max(self.member.max(), members.max())) + 1, -1, dtype=np.int64)
        table[self.member] = self.label
        return table[members]

    def roots(self, labels: I64Array) -> I64Array:
        """Each label's union-find root (with the paths halved as it goes)."""
        p = self.parent
        r = labels.copy()
        while True:
            up = p[r]
            if np.array_equal(up, r):
                return r
            p[r] = p[up]  # path splitting: each points at its grandparent
            r = up

    def union(self, a: I64Array, b: I64Array) -> None:
        """Merge the components of labels a[i] and b[i] for every i (each root takes the
        smallest root of its merged set, so the result does not depend on the order)."""
        ra, rb = self.roots(a), self.roots(b)
        while True:
            differ = ra != rb
            if not differ.any():
                return
            lo, hi = np.minimum(ra[differ], rb[differ]), np.maximum(ra[differ], rb[differ])
            # The smallest root each high root is joined to, then repeat until no pair differs.
            target = np.full(len(self.parent), np.iinfo(np.int64).max, dtype=np.int64)
            np.minimum.at(target, hi, lo)
            moved = target < np.iinfo(np.int64).max
            self.parent[moved] = np.minimum(self.parent[moved], target[moved])
            ra, rb = self.roots(ra), self.roots(rb)

    def outside(self, centre_rows: I64Array, root: I64Array | None = None) -> npt.NDArray[np.bool_]:
        """Rows whose member is outside the components of all its group's centres (`root`:
        the rows' label roots, where the caller has them)."""
        if root is None:
            root = self.roots(self.label)
        width = np.int64(len(self.parent) + 1)
        covered = np.unique(self.group[centre_rows] * width + root[centre_rows])
        return ~np.isin(self.group * width + root, covered)


@dataclass(frozen=True)
class Round:
    centre_rows: I64Array  # rows of the round's further centres
    src: I64Array  # the star pairs to verify first, as member codes, src < dst
    dst: I64Array
    held_src: I64Array  # the rest of the star pairs, verified only where still needed (`rest`)
    held_dst: I64Array


def _pairs(a: I64Array, b: I64Array) -> I64Array:
    """Unique (min, max) rows of the pairs a[i], b[i], sorted."""
    return np.unique(np.stack([np.minimum(a, b), np.maximum(a, b)], axis=1), axis=0).reshape(-1, 2)


def _first_rows(keys: I64Array) -> tuple[I64Array, I64Array]:
    """For `keys` sorted: the start of each run of equal keys, and each row's run length."""
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]]) if len(keys) else np.empty(0, np.int64)
    counts = np.diff(np.r_[starts, len(keys)])
    return starts, np.repeat(counts, counts)


def _sampled(groups: StarGroups, root: I64Array, number: int, up_to: int) -> npt.NDArray[np.bool_]:
    """Each row: whether its member is in its (group, component)'s sample for round `number`:
    all of them when at most `up_to`, else the least by the round's hash and those whose
    hash falls in an up_to/size share of its range (as further centres are chosen)."""
    h = groups.hashes[:, number - 1]
    order = np.lexsort((groups.member, h, root, groups.group))
    g, r = groups.group[order], root[order]
    width = np.int64(len(groups.parent) + 1)
    starts, size = _first_rows(g * width + r)
    least = np.zeros(len(order), dtype=bool)
    least[starts] = True
    share = float(FRACTION) * up_to / size
    take = (size <= up_to) | least | (np.mod(h[order], FRACTION).astype(np.float64) < share)
    out = np.empty(len(order), dtype=bool)
    out[order] = take
    return out


def next_round(groups: StarGroups, centre_rows: I64Array, number: int, all_up_to: int) -> Round | None:
    """Round `number`'s further centres and star pairs, or None when no group is split.

    A centre's star is every member of its group outside its component; the pairs to verify
    first are those to a sample of each other component of the group (`_sampled`, up to
    `all_up_to` each), and the rest are held back: a held pair whose ends a verified first
    pair has joined would only confirm it (`rest`)."""
    root = groups.roots(groups.label)
    out = groups.outside(centre_rows, root)
    rows = np.flatnonzero(out)
    if len(rows) == 0:
        return None
    g, m = groups.group[rows], groups.member[rows]
    h = groups.hashes[rows, number - 1]
    # Per group (rows are sorted by group): its outside count and its least hash.
    starts, n_out = _first_rows(g)
    order = np.lexsort((m, h, g))  # within a group: by hash, then member (Spark's min of a struct)
    least_rows = order[starts]
    is_least = np.zeros(len(g), dtype=bool)
    is_least[least_rows] = True
    share = float(FRACTION) * 2.0 ** (number - 1) / n_out
    # Spark's pmod: the non-negative remainder of the signed hash.
    take = (n_out <= all_up_to) | is_least | (np.mod(h, FRACTION).astype(np.float64) < share)
    chosen = rows[take]
    # A star from each chosen centre to every member of its group outside its component.
    group_starts = np.flatnonzero(np.r_[True, groups.group[1:] != groups.group[:-1]])
    group_ends = np.r_[group_starts[1:], len(groups.group)]
    which = np.searchsorted(groups.group[group_starts], groups.group[chosen])
    lo, hi = group_starts[which], group_ends[which]
    sizes = hi - lo
    centre_of = np.repeat(chosen, sizes)
    offsets = np.arange(int(sizes.sum()), dtype=np.int64) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    member_rows = np.repeat(lo, sizes) + offsets
    keep = root[member_rows] != root[centre_of]
    centre_of, member_rows = centre_of[keep], member_rows[keep]
    first = _sampled(groups, root, number, all_up_to)[member_rows]
    now = _pairs(groups.member[centre_of[first]], groups.member[member_rows[first]])
    held = _pairs(groups.member[centre_of[~first]], groups.member[member_rows[~first]])
    # A pair in two groups, sampled in one, is verified first only.
    width = np.int64(int(groups.member.max()) + 1)
    held = held[~np.isin(held[:, 0] * width + held[:, 1], now[:, 0] * width + now[:, 1])]
    return Round(chosen, now[:, 0], now[:, 1], held[:, 0], held[:, 1])


def rest(groups: StarGroups, star: Round) -> tuple[I64Array, I64Array]:
    """The held pairs of `star` whose ends are still in different components, once its
    first pairs' verified edges are merged: the others would join nothing."""
    a, b = star.held_src, star.held_dst
    apart = groups.roots(groups.label_of(a)) != groups.roots(groups.label_of(b))
    return a[apart], b[apart]


def split_groups(groups: StarGroups, centre_rows: I64Array) -> int:
    """How many groups are still split."""
    out = groups.outside(centre_rows)
    return len(np.unique(groups.group[out]))
