"""Connected components against an independent breadth-first search in plain Python
(GraphFrames' own: test_graphframes.py)."""

from __future__ import annotations

import random
import time
from collections.abc import Iterable, Sequence
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from neardup.columns import COMPONENT, DOC_ID
from neardup.errors import NeardupError, UsageError
from neardup.stages.components import connected_components
from neardup_testkit import reference

Edge = tuple[Any, Any]


def bfs_components(edges: Iterable[Edge]) -> dict[Any, Any]:
    """node -> smallest node of its component, for the nodes of real edges (self-loops and
    null endpoints are ignored, as the stage drops them)."""
    real = [(a, b) for a, b in edges if a is not None and b is not None and a != b]
    return reference.bfs_components([], real)


def edges_df(spark: SparkSession, edges: Sequence[Edge], id_type: T.DataType) -> Any:
    schema = T.StructType([T.StructField("src", id_type, True), T.StructField("dst", id_type, True)])
    return spark.createDataFrame(list(edges), schema)


# The two ways a graph without GraphFrames is labelled: the distributed rounds, and the
# driver's scipy pass that `auto` takes when the caller says the edges are few.
BUILTIN: dict[str, Any] = {"backend": "builtin"}
DRIVER: dict[str, Any] = {"backend": "auto", "on_driver": True}
WAYS = pytest.mark.parametrize("way", [BUILTIN, DRIVER], ids=["builtin", "driver"])


def run(
    spark: SparkSession,
    edges: Sequence[Edge],
    id_type: T.DataType | None = None,
    **kwargs: Any,
) -> tuple[dict[Any, Any], dict[str, Any]]:
    id_type = id_type or T.LongType()
    df = edges_df(spark, edges, id_type)
    way = {**BUILTIN, **kwargs}
    result, stats = connected_components(df, **way)
    assert stats["backend"] == ("driver" if way == DRIVER else way["backend"])
    assert result.columns == [DOC_ID, COMPONENT]
    assert result.schema[DOC_ID].dataType == id_type
    assert result.schema[COMPONENT].dataType == id_type
    rows = result.collect()
    # The labels come back as an RDD-backed relation, never rows held in the plan, which
    # every later query built on them would walk again (driver_frames._driver_relation).
    assert not rows or "LocalRelation" not in result._jdf.queryExecution().analyzed().toString()
    mapping = {r[DOC_ID]: r[COMPONENT] for r in rows}
    assert len(mapping) == len(rows), "a node appears more than once"
    return mapping, stats


def check(
    spark: SparkSession, edges: Sequence[Edge], id_type: T.DataType | None = None, **way: Any
) -> dict[str, Any]:
    got, stats = run(spark, edges, id_type, **way)
    assert got == bfs_components(edges)
    return stats


def random_graph(rng: random.Random, nodes: int, edges: int) -> list[Edge]:
    ids = rng.sample(range(-(10**12), 10**12), nodes)
    return [(a, b) for a, b in (rng.sample(ids, 2) for _ in range(edges))]


def disjoint_union(graphs: Iterable[Sequence[Edge]], stride: int = 10_000) -> list[Edge]:
    """Several integer graphs in one edge list (ids shifted apart): one Spark run for all."""
    return [(g * stride + a, g * stride + b) for g, edges in enumerate(graphs) for a, b in edges]


# --- shapes -----------------------------------------------------------------------

CHAIN = [(i, i + 1) for i in range(20)]
CHAIN_DESCENDING = [(i + 1, i) for i in range(20, 0, -1)]
STAR_CENTRE_LARGEST = [(100, i) for i in range(30)]
ISOLATED_PAIRS = [(2 * i + 1, 2 * i) for i in range(25)]
_BASE = [(5, 3), (3, 9), (9, 1), (7, 8), (10, 11), (11, 12)]
DUPLICATE_AND_REVERSED = [*_BASE, *((b, a) for a, b in _BASE), *_BASE[:3], (1, 9), (8, 7)]
# Two stars whose leaves are interleaved and one bridge between two leaves.
BRIDGED_STARS = [(0, i) for i in range(2, 40, 2)] + [(1, i) for i in range(3, 40, 2)] + [(38, 39)]


@WAYS
def test_shapes(spark: SparkSession, way: dict[str, Any]) -> None:
    # One run over the disjoint union (each Spark round costs the same for 20 edges or
    # 200): a mismatch shows in the dict diff with its shifted node ids.
    shapes = [CHAIN, CHAIN_DESCENDING, STAR_CENTRE_LARGEST, ISOLATED_PAIRS]
    stats = check(spark, disjoint_union([*shapes, DUPLICATE_AND_REVERSED, BRIDGED_STARS]), **way)
    assert set(stats) == {"backend", "iterations", "seconds"}
    if way == BUILTIN:
        assert stats["iterations"] >= 1
    else:
        assert stats["iterations"] == 0


def test_star_centred_on_minimum_needs_no_round(spark: SparkSession) -> None:
    # The shape disjoint LSH buckets take (linked to their smallest id): already done.
    stats = check(spark, [(0, i) for i in range(1, 30)] + [(50, 51), (50, 52)])
    assert stats["iterations"] == 0


@pytest.mark.compat
@WAYS
def test_empty(spark: SparkSession, way: dict[str, Any]) -> None:
    got, stats = run(spark, [], **way)
    assert got == {}
    assert stats["iterations"] == 0
    got, _ = run(spark, [], T.StringType(), **way)
    assert got == {}


@pytest.mark.compat
@WAYS
def test_self_loops_and_null_endpoints_dropped(spark: SparkSession, way: dict[str, Any]) -> None:
    edges = [(1, 1), (2, 3), (3, 3), (4, None), (None, None), (None, 5), (6, 2)]
    got, _ = run(spark, edges, **way)
    # 1, 4 and 5 have no real edge: singletons, which are not in the output.
    assert got == {2: 2, 3: 2, 6: 2}


