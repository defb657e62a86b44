"""One Spark stage at a time, on hand-made frames, against whole expected frames written
out by hand: exact groups, survivors, the over-merge guard, and the job's own output check."""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import math
import random
from collections import Counter
from typing import Any

import numpy as np
import pytest
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from frames import assert_counted, assert_frames_equal
from neardup import columns as C
from neardup import config
from neardup.config import Config
from neardup.errors import InvariantError
from neardup.stages import driver_frames
from neardup.stages.against import cross_edges
from neardup.stages.check import check_outputs
from neardup.stages.components import connected_components
from neardup.stages.driver_frames import collect_arrays, frame_from_arrays
from neardup.stages.exact import exact_groups, exact_on_driver, group_exact, orders_on_driver
from neardup.stages.guard import GuardStats, guard_clusters
from neardup.stages.membership import (
    assign_members,
    assign_on_driver,
    cluster_sizes,
    clustered_figures,
    clustered_on_driver,
    sizes_on_driver,
)
from neardup.stages.read import documents
from neardup.stages.sign import sign_documents, sign_params
from neardup.stages.survivors import choose_survivors, survivor_ranking, survivors_on_driver
from neardup_testkit import reference

HASHED = f"{C.DOC_ID} bigint, {C.TEXT_HASH} bigint, {C.TEXT_HASH_LO} bigint, {C.LENGTH} int, {C.RANK} double"
MEMBERS = f"{C.DOC_ID} bigint, {C.REP} bigint, {C.LENGTH} int, {C.RANK} double"


@pytest.mark.compat
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
    assert_frames_equal(group_exact(hashed, cfg), spark.createDataFrame(want, MEMBERS))
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
    assert_frames_equal(group_exact(hashed, cfg), spark.createDataFrame(want, MEMBERS))
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
    assert_frames_equal(group_exact(hashed, cfg), spark.createDataFrame(want, MEMBERS))


@pytest.mark.compat
def test_signed_rows_measure_each_text_as_spark_does(spark: Any) -> None:
    """The signing stage's `_len` and `_bytes` (Arrow's, in the Python workers) are Spark's
    own `length` and `octet_length` of the text, null text 0: the survivor policy's length
    and the driver's text budget, through the stage's real schema."""
    texts = ["plain ascii words here", "Ünïcödé and 日本語 and 🙂 emoji", None, "   ", "é" * 300]
    cfg = config.load()
    df = spark.createDataFrame(list(enumerate(texts)), "id bigint, text string").repartition(2)
    signed = sign_documents(documents(df, cfg), sign_params(cfg), keep_signatures=False)
    rows = signed.select(C.DOC_ID, C.LENGTH, C.BYTES).collect()
    got = {r[C.DOC_ID]: (r[C.LENGTH], r[C.BYTES]) for r in rows}
    want = df.select(
        "id",
        F.coalesce(F.length("text"), F.lit(0)).alias("chars"),
        F.coalesce(F.octet_length("text"), F.lit(0)).alias("bytes"),
    ).collect()
    assert got == {r["id"]: (r["chars"], r["bytes"]) for r in want}
    assert got[1][1] > got[1][0] and got[4] == (300, 600)


