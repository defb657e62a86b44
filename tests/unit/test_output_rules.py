"""The output check's rules (kernels/output_rules.py) on figures, without a JVM: figures
counted here from small outputs written out as Python rows, each kind of damage a lost or
doubled write or a wrong status would do, and the exact phrases the one-line error gives."""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pytest

from neardup.kernels.output_rules import OutputFigures, name_counts, output_counts, output_problems

# clusters/ rows: (id, cluster_id, status, kept, similarity)
CLUSTERS = [
    ("a", "a", "kept", True, None),
    ("b", "a", "near_duplicate", False, 0.9),
    ("c", "a", "exact_duplicate", False, 1.0),
    ("d", "d", "unique", True, None),
    ("e", None, "rejected", False, None),
]
KEPT = ["a", "d"]
REJECTED = ["e", None]  # one rejected row and one malformed line
INPUT_ROWS, MALFORMED = 6, 1


def _figures(clusters: list[tuple], kept: list, rejected: list, guard: float = 0.0) -> OutputFigures:
    """What the check sums, counted row by row."""
    ids = [r[0] for r in clusters]
    survivors = {r[0] for r in clusters if r[3]}
    by_status = {
        s: sum(r[2] == s for r in clusters)
        for s in ("unique", "kept", "exact_duplicate", "near_duplicate", "rejected")
    }
    return OutputFigures(
        input_rows=INPUT_ROWS,
        malformed=MALFORMED,
        rows=len(clusters),
        ids=len({i for i in ids if i is not None}),
        null_ids=sum(i is None for i in ids),
        orphans=sum(r[2] != "rejected" and r[1] not in survivors for r in clusters),
        unique=by_status["unique"],
        kept=by_status["kept"],
        exact=by_status["exact_duplicate"],
        near=by_status["near_duplicate"],
        rejected=by_status["rejected"],
        kept_flags=sum(bool(r[3]) for r in clusters),
        below_guard=sum(r[2] == "near_duplicate" and (r[4] or 0.0) < guard for r in clusters),
        kept_rows=len(kept),
        rejected_rows=len(rejected),
    )


def test_whole_outputs_pass_and_give_the_counts() -> None:
    f = _figures(CLUSTERS, KEPT, REJECTED, guard=0.8)
    assert output_problems(f, 0.8) == []
    assert output_counts(f) == {
        "kept": 2,
        "unique": 1,
        "exact_duplicates": 1,
        "near_duplicates": 1,
        "rejected": 2,
    }


@pytest.mark.parametrize(
    ("clusters", "kept", "rejected", "guard", "expected"),
    [
        # a clusters/ row lost: its document is missing from every count
        (
            CLUSTERS[:-2] + CLUSTERS[-1:],
            KEPT,
            REJECTED,
            None,
            [
                "clusters/ has 4 rows for 5 input rows with an id",
                "kept 1 + removed 2 + rejected 1 + malformed 1 != input 6",
                "kept/ has 2 rows, clusters/ says 1",
            ],
        ),
        # a clusters/ row written twice
        (
            CLUSTERS + CLUSTERS[1:2],
            KEPT,
            REJECTED,
            None,
            [
                "clusters/ has 6 rows for 5 input rows with an id",
                "clusters/ has 1 repeated and 0 null ids",
                "kept 2 + removed 3 + rejected 1 + malformed 1 != input 6",
            ],
        ),
        # kept/ written twice
        (CLUSTERS, KEPT + KEPT, REJECTED, None, ["kept/ has 4 rows, clusters/ says 2"]),
        # rejected/ lost the malformed line
        (
            CLUSTERS,
            KEPT,
            REJECTED[:1],
            None,
            ["rejected/ has 1 rows, clusters/ says 1 and 1 lines were malformed"],
        ),
        # a near duplicate below the guard
        (
            CLUSTERS,
            KEPT,
            REJECTED,
            0.95,
            ["1 near duplicates are below guard.threshold 0.95 against their kept document"],
        ),
        # a removed row names a document that is not kept
        (
            [*CLUSTERS[:1], ("b", "x", "near_duplicate", False, 0.9), *CLUSTERS[2:]],
            KEPT,
            REJECTED,
            None,
            ["1 rows point to a cluster_id that is not a kept document"],
        ),
        # a kept flag on a removed row
        (
            [*CLUSTERS[:2], ("c", "a", "exact_duplicate", True, 1.0), *CLUSTERS[3:]],
            KEPT,
            REJECTED,
            None,
            ["3 rows flagged kept but 2 have a kept status"],
        ),
    ],
    ids=["lost-row", "doubled-row", "doubled-kept", "lost-malformed", "below-guard", "orphan", "kept-flag"],
)
def test_each_damage_is_named(
    clusters: list[tuple], kept: list, rejected: list, guard: float | None, expected: list[str]
) -> None:
    f = _figures(clusters, kept, rejected, guard or 0.0)
    assert output_problems(f, guard) == expected


def test_without_a_guard_similarity_is_not_checked() -> None:
    f = replace(_figures(CLUSTERS, KEPT, REJECTED), below_guard=1)
    assert output_problems(f, None) == []


@pytest.mark.parametrize("ids", ["int64", "string"])
def test_name_counts_against_sets(ids: str) -> None:
    """Distinct ids and orphans (named cluster_ids no kept row has), as sets count them."""
    rng = random.Random(5)
    rows = [(rng.randrange(300), True, rng.random() < 0.7, rng.random() < 0.1) for _ in range(400)]
    rows += [(rng.randrange(400), False, False, True) for _ in range(150)]  # names only
    key = [r[0] if ids == "int64" else f"id-{r[0]}" for r in rows]
    keys = np.array(key, dtype=np.int64 if ids == "int64" else object)
    is_row, survivor, need = (np.array([r[i] for r in rows]) for i in (1, 2, 3))
    kept = {k for k, r in zip(key, rows, strict=True) if r[1] and r[2]}
    orphans = sum(1 for k, r in zip(key, rows, strict=True) if r[3] and k not in kept)
    distinct = len({k for k, r in zip(key, rows, strict=True) if r[1]})
    assert name_counts(keys, is_row, survivor, need) == (distinct, orphans)
    assert 0 < orphans < 150


def test_name_counts_of_nothing_kept() -> None:
    none = np.zeros(0, dtype=bool)
    assert name_counts(np.zeros(0, dtype=np.int64), none, none, none) == (0, 0)
    key = np.array([3, 3, 7], dtype=np.int64)
    flags = np.array([True, False, False]), np.array([False, False, False]), np.array([False, True, True])
    assert name_counts(key, *flags) == (1, 2)  # 3 is a row but not kept: both names orphans
