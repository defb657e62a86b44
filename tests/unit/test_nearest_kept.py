"""kernels/nearest_kept.py against a plain-Python model of the guard's nearest step as the
distributed step (stages/guard.py's `_nearest_kept`) defines it: which pairs it scores and
where each removed document goes, on random guard outcomes with ties."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from neardup.kernels.nearest_kept import choose_nearest, pairs_to_score

UP_TO, BELOW, MARGIN = 4, 0.8, 0.05


def _case(rng: random.Random, strings: bool) -> dict[str, list]:
    """Origins (clusters before the guard) split into 1 to 6 kept documents, each removed
    document with a similarity to its kept one on a coarse grid (ties)."""
    ids, kept, sims, origin = [], [], [], []
    next_id = 0
    for _ in range(rng.randint(1, 6)):
        o = next_id
        survivors = list(range(next_id, next_id + rng.randint(1, 6)))
        next_id += len(survivors)
        for k in survivors:
            ids.append(k), kept.append(k), sims.append(math.nan), origin.append(o)
        for _ in range(rng.randint(0, 6)):
            ids.append(next_id), kept.append(rng.choice(survivors))
            sims.append(rng.choice([0.7, 0.75, 0.79, 0.8, 0.85, 0.9])), origin.append(o)
            next_id += 1
    order = list(range(len(ids)))
    rng.shuffle(order)
    name = (lambda i: f"d{i}") if strings else (lambda i: i * 7 + 3)
    return {
        "ids": [name(ids[i]) for i in order],
        "kept": [name(kept[i]) for i in order],
        "sims": [sims[i] for i in order],
        "origin": [name(origin[i]) for i in order],
    }


def _model_pairs(c: dict[str, list]) -> set[tuple]:
    rows = list(zip(c["ids"], c["kept"], c["sims"], c["origin"], strict=True))
    survivors: dict = {}
    for i, k, _, o in rows:
        if i == k:
            survivors.setdefault(o, []).append(i)
    split = {o for o, ks in survivors.items() if 1 < len(ks) <= UP_TO}
    return {
        (i, near)
        for i, k, s, o in rows
        if i != k and s < BELOW and o in split
        for near in survivors[o]
        if near != k
    }


def _model_choice(c: dict[str, list], score: dict[tuple, float]) -> dict:
    """The struct minimum: (-(similarity + bonus), not current, kept id)."""
    current = {i: (k, s) for i, k, s in zip(c["ids"], c["kept"], c["sims"], strict=True)}
    cands: dict = {}
    for (doc, near), s in score.items():
        cands.setdefault(doc, []).append((-(s + 0.0), True, near, s))
    moved = {}
    for doc, others in cands.items():
        k, s = current[doc]
        best = min([(-(s + MARGIN), False, k, s), *others])
        if best[1]:
            moved[doc] = (best[2], best[3])
    return moved


@pytest.mark.parametrize("strings", [False, True], ids=["long ids", "string ids"])
def test_pairs_and_choices_are_the_distributed_steps(strings: bool) -> None:
    rng = random.Random(11)
    moved_any = 0
    for _ in range(300):
        c = _case(rng, strings)
        arrays = {k: np.array(v, dtype=object if strings and k != "sims" else None) for k, v in c.items()}
        arrays["sims"] = np.array(c["sims"], dtype=np.float64)
        owner, near = pairs_to_score(
            arrays["ids"], arrays["kept"], arrays["sims"], arrays["origin"], BELOW, UP_TO
        )
        got_pairs = [(arrays["ids"][o], n) for o, n in zip(owner, near, strict=True)]
        assert len(got_pairs) == len(set(got_pairs))
        assert set(got_pairs) == _model_pairs(c)
        # Scores on a grid, so the margin and the id order decide some choices.
        score = {p: rng.choice([0.7, 0.8, 0.84, 0.85, 0.9]) for p in sorted(got_pairs, key=str)}
        low = np.unique(owner)
        doc, kept, sim = choose_nearest(
            arrays["ids"][low],
            arrays["kept"][low],
            arrays["sims"][low],
            np.array([p[0] for p in score], dtype=arrays["ids"].dtype),
            np.array([p[1] for p in score], dtype=arrays["ids"].dtype),
            np.array(list(score.values()), dtype=np.float64),
            MARGIN,
        )
        got = {d: (k, s) for d, k, s in zip(doc.tolist(), kept.tolist(), sim.tolist(), strict=True)}
        assert got == _model_choice(c, score)
        moved_any += len(got)
    assert moved_any > 50  # the cases exercise moves, not only stays


def test_no_split_cluster_gives_no_pairs() -> None:
    ids = np.array([1, 2, 3])
    owner, near = pairs_to_score(
        ids, np.array([1, 1, 1]), np.array([math.nan, 0.5, 0.9]), ids * 0 + 1, 0.8, 32
    )
    assert owner.size == 0 and near.size == 0