@pytest.mark.parametrize("ids", ["bigint", "string"])
def test_exact_groups_on_the_driver_are_the_windows(spark: Any, ids: str, monkeypatch: Any) -> None:
    """`exact_on_driver` against `group_exact`'s window, policy by policy: ties on length,
    null and non-ASCII ranks (strings order by their UTF-8 bytes in both)."""
    rng = random.Random(7)
    rows = []
    for i in range(300):
        doc = i * 7 - 900 if ids == "bigint" else f"d{rng.choice('aéz日')}{i}"
        rank = None if rng.random() < 0.3 else rng.choice(["a", "é", "z", "日", "Z"])
        keys = [rng.randrange(1 << 40) for _ in range(3)]
        rows.append(
            (
                doc,
                rng.randrange(30),
                rng.randrange(3),
                rng.randrange(4),
                rng.randrange(100),
                rank,
                rng.randrange(3),
                reference.band_key_bytes(keys),
            )
        )
    schema = (
        f"{C.DOC_ID} {ids}, {C.TEXT_HASH} bigint, {C.TEXT_HASH_LO} bigint, {C.LENGTH} int, "
        f"{C.BYTES} int, {C.RANK} string, {C.PRIORITY} int, {C.BAND_KEYS} binary"
    )
    hashed = spark.createDataFrame(rows, schema).repartition(3)
    keys_of = {r[0]: r[7] for r in rows}
    bytes_of = {r[0]: r[4] for r in rows}
    policies = [
        [],
        ["survivor.policy=earliest", "survivor.column=r"],
        ["survivor.policy=quality", "survivor.column=r"],
        [
            "survivor.policy=priority",
            "survivor.priority_column=p",
            "survivor.priority=[x]",
            "survivor.then=quality",
            "survivor.column=r",
        ],
    ]
    for sets in policies:
        cfg = config.load(sets=sets)
        assert orders_on_driver(hashed, cfg)
        got = exact_on_driver(hashed, cfg)
        members = group_exact(hashed, cfg)
        assert_frames_equal(got.members, members)
        assert_frames_equal(got.groups, exact_groups(members))
        want = members.collect()
        assert sorted(got.copy_ids.tolist()) == sorted(r[C.DOC_ID] for r in want if r[C.REP] != r[C.DOC_ID])
        reps = got.rep_ids.to_pylist()
        assert sorted(reps) == sorted(r[C.DOC_ID] for r in want if r[C.REP] == r[C.DOC_ID])
        held = [got.band_keys[row].astype("<i8").tobytes() for row in got.held.rep_rows]
        assert held == [keys_of[doc] for doc in reps]
        # The texts' bytes of any representatives; None where one is not held.
        some = rng.sample(reps, min(40, len(reps)))
        asked_ids = np.array(some, dtype=np.int64 if ids == "bigint" else object)
        assert got.held.text_bytes(asked_ids) == sum(bytes_of[doc] for doc in some)
        assert [got.held.text_bytes(asked_ids[i : i + 1]) for i in range(len(some))] == [
            bytes_of[doc] for doc in some
        ]
        copy = got.copy_ids[:1]
        assert len(copy) == 1 and got.held.text_bytes(np.concatenate([asked_ids, copy])) is None
        # The held policy keys: survivors of components and the guard's ranking, against
        # the Spark aggregation and sort (of about 80 representatives, 60 in 8 components).
        nodes = rng.sample(reps, min(60, len(reps)))
        group = {doc: rng.randrange(8) for doc in nodes}
        label = {g: min(d for d in nodes if group[d] == g) for g in set(group.values())}
        components = spark.createDataFrame(
            [(d, label[group[d]]) for d in nodes], f"{C.DOC_ID} {ids}, {C.COMPONENT} {ids}"
        )
        reps_frame = members.filter(F.col(C.REP) == F.col(C.DOC_ID))
        node_ids, kept_ids = survivors_on_driver(components, got.held.order)
        chosen = choose_survivors(reps_frame, components, cfg).collect()
        assert dict(zip(node_ids.tolist(), kept_ids.tolist(), strict=True)) == {
            r[C.DOC_ID]: r[C.KEPT_ID] for r in chosen
        }
        asked = np.array(nodes, dtype=object if ids == "string" else np.int64)
        assert got.held.order.best_first(asked).tolist() == survivor_ranking(reps_frame, asked, cfg).tolist()
        # Every member's row from the held members, against the Spark joins; in id order.
        sims = [
            (d, k, None if d == k else rng.choice([None, 0.5, 0.75]))
            for d, k in ((r[C.DOC_ID], r[C.KEPT_ID]) for r in chosen)
        ]
        guarded = spark.createDataFrame(sims, f"{C.DOC_ID} {ids}, {C.KEPT_ID} {ids}, {C.SIMILARITY} double")
        sizes = cluster_sizes(guarded.select(C.DOC_ID, C.KEPT_ID), got.groups)
        assigned = assign_on_driver(got.held, got.members, guarded, sizes)
        assert_frames_equal(assigned, assign_members(members, guarded, sizes))
        assert [r[C.DOC_ID] for r in assigned.collect()] == sorted(r[C.DOC_ID] for r in want)
        # In more than one partition, each holds the ids after the last one's (clusters/ is
        # written in that order, without a sort).
        monkeypatch.setattr(driver_frames, "_MIN_PARTITION_ROWS", 50)
        split = assign_on_driver(got.held, got.members, guarded, sizes)
        with_part = split.select(F.spark_partition_id().alias("p"), C.DOC_ID)
        placed = [(r["p"], r[C.DOC_ID]) for r in with_part.collect()]
        assert len({p for p, _ in placed}) > 1 and sorted(placed) == sorted(placed, key=lambda x: x[1])
        monkeypatch.undo()


def test_a_floating_point_policy_column_is_ordered_by_the_window(spark: Any) -> None:
    hashed = spark.createDataFrame([], HASHED)
    assert orders_on_driver(hashed, config.load())
    assert not orders_on_driver(hashed, config.load(sets=["survivor.policy=quality", "survivor.column=q"]))


