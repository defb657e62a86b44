"""One Spark stage at a time, on hand-made frames, against whole expected frames written
out by hand: exact groups, survivors, and the job's own output check."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.testing import assertDataFrameEqual

from neardup import columns as C
from neardup import config
from neardup.errors import InvariantError
from neardup.stages.check import check_outputs
from neardup.stages.exact import group_exact
from neardup.stages.survivors import select_survivors

HASHED = f"{C.DOC_ID} bigint, {C.TEXT_HASH} bigint, {C.TEXT_HASH_LO} bigint, {C.LENGTH} int, {C.RANK} double"
MEMBERS = f"{C.DOC_ID} bigint, {C.REP} bigint, {C.LENGTH} int, {C.RANK} double"


def test_group_exact_picks_each_group_best_by_policy(spark: Any) -> None:
    hashed = spark.createDataFrame(
        [
            # (id, hash hi, hash lo, length, rank)
            (30, 1, 1, 100, 0.2),
            (10, 1, 1, 100, 0.9),  # ties 30 on length: the smaller id represents
            (20, 1, 1, 90, None),
            (7, 1, 2, 50, 0.5),  # same high half, other low half: its own group
            (5, 2, 1, 60, None),
            (6, 2, 1, 61, 0.1),  # the longest of its group
        ],
        HASHED,
    ).repartition(3)
    want = [
        (30, 10, 100, 0.2),
        (10, 10, 100, 0.9),
        (20, 10, 90, None),
        (7, 7, 50, 0.5),
        (5, 6, 60, None),
        (6, 6, 61, 0.1),
    ]
    cfg = config.load()
    assertDataFrameEqual(group_exact(hashed, cfg), spark.createDataFrame(want, MEMBERS))
    # quality: the largest rank; nulls last.
    cfg = config.load(sets=["survivor.policy=quality", "survivor.column=q"])
    want = [
        (30, 10, 100, 0.2),
        (10, 10, 100, 0.9),
        (20, 10, 90, None),
        (7, 7, 50, 0.5),
        (5, 6, 60, None),
        (6, 6, 61, 0.1),
    ]
    assertDataFrameEqual(group_exact(hashed, cfg), spark.createDataFrame(want, MEMBERS))
    # earliest without a column: the smallest id.
    cfg = config.load(sets=["survivor.policy=earliest"])
    want = [
        (30, 10, 100, 0.2),
        (10, 10, 100, 0.9),
        (20, 10, 90, None),
        (7, 7, 50, 0.5),
        (5, 5, 60, None),
        (6, 5, 61, 0.1),
    ]
    assertDataFrameEqual(group_exact(hashed, cfg), spark.createDataFrame(want, MEMBERS))


@pytest.mark.parametrize("broadcast", [True, False])
def test_select_survivors_whole_frame(spark: Any, broadcast: bool) -> None:
    members = spark.createDataFrame(
        [
            (1, 1, 50, None),  # representative, in component A with 2 and 3
            (2, 2, 80, None),  # the longest of A: survivor
            (3, 3, 80, None),  # ties 2 on length; 2 < 3
            (4, 3, 40, None),  # exact copy of 3
            (5, 5, 10, None),  # alone, with an exact copy
            (6, 5, 10, None),
            (7, 7, 99, None),  # alone
            (8, 8, 30, None),  # component B with 9
            (9, 9, 20, None),
        ],
        MEMBERS,
    )
    components = spark.createDataFrame(
        [(1, 1), (2, 1), (3, 1), (8, 8), (9, 8)], f"{C.DOC_ID} bigint, {C.COMPONENT} bigint"
    )
    cfg = config.load()
    got = select_survivors(members, components, cfg, broadcast)
    want = spark.createDataFrame(
        [
            (1, 2, C.STATUS_NEAR, 4),
            (2, 2, C.STATUS_KEPT, 4),
            (3, 2, C.STATUS_NEAR, 4),
            (4, 2, C.STATUS_EXACT, 4),
            (5, 5, C.STATUS_KEPT, 2),
            (6, 5, C.STATUS_EXACT, 2),
            (7, 7, C.STATUS_UNIQUE, 1),
            (8, 8, C.STATUS_KEPT, 2),
            (9, 8, C.STATUS_NEAR, 2),
        ],
        f"{C.DOC_ID} bigint, {C.KEPT_ID} bigint, {C.STATUS} string, _size bigint",
    )
    assertDataFrameEqual(got, want)


CLUSTERS = f"{C.ID} bigint, {C.CLUSTER_ID} bigint, {C.KEPT} boolean, {C.STATUS} string, {C.REASON} string"
GOOD = [
    (1, 1, True, "kept", None),
    (2, 1, False, "near_duplicate", None),
    (3, 1, False, "exact_duplicate", None),
    (4, 4, True, "unique", None),
    (5, None, False, "rejected", "null text"),
]


def _frames(
    spark: Any, clusters: list[tuple[Any, ...]], kept: list[int], rejected: list[int]
) -> tuple[Any, ...]:
    return (
        spark.createDataFrame(clusters, CLUSTERS),
        spark.createDataFrame([(i, "t") for i in kept], "id bigint, text string"),
        spark.createDataFrame(
            [(i, None, "null text") for i in rejected], "id bigint, text string, reason string"
        ),
    )


def test_check_outputs_accepts_a_consistent_output(spark: Any) -> None:
    counts = check_outputs(5, *_frames(spark, GOOD, [1, 4], [5]))
    assert counts == {"kept": 2, "unique": 1, "exact_duplicates": 1, "near_duplicates": 1, "rejected": 1}


@pytest.mark.parametrize(
    ("clusters", "kept", "rejected", "n", "message"),
    [
        (GOOD[:-1], [1, 4], [5], 5, "clusters/ has 4 rows for 5 input rows"),
        ([*GOOD, GOOD[1]], [1, 4], [5], 5, "1 repeated"),
        (GOOD, [1], [5], 5, "kept/ has 1 rows, clusters/ says 2"),
        (GOOD, [1, 4], [], 5, "rejected/ has 0 rows, clusters/ says 1"),
        (
            [*GOOD[:1], (2, 9, False, "near_duplicate", None), *GOOD[2:]],
            [1, 4],
            [5],
            5,
            "1 rows point to a cluster_id",
        ),
        (
            [(1, 1, False, "kept", None), *GOOD[1:]],
            [1, 4],
            [5],
            5,
            "1 rows flagged kept but 2 have a kept status",
        ),
    ],
)
def test_check_outputs_refuses_a_broken_output(
    spark: Any, clusters: list[tuple[Any, ...]], kept: list[int], rejected: list[int], n: int, message: str
) -> None:
    with pytest.raises(InvariantError, match=message):
        check_outputs(n, *_frames(spark, clusters, kept, rejected))