@WAYS
def test_long_path_shuffled_ids(spark: SparkSession, way: dict[str, Any]) -> None:
    rng = random.Random(20140101)
    n = 3000
    ids = list(range(n))
    rng.shuffle(ids)  # ids along the path in random order: the minimum sits anywhere
    edges: list[Edge] = [(ids[i], ids[i + 1]) for i in range(n - 1)]
    edges = [(b, a) if rng.random() < 0.5 else (a, b) for a, b in edges]
    rng.shuffle(edges)
    started = time.perf_counter()
    stats = check(spark, edges, **way)
    print(
        f"\nlong path of {n} nodes ({stats['backend']}): {stats['iterations']} rounds, "
        f"{stats['seconds']:.1f} s in connected_components, "
        f"{time.perf_counter() - started:.1f} s with collect"
    )
    if way == BUILTIN:
        assert 1 <= stats["iterations"] <= 60


@WAYS
def test_random_sparse_graphs(spark: SparkSession, way: dict[str, Any]) -> None:
    # Random graphs around and below the percolation point (many small components, a few
    # big ones) of several sizes, plus fifty tiny ones, checked in one run: each Spark
    # round costs about the same for 20 edges or 2,000.
    rng = random.Random(4)
    edges: list[Edge] = []
    for nodes, n_edges in [(12, 8), (60, 45), (300, 240), (1000, 1100)]:
        edges += random_graph(rng, nodes, n_edges)
    for g in range(50):
        n = rng.randint(2, 25)
        pairs = (rng.sample(range(n), 2) for _ in range(rng.randint(1, 2 * n)))
        edges += [(g * 1000 + a, g * 1000 + b) for a, b in pairs]
    check(spark, edges, **way)


# --- id types ---------------------------------------------------------------------


@pytest.mark.compat
@WAYS
def test_string_ids(spark: SparkSession, way: dict[str, Any]) -> None:
    awkward: list[Edge] = [
        ("b", "a10"),
        ("a10", "a9"),
        ("zz", ""),
        ("", "b"),
        ("x", "y"),
        ("é", "e"),
        ("Z", "a"),
    ]
    # Plus a random graph over short strings of a small alphabet: prefixes, case, non-ASCII.
    rng = random.Random(5)
    alphabet = "aAb9 ~é\u00ff\u4e2d"
    named = {x for edge in awkward for x in edge}
    words = sorted({"".join(rng.choices(alphabet, k=rng.randint(1, 4))) for _ in range(300)} - named)
    edges = awkward + [(a, b) for a, b in (rng.sample(words, 2) for _ in range(200))]
    got, _ = run(spark, edges, T.StringType(), **way)
    assert got == bfs_components(edges)
    # Spark orders strings by UTF-8 bytes, Python by code point: the same order.
    assert got["zz"] == "" and got["a9"] == "" and got["é"] == "e" and got["a"] == "Z"


@WAYS
def test_long_ids_negative_and_huge(spark: SparkSession, way: dict[str, Any]) -> None:
    ids = [1, 2, 300, 4, -1, 2**62, -(2**63), 2**63 - 1]
    edges = [(ids[i], ids[i + 1]) for i in range(0, len(ids) - 1)] + [(7, 2**62 + 1)]
    got, _ = run(spark, edges, **way)
    assert got == bfs_components(edges)
    assert set(got.values()) == {-(2**63), 7}


@WAYS
def test_integer_ids(spark: SparkSession, way: dict[str, Any]) -> None:
    check(spark, [(3, 1), (1, 2), (5, 4)], T.IntegerType(), **way)
    check(spark, [(3, 1), (1, 2), (5, 4), (-7, 5)], T.ShortType(), **way)


def test_other_id_types_take_the_distributed_path(spark: SparkSession) -> None:
    """Decimal and date ids are not labelled on the driver (their Python values need not
    come back from Arrow exactly): `auto` runs the rounds instead, with the same result."""
    import datetime as dt
    from decimal import Decimal

    day = dt.date(2024, 1, 1)
    for id_type, edges in [
        (T.DecimalType(20, 2), [(Decimal("3.10"), Decimal("1.00")), (Decimal("1.00"), Decimal("2.50"))]),
        (T.DateType(), [(day + dt.timedelta(3), day), (day, day + dt.timedelta(9))]),
    ]:
        result, stats = connected_components(edges_df(spark, edges, id_type), backend="auto", on_driver=True)
        assert stats["backend"] in ("builtin", "graphframes")
        assert {r[DOC_ID]: r[COMPONENT] for r in result.collect()} == bfs_components(edges)


@pytest.mark.compat
def test_mixed_types_rejected(spark: SparkSession) -> None:
    df = spark.createDataFrame([(1, "a")], "src long, dst string")
    with pytest.raises(ValueError, match="same type"):
        connected_components(df, backend="builtin")


# --- limits and backends ----------------------------------------------------------


@pytest.mark.compat
def test_max_iterations_exceeded(spark: SparkSession) -> None:
    rng = random.Random(3)
    ids = list(range(200))
    rng.shuffle(ids)
    edges = [(ids[i], ids[i + 1]) for i in range(199)]
    with pytest.raises(NeardupError, match="did not converge in 1 "):
        run(spark, edges, max_iterations=1)


def test_unknown_backend(spark: SparkSession) -> None:
    with pytest.raises(UsageError, match=r"components\.backend"):
        connected_components(edges_df(spark, [(1, 2)], T.LongType()), backend="networkx")