def select_survivors(
    members: DataFrame, groups: DataFrame, components: DataFrame, cfg: Config, small: bool = True
) -> DataFrame:
    """members (_id, _rep, _len, _rank[, _priority]): every signed document and exact copy; groups
    (_rep, _copies): `exact_groups` of members; components (_id, _component):
    representatives that have a verified edge -> (_id, _kept_id, status, _size,
    similarity) with one row per member, before any guard (similarity null but for exact
    copies of kept documents)."""
    reps = members.filter(F.col(C.REP) == F.col(C.DOC_ID))
    chosen = choose_survivors(reps, components, cfg, small).withColumn(
        C.SIMILARITY, F.lit(None).cast("double")
    )
    return assign_members(members, chosen, cluster_sizes(chosen, groups), small)


@pytest.mark.compat
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
    got = select_survivors(members, exact_groups(members), components, cfg, broadcast)
    want = spark.createDataFrame(
        [
            (1, 2, C.STATUS_NEAR, 4, None),  # not scored: no guard here
            (2, 2, C.STATUS_KEPT, 4, None),
            (3, 2, C.STATUS_NEAR, 4, None),
            (4, 2, C.STATUS_EXACT, 4, None),  # a copy takes its representative's
            (5, 5, C.STATUS_KEPT, 2, None),
            (6, 5, C.STATUS_EXACT, 2, 1.0),  # a copy of the kept document itself
            (7, 7, C.STATUS_UNIQUE, 1, None),
            (8, 8, C.STATUS_KEPT, 2, None),
            (9, 8, C.STATUS_NEAR, 2, None),
        ],
        f"{C.DOC_ID} bigint, {C.KEPT_ID} bigint, {C.STATUS} string, _size bigint, {C.SIMILARITY} double",
    )
    assert_frames_equal(got, want)


def _sizes_by_hand(members: list[tuple[int, int]], kept_of: dict[int, int]) -> Counter[int]:
    """members (id, rep); kept_of: a clustered representative -> its kept one. Documents per
    kept document, counted member by member."""
    return Counter(kept_of.get(rep, rep) for _, rep in members)


def _planted(seed: int) -> tuple[list[tuple[int, int]], dict[int, int]]:
    """members (id, rep): 100 representatives with 0-5 exact copies each (ids from 1000 up);
    kept_of: clusters of 2-5 representatives, each kept by one of them; the rest stay alone
    (with seed 3, one of them with more copies than any cluster has documents)."""
    rng = random.Random(seed)
    reps = list(range(0, 400, 4))
    copies = [(1000 + 10 * r + k, r) for r in reps for k in range(rng.randint(0, 5))]
    members = [(r, r) for r in reps] + copies
    pool = reps[:]
    rng.shuffle(pool)
    kept_of: dict[int, int] = {}
    while len(pool) > 40:
        k = rng.randint(2, 5)
        group, pool = pool[:k], pool[k:]
        keeper = rng.choice(group)
        kept_of.update({r: keeper for r in group})
    if seed == 3:
        members += [(5000 + k, pool[0]) for k in range(40)]
    return members, kept_of


def _frames_of(spark: Any, members: list[tuple[int, int]], kept_of: dict[int, int]) -> tuple[Any, Any]:
    """(clustered (_id, _kept_id) in 3 partitions, exact groups of the members)."""
    frame = spark.createDataFrame(members, f"{C.DOC_ID} bigint, {C.REP} bigint")
    clustered = spark.createDataFrame(list(kept_of.items()), f"{C.DOC_ID} bigint, {C.KEPT_ID} bigint")
    return clustered.repartition(3), exact_groups(frame)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_clustered_figures_against_member_counts(spark: Any, seed: int) -> None:
    """`clustered_figures` and `clustered_on_driver` (with its frame, whole)."""
    members, kept_of = _planted(seed)
    clustered, groups = _frames_of(spark, members, kept_of)
    want = (len(kept_of), max(_sizes_by_hand(members, kept_of).values()))
    assert clustered_figures(clustered, groups) == want
    frame, *figures = clustered_on_driver(clustered, groups)
    assert tuple(figures) == want
    assert {r[C.DOC_ID]: r[C.KEPT_ID] for r in frame.collect()} == kept_of and frame.count() == len(kept_of)


