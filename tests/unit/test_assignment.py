"""Every member's kept document, status, size and similarity on the driver's arrays, against
the rules applied one member at a time in plain Python."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from neardup import columns as C
from neardup.kernels.assignment import STATUSES, assign


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_each_member_takes_its_representatives_kept_document(seed: int) -> None:
    rng = random.Random(seed)
    n = 400
    # Exact groups: a representative per group, the copies point at it.
    reps = sorted(rng.sample(range(n), 250))
    rep = [r if r in reps else rng.choice(reps) for r in range(n)]
    for r in reps:
        rep[r] = r
    # Clusters of representatives, each with a kept one of its own members.
    clustered = rng.sample(reps, 120)
    chosen: dict[int, tuple[int, float | None]] = {}
    for start in range(0, len(clustered), 6):
        members = clustered[start : start + 6]
        kept = members[0]
        for m in members:
            chosen[m] = (kept, None if m == kept else rng.choice([None, 0.8, 0.9]))
    size: dict[int, int] = {}
    for r in range(n):
        kept = chosen.get(rep[r], (rep[r], None))[0]
        size[kept] = size.get(kept, 0) + 1
    sized = {k: v for k, v in size.items() if v > 1}

    kept_of, status_of, size_of, sim_of = assign(
        rep,
        list(chosen),
        [k for k, _ in chosen.values()],
        [math.nan if s is None else s for _, s in chosen.values()],
        list(sized),
        list(sized.values()),
    )
    for r in range(n):
        kept, rep_sim = chosen.get(rep[r], (rep[r], None))
        if r == kept:
            status, sim = (C.STATUS_KEPT if size[kept] > 1 else C.STATUS_UNIQUE), None
        else:
            status = C.STATUS_EXACT if rep[r] != r else C.STATUS_NEAR
            sim = 1.0 if rep[r] == kept else rep_sim
        got_sim = None if np.isnan(sim_of[r]) else sim_of[r]
        row = (int(kept_of[r]), STATUSES[status_of[r]], int(size_of[r]), got_sim)
        assert row == (kept, status, size[kept], sim), r