@pytest.mark.parametrize("on_driver", [False, True])
def test_cluster_sizes_against_member_counts(spark: Any, on_driver: bool) -> None:
    """`cluster_sizes` and `sizes_on_driver`, whole: a row per kept document of a cluster and
    per exact group outside any, each with its members counted one by one; and the figures
    the guard reports from them."""
    members, kept_of = _planted(3)
    clustered, groups = _frames_of(spark, members, kept_of)
    by_hand = _sizes_by_hand(members, kept_of)
    want = {k: n for k, n in by_hand.items() if k in kept_of.values() or n > 1}
    if on_driver:
        sizes, figures = sizes_on_driver(clustered, groups)
        assert figures == {
            "clusters": sum(n > 1 for n in want.values()),
            "largest": max(want.values()),
            "removed": sum(n - 1 for n in want.values()),
        }
    else:
        sizes = cluster_sizes(clustered, groups)
    got = {r[C.KEPT_ID]: r["_size"] for r in sizes.collect()}
    assert got == want and sizes.count() == len(want)


@pytest.mark.compat
def test_clustered_figures_without_duplicates(spark: Any) -> None:
    frame = spark.createDataFrame([(1, 1), (2, 2)], f"{C.DOC_ID} bigint, {C.REP} bigint")
    clustered = spark.createDataFrame([], f"{C.DOC_ID} bigint, {C.KEPT_ID} bigint")
    assert clustered_figures(clustered, exact_groups(frame)) == (0, 1)


CLUSTERS = (
    f"{C.ID} bigint, {C.CLUSTER_ID} bigint, {C.KEPT} boolean, {C.STATUS} string, {C.SIMILARITY} double, "
    f"{C.REASON} string"
)
GOOD = [
    (1, 1, True, "kept", None, None),
    (2, 1, False, "near_duplicate", 0.75, None),
    (3, 1, False, "exact_duplicate", 1.0, None),
    (4, 4, True, "unique", None, None),
    (5, None, False, "rejected", None, "null text"),
]


def _frames(
    spark: Any, clusters: list[tuple[Any, ...]], kept: list[int], rejected: list[int]
) -> tuple[Any, Any, Any]:
    return (
        spark.createDataFrame(clusters, CLUSTERS),
        spark.createDataFrame([(i, "t") for i in kept], "id bigint, text string"),
        spark.createDataFrame(
            [(i, None, "null text") for i in rejected], "id bigint, text string, reason string"
        ),
    )


@pytest.mark.parametrize("on_driver", [False, True])
def test_check_outputs_accepts_a_consistent_output(spark: Any, on_driver: bool) -> None:
    counts = check_outputs(5, *_frames(spark, GOOD, [1, 4], [5]), guard_threshold=0.7, on_driver=on_driver)
    assert counts == {"kept": 2, "unique": 1, "exact_duplicates": 1, "near_duplicates": 1, "rejected": 1}


@pytest.mark.parametrize(
    ("clusters", "kept", "rejected", "n", "message"),
    [
        (GOOD[:-1], [1, 4], [5], 5, "clusters/ has 4 rows for 5 input rows"),
        ([*GOOD, GOOD[1]], [1, 4], [5], 5, "1 repeated"),
        (GOOD, [1], [5], 5, "kept/ has 1 rows, clusters/ says 2"),
        (GOOD, [1, 4], [], 5, "rejected/ has 0 rows, clusters/ says 1"),
        (
            [*GOOD[:1], (2, 9, False, "near_duplicate", 0.75, None), *GOOD[2:]],
            [1, 4],
            [5],
            5,
            "1 rows point to a cluster_id",
        ),
        ([*GOOD[:-1], (None, None, False, "rejected", None, "x")], [1, 4], [5], 5, "and 1 null ids"),
        # A removed row naming itself, and one naming nothing: neither names a kept document.
        (
            [*GOOD[:1], (2, 2, False, "near_duplicate", 0.75, None), *GOOD[2:]],
            [1, 4],
            [5],
            5,
            "1 rows point to a cluster_id",
        ),
        (
            [*GOOD[:1], (2, None, False, "near_duplicate", 0.75, None), *GOOD[2:]],
            [1, 4],
            [5],
            5,
            "1 rows point to a cluster_id",
        ),
        (
            [(1, 1, False, "kept", None, None), *GOOD[1:]],
            [1, 4],
            [5],
            5,
            "1 rows flagged kept but 2 have a kept status",
        ),
        (
            [*GOOD[:1], (2, 1, False, "near_duplicate", 0.69, None), *GOOD[2:]],
            [1, 4],
            [5],
            5,
            "1 near duplicates are below guard.threshold 0.7",
        ),
    ],
)
def test_check_outputs_refuses_a_broken_output(
    spark: Any, clusters: list[tuple[Any, ...]], kept: list[int], rejected: list[int], n: int, message: str
) -> None:
    """Each broken output, both ways of counting the names (grouped and on the driver)."""
    for on_driver in (False, True):
        with pytest.raises(InvariantError, match=message):
            check_outputs(
                n, *_frames(spark, clusters, kept, rejected), guard_threshold=0.7, on_driver=on_driver
            )


# A drifting chain 1-2-3-4-5-6 (each step J = 0.85, so J(i, j) = 0.85^|i - j| in this
# made-up similarity table) and a star 10-{11, 12}. Longer documents have smaller ids, so
# the survivor of any group is its smallest id.
_CHAIN_SIM = {(i, j): round(0.85 ** (j - i), 6) for i in range(1, 7) for j in range(i + 1, 7)}
_STAR_SIM = {(10, 11): 0.9, (10, 12): 0.95, (11, 12): 0.86}
_EDGES = [(i, i + 1, 0.85) for i in range(1, 6)] + [(10, 11, 0.9), (10, 12, 0.95)]


def _guard(
    spark: Any,
    threshold: float | None,
    max_rounds: int,
    pinned: tuple[int, ...] = (),
    nearest_below: float | None = None,
    distributed: bool = False,
) -> tuple[dict[int, Any], GuardStats]:
    """The guard on the chain and the star; `pinned`: indexed documents (dedup --against),
    first in the survivor order and never removed. Its regrouping labels components on the
    driver, as dedup does where the edges are within the broadcast bound (every run of the
    test corpora), and its rounds and nearest step keep their books there too;
    `distributed`: all by Spark jobs instead, as on a large input (each call a few Spark
    jobs more)."""
    cfg = config.load()
    edge_schema = f"{C.SRC} bigint, {C.DST} bigint, {C.SIMILARITY} double"
    edges = spark.createDataFrame(_EDGES, edge_schema)
    table = spark.createDataFrame(
        [(a, b, s) for (a, b), s in {**_CHAIN_SIM, **_STAR_SIM}.items()], edge_schema
    )
    ids = [1, 2, 3, 4, 5, 6, 10, 11, 12]
    reps = spark.createDataFrame(
        [(i, 1000 - i, None, i in pinned) for i in ids],
        f"{C.DOC_ID} bigint, {C.LENGTH} int, {C.RANK} double, {C.FROM_INDEX} boolean",
    )
    prefer = bool(pinned)
    scored: list[int] = []

    def score(pairs: Any, bound: int | None, known: Any) -> Any:
        scored.append(pairs.count())
        # A bound the guard gives must hold: the scoring sizes its tasks by it; and so must
        # its counts, by which the scoring spreads a large group.
        assert bound is None or scored[-1] <= bound
        if known is not None:
            assert_counted(pairs, known)
        # From the kept document, whichever id is smaller (as verify_pairs scores them).
        ordered = pairs.select(F.least(C.SRC, C.DST).alias(C.SRC), F.greatest(C.SRC, C.DST).alias(C.DST))
        sims = ordered.join(table, [C.SRC, C.DST])
        # Back in the caller's order: (src, dst) as asked.
        return (
            pairs.join(
                sims.select(F.col(C.SRC).alias("_a"), F.col(C.DST).alias("_b"), C.SIMILARITY),
                F.least(C.SRC, C.DST) == F.col("_a"),
            )
            .filter(F.greatest(C.SRC, C.DST) == F.col("_b"))
            .select(C.SRC, C.DST, C.SIMILARITY)
        )

    way: dict[str, Any] = {"backend": "builtin"} if distributed else {"backend": "auto", "on_driver": True}

    def components(e: Any) -> Any:
        return connected_components(e, **way)[0]

    comps = components(edges.select(C.SRC, C.DST))
    chosen = choose_survivors(reps, comps, cfg, prefer_index=prefer)
    out, stats = guard_clusters(
        chosen,
        edges,
        score=score,
        choose=lambda c: choose_survivors(reps, c, cfg, prefer_index=prefer),
        components=components,
        keep=lambda df: df.cache(),
        threshold=threshold,
        max_rounds=max_rounds,
        pinned=spark.createDataFrame([(i,) for i in pinned], f"{C.DOC_ID} bigint") if pinned else None,
        nearest_below=nearest_below,
        on_driver=not distributed,
        ranking=lambda ids: survivor_ranking(reps, ids, cfg, prefer_index=prefer),
    )
    assert out.columns == [C.DOC_ID, C.KEPT_ID, C.SIMILARITY]
    # The nearest step's scoring is the last call, not a round's.
    rounds = scored[:-1] if nearest_below is not None and stats.clusters_split else scored
    assert stats.scored_pairs == sum(rounds)
    return {r[C.DOC_ID]: (r[C.KEPT_ID], r[C.SIMILARITY]) for r in out.collect()}, stats


# The rounds that split the chain: their figures, whichever way the guard runs.
_CHAIN_ROUNDS = GuardStats(
    rounds=2, scored_pairs=5, clusters_split=1, documents_rehomed=3, released=0, failing_per_round=[3, 0]
)


def test_guard_splits_a_drifting_chain_until_every_member_clears_it(spark: Any) -> None:
    """On the driver; the same rounds by Spark jobs are the nearest step's test's first part
    (its distributed case), which runs them and checks their figures before its own step."""
    got, stats = _guard(spark, threshold=0.7, max_rounds=20)
    # Round 1: 2 (0.85) and 3 (0.7225) clear 1; 4, 5, 6 (0.61, 0.52, 0.44) do not. Round 2:
    # 4-5-6 regroup around 4; 5 (0.85) and 6 (0.7225) clear it. The star is untouched.
    assert got == {
        1: (1, None),
        2: (1, 0.85),
        3: (1, 0.7225),
        4: (4, None),
        5: (4, 0.85),
        6: (4, 0.7225),
        10: (10, None),
        11: (10, 0.9),
        12: (10, 0.95),
    }
    # Scored afresh (no edge to the kept one): 3, 4, 5, 6 against 1, then 6 against 4.
    assert stats == _CHAIN_ROUNDS


@pytest.mark.parametrize("distributed", [False, True], ids=["driver", "distributed"])
def test_guard_sends_a_removed_document_below_the_threshold_to_its_nearest_kept_one(
    spark: Any, distributed: bool
) -> None:
    """After the rounds split the chain around 1 and 4, 3 (0.7225 to 1, below 0.8) is scored
    against 4 (0.85) and moves there; 2 (0.85 to 1) and the star stay."""
    got, stats = _guard(spark, threshold=0.7, max_rounds=20, nearest_below=0.8, distributed=distributed)
    assert got == {
        1: (1, None),
        2: (1, 0.85),
        3: (4, 0.85),
        4: (4, None),
        5: (4, 0.85),
        6: (4, 0.7225),
        10: (10, None),
        11: (10, 0.9),
        12: (10, 0.95),
    }
    # The rounds before the nearest step are the drifting chain's (its test's figures), and
    # the step moves one document.
    assert stats == dataclasses.replace(_CHAIN_ROUNDS, moved_to_nearest=1)


@pytest.mark.parametrize("distributed", [False, True], ids=["driver", "distributed"])
def test_guard_keeps_alone_what_still_fails_after_max_rounds(spark: Any, distributed: bool) -> None:
    got, stats = _guard(spark, threshold=0.7, max_rounds=1, distributed=distributed)
    assert {i: got[i] for i in (4, 5, 6)} == {4: (4, None), 5: (5, None), 6: (6, None)}
    assert {i: got[i] for i in (1, 2, 3)} == {1: (1, None), 2: (1, 0.85), 3: (1, 0.7225)}
    assert (stats.rounds, stats.released, stats.documents_rehomed) == (1, 3, 3)


@pytest.mark.parametrize(
    "distributed", [pytest.param(False, marks=pytest.mark.compat), True], ids=["driver", "distributed"]
)
def test_guard_off_only_scores(spark: Any, distributed: bool) -> None:
    got, stats = _guard(spark, threshold=None, max_rounds=20, distributed=distributed)
    want_chain = {i: (1, None if i == 1 else _CHAIN_SIM[(1, i)]) for i in range(1, 7)}
    assert got == {**want_chain, 10: (10, None), 11: (10, 0.9), 12: (10, 0.95)}
    assert (stats.rounds, stats.scored_pairs, stats.clusters_split) == (1, 4, 0)


@pytest.mark.parametrize("distributed", [False, True], ids=["driver", "distributed"])
def test_guard_never_removes_pinned_documents(spark: Any, distributed: bool) -> None:
    """2 and 5 are indexed: 2 (first of the chain's indexed ones) is kept in its place; 5,
    never removed, is split off whatever its score and becomes the survivor of what is
    re-clustered with it."""
    got, stats = _guard(spark, threshold=0.7, max_rounds=20, pinned=(2, 5), distributed=distributed)
    # Round 1 around 2: 1 and 3 (0.85) and 4 (0.7225) clear it; 5 is pinned; 6 (0.522)
    # fails. Round 2: 5-6 regroup around 5, and 6 (0.85) clears it.
    assert got == {
        1: (2, 0.85),
        2: (2, None),
        3: (2, 0.85),
        4: (2, 0.7225),
        5: (5, None),
        6: (5, 0.85),
        10: (10, None),
        11: (10, 0.9),
        12: (10, 0.95),
    }
    assert stats.failing_per_round == [2, 0]
    # With the guard off, the rounds still run for the pinned ones: 5 alone (its only edge
    # inside the split-off set would be to another split-off document).
    off, stats = _guard(spark, threshold=None, max_rounds=20, pinned=(2, 5), distributed=distributed)
    want = {i: (2, None if i == 2 else _CHAIN_SIM[tuple(sorted((i, 2)))]) for i in (1, 2, 3, 4, 6)}
    assert off == {**want, 5: (5, None), 10: (10, None), 11: (10, 0.9), 12: (10, 0.95)}
    assert stats.failing_per_round == [1, 0]


@pytest.mark.compat
def test_cross_edges_bound_each_bucket_by_its_indexed_documents(spark: Any) -> None:
    """Buckets a batch shares with the index: all pairs while the bucket holds at most
    all_pairs_up_to (2 here) indexed documents, else each batch document with the smallest
    indexed id; a pair sharing two buckets once; src < dst whichever end is indexed."""
    shared = spark.createDataFrame(
        # (band key, document number, segment): the index's rows in shared buckets
        [(7, 0, 0), (7, 1, 0), (8, 0, 1), (8, 1, 1), (8, 2, 1), (9, 0, 0)],
        f"{C.BAND_KEY} bigint, {C.DOC_NO} bigint, {C.SEGMENT} int",
    )
    docs = spark.createDataFrame(
        [(0, 0, 100), (0, 1, 600), (1, 0, 202), (1, 1, 200), (1, 2, 201), (1, 3, 999)],
        f"{C.SEGMENT} int, {C.DOC_NO} bigint, {C.DOC_ID} bigint",
    )
    batch = spark.createDataFrame(
        [(1, 7), (500, 7), (3, 8), (1, 9), (4, 10)], f"{C.DOC_ID} bigint, {C.BAND_KEY} bigint"
    )
    want = spark.createDataFrame(
        [
            (1, 100, 100),  # bucket 7 (100, 600 indexed), and again bucket 9
            (1, 600, 600),
            (100, 500, 100),
            (500, 600, 600),
            (3, 200, 200),  # bucket 8 holds 3 indexed documents: the smallest only
        ],
        f"{C.SRC} bigint, {C.DST} bigint, {C.INDEX_ID} bigint",
    )
    for small in (True, False):
        assert_frames_equal(cross_edges(shared, docs, batch, 2, small), want)


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (None, "consistent"),
        ((6, 100, False, "near_duplicate", 0.9, None, 101), "1 rows with a matched_index_id are not removed"),
        ((6, 100, True, "unique", None, None, 100), "1 rows with a matched_index_id are not removed"),
        ((6, 300, False, "near_duplicate", 0.9, None, 300), "1 matched_index_id values are not in the index"),
        ((6, 300, False, "near_duplicate", 0.9, None, None), "1 rows point to a cluster_id"),
    ],
)
def test_check_outputs_with_an_index(spark: Any, row: tuple[Any, ...] | None, message: str) -> None:
    """dedup --against: a cluster_id may be an indexed document, named by matched_index_id.
    The consistent output (row None) is accepted; each broken one refused."""
    schema = f"{CLUSTERS}, {C.MATCHED_INDEX_ID} bigint"
    good = [(*r, None) for r in GOOD] + [(6, 100, False, "near_duplicate", 0.9, None, 100)]
    index_ids = spark.createDataFrame([(100,), (101,)], f"{C.DOC_ID} bigint")
    kept = spark.createDataFrame([(1, "t"), (4, "t")], "id bigint, text string")
    rejected = spark.createDataFrame([(5, None, "null text")], "id bigint, text string, reason string")
    for on_driver in (False, True):
        if row is None:
            counts = check_outputs(
                6,
                spark.createDataFrame(good, schema),
                kept,
                rejected,
                index_ids=index_ids,
                on_driver=on_driver,
            )
            assert counts["matched_index"] == 1 and counts["near_duplicates"] == 2
            continue
        broken = spark.createDataFrame([*good[:-1], row], schema)
        kept_rows = (
            kept
            if not row[2]
            else spark.createDataFrame([(1, "t"), (4, "t"), (6, "t")], "id bigint, text string")
        )
        with pytest.raises(InvariantError, match=message):
            check_outputs(6, broken, kept_rows, rejected, index_ids=index_ids, on_driver=on_driver)


def _policy_cmp(descending: bool) -> Any:
    """Python's order of one survivor key as the policy means it: nulls last; NaN the
    largest value; -0.0 equal to 0.0; `descending` reverses the values, not the nulls."""

    def cmp(a: Any, b: Any) -> int:
        if a is None or b is None:
            return (a is None) - (b is None)
        a_nan, b_nan = isinstance(a, float) and math.isnan(a), isinstance(b, float) and math.isnan(b)
        c = a_nan - b_nan if a_nan or b_nan else (a > b) - (a < b)
        return -c if descending else c

    return cmp


_RANK_VALUES: dict[str, list[Any]] = {
    "double": [None, float("nan"), -0.0, 0.0, float("inf"), float("-inf"), 1.5, -2.25, 1.5],
    "bigint": [None, -(2**63), 2**63 - 1, 0, -1, 7, 7],
    "timestamp": [None, dt.datetime(1969, 12, 31, 23, 59, 59, 999999), dt.datetime(2026, 1, 2, 3, 4, 5, 6)],
    "date": [None, dt.date(1900, 1, 1), dt.date(2026, 12, 1), dt.date(1970, 1, 1)],
    "boolean": [None, True, False],
    "string": [None, "", "a", "b", "ab"],
}


# On Spark 3.5 (compat) every type with one policy, the descending one: the ascending one
# sorts the same values (it took 22 s of the 3.5 tier's CPU).
@pytest.mark.parametrize("policy", ["earliest", pytest.param("quality", marks=pytest.mark.compat)])
@pytest.mark.parametrize("rank_type", list(_RANK_VALUES))
def test_choose_survivors_is_the_policys_sort_for_every_column_type(
    spark: Any, policy: str, rank_type: str
) -> None:
    """choose_survivors' aggregation (the smallest struct per component; a descending
    string falls back to the window) against a Python sort of each component by the policy:
    nulls last, NaN largest, extremes of the type, ties broken by the smallest id."""
    rng = random.Random(f"{policy}-{rank_type}")
    values = _RANK_VALUES[rank_type]
    ids = rng.sample(range(1, 10_000), 120)
    nodes = [(i, rng.randrange(1, 50), rng.choice(values)) for i in ids]
    component_of = {i: rng.choice(ids[:12]) for i in ids}  # about 12 components, some large
    comps = [(i, min(j for j in ids if component_of[j] == component_of[i])) for i in ids]
    reps = spark.createDataFrame(
        nodes, f"{C.DOC_ID} bigint, {C.LENGTH} int, {C.RANK} {rank_type}"
    ).repartition(5)
    components = spark.createDataFrame(comps, f"{C.DOC_ID} bigint, {C.COMPONENT} bigint").repartition(3)
    cfg = config.load(sets=[f"survivor.policy={policy}", "survivor.column=r"])
    by_rank = functools.cmp_to_key(_policy_cmp(descending=policy == "quality"))
    rank_of = {i: r for i, _, r in nodes}
    want_kept: dict[int, int] = {}
    for comp in {c for _, c in comps}:
        members = sorted((i for i, c in comps if c == comp), key=lambda i: (by_rank(rank_of[i]), i))
        want_kept.update({i: members[0] for i in members})
    want = spark.createDataFrame(sorted(want_kept.items()), f"{C.DOC_ID} bigint, {C.KEPT_ID} bigint")
    for small in (True, False):
        assert_frames_equal(choose_survivors(reps, components, cfg, small), want)


def test_a_frame_of_driver_arrays_is_a_partition_per_core_whatever_the_arrow_batch(spark: Any) -> None:
    """frame_from_arrays: the rows whole, at most a partition per core though the run's Arrow
    batches are 2,048 rows, and the session's settings as they were."""
    import numpy as np

    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    before = spark.conf.get(key)
    spark.conf.set(key, "2048")
    try:
        ids = np.arange(50_000, dtype=np.int64) * 7
        schema = T.StructType([T.StructField(C.DOC_ID, T.LongType(), False)])
        frame = frame_from_arrays(spark, {C.DOC_ID: ids}, schema)
        assert frame.rdd.getNumPartitions() <= spark.sparkContext.defaultParallelism
        assert sorted(collect_arrays(frame, [C.DOC_ID])[C.DOC_ID].tolist()) == ids.tolist()
        assert spark.conf.get(key) == "2048"
    finally:
        spark.conf.set(key, before)
