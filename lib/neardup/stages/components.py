"""Connected components of the verified-pair graph.

Three ways compute the same thing, the smallest node id of every node's
component:

- ``driver`` (chosen by ``auto`` when the caller knows the edges are few,
  ``on_driver``): the edges are collected as Arrow and labelled with
  ``scipy.sparse.csgraph.connected_components``; one Spark job instead of two or more
  per round, for the small graphs of small runs and of the over-merge guard.
- ``builtin``: large-star / small-star (Kiveris et al. 2014, "Connected
  Components in MapReduce and Beyond") with the DataFrame API only: no Python
  UDFs, nothing of the graph collected to the driver. O(log^2 n) rounds.
- ``graphframes``: ``GraphFrame.connectedComponents(algorithm="two_phase")``, when the
  GraphFrames jar is in the JVM (neardup adds its package to a session it starts with
  ``components.backend: graphframes`` unless a jar of it is on ``spark.jars``;
  runtime/packages.py) and its Python package (graphframes-py) is installed.

``auto`` picks the driver for few edges, else GraphFrames when its JVM class is already
loaded, its Python package is installed and a checkpoint directory is set (GraphFrames
needs one), else the built-in implementation.
"""

from __future__ import annotations

import importlib.util
import time
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from neardup.columns import COMPONENT, DOC_ID, DST, SRC
from neardup.config import BACKENDS
from neardup.errors import NeardupError, UsageError
from neardup.kernels.graph_labels import smallest_labels
from neardup.runtime.packages import (
    GRAPHFRAMES_CLASS,
    class_loads,
    graphframes_package,
    graphframes_python_missing,
)
from neardup.stages.driver_frames import DRIVER_ID_TYPES, collect_arrays, frame_from_arrays

_GRAPHFRAMES_CLASS = GRAPHFRAMES_CLASS


def _graphframes_hint() -> str:
    try:
        coordinate = graphframes_package()
    except Exception:  # no local pyspark (a cluster's own Spark): name the pattern
        coordinate = "io.graphframes:graphframes-spark4_2.13:<version>"
    return (
        f"neardup adds it to a session it starts; to a session started elsewhere add "
        f"--packages {coordinate} (./spark-submit.sh --with-graphframes) or its jars with "
        "--jars, or set components.backend=builtin"
    )


# Internal columns of the builtin backend. In every edge DataFrame it keeps, edges are
# oriented SRC > DST (child -> smaller parent), distinct, without self-loops.
_U = "_cc_u"  # a node
_V = "_cc_v"  # one of its neighbours
_MIN = "_cc_min"  # smallest neighbour of _U
_DEG = "_cc_deg"  # number of neighbours of _U


def graphframes_available(spark: SparkSession) -> bool:
    """True if the GraphFrames JVM class loads in this session's driver.

    Never raises: a missing class, a Spark Connect session (no py4j gateway) or a dead
    JVM all mean "not available".
    """
    return class_loads(spark, _GRAPHFRAMES_CLASS)


def connected_components(
    edges: DataFrame,
    *,
    backend: str = "auto",
    max_iterations: int = 60,
    checkpoint_dir: str | None = None,
    on_driver: bool = False,
) -> tuple[DataFrame, dict[str, Any]]:
    """Label every node of an undirected graph with the smallest node id of its component.

    Input ``edges``: ``src``, ``dst``, both of the same orderable atomic type (the
    document ids: long, string, ...); other columns are ignored. Duplicates and both
    directions are fine. Self-loops and edges with a null endpoint are dropped, so a
    node whose only edge is a self-loop is not in the output: like every node absent
    from the edges, it is a singleton.

    Output ``(components, stats)``:

    - ``components``: ``_id`` (node, input type), ``_component`` (smallest ``_id`` of
      its component, input type); exactly one row per node of the edges. Deterministic:
      it does not depend on partitioning, backend or run.
    - ``stats``: ``{"backend": "driver" | "builtin" | "graphframes", "iterations": int,
      "seconds": float}``. ``iterations`` counts large-star + small-star rounds; 0 for
      the driver and for GraphFrames, which does not report its own.

    ``on_driver``: the caller knows the edges are few enough to collect (dedup's
    broadcast bound); with ``backend="auto"`` and ids of an integer or string type they
    are labelled on the driver. An explicit backend is always honoured.

    ``checkpoint_dir``, if given, is set as the SparkContext's checkpoint directory (a
    session-wide setting). Without any checkpoint directory the builtin backend uses
    local checkpoints (executor storage: lost if an executor is lost), and the
    graphframes backend refuses to run.

    Spark work (driver): one job collects the non-null, non-loop edges; the labels
    (kernels/graph_labels.py) go back as a DataFrame backed by an RDD (no job until it is
    used).

    Spark work (builtin). Before iterating, one job normalizes the edges (drop
    self-loops, orient as larger -> smaller, distinct: one shuffle) and checkpoints
    them, so no recomputation of the caller's plan (adaptive or non-deterministic)
    can reach the iterations. Then each round is two actions:

    1. convergence check: per node, smallest neighbour and degree (a grouped
       aggregation: one shuffle of partial aggregates, at most one row per node and
       map partition). Converged when every node is a local minimum or has degree 1,
       i.e. the edges form stars centred on their component minima. Edges that are
       already such stars (disjoint buckets linked to their smallest id) take 0 rounds.
    2. large-star and small-star (each node's smallest neighbour: an aggregation by node,
       combined map-side, joined back to the edges, a broadcast when small), distinct (one
       shuffle, combined map-side), then
       a checkpoint, which cuts the lineage so plans stay small however many rounds
       run.

    The returned DataFrame is lazy over the last checkpoint: using it runs the one
    aggregation of step 1 again, never a round. Raises ``NeardupError`` after
    ``max_iterations`` rounds without convergence (O(log^2 n) rounds are needed: about
    10 for a 3,000-node path with shuffled ids).

    Spark work (graphframes): the normalized edges and the vertices are checkpointed
    first, ids of a non-integral type numbered by that checkpoint (GraphFrames then
    numbers nothing itself), GraphFrames' "two_phase" runs with adaptive execution
    switched off (all three guard against its known wrong-component bugs on recomputed or
    adaptive inputs), and its component labels are mapped back to the ids and to the
    smallest id of each component (joins and an aggregation), then checkpointed while
    adaptive execution is still off; the labels GraphFrames left persisted are then
    unpersisted.
    """
    if backend not in BACKENDS:
        raise UsageError(f"components.backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
    if max_iterations < 0:
        raise UsageError(f"components max_iterations must be 0 or more, not {max_iterations}")
    _check_edges(edges)
    spark = edges.sparkSession
    if checkpoint_dir:
        spark.sparkContext.setCheckpointDir(checkpoint_dir)

    if backend == "auto":
        if on_driver and isinstance(edges.schema[SRC].dataType, DRIVER_ID_TYPES) and _scipy_available():
            backend = "driver"
        else:
            use_gf = (
                graphframes_available(spark)
                and graphframes_python_missing() is None
                and _checkpoint_dir(spark) is not None
            )
            backend = "graphframes" if use_gf else "builtin"
    elif backend == "graphframes":
        missing = graphframes_python_missing()
        if missing:  # a session started elsewhere (the command line checks before its JVM)
            raise UsageError(missing)
        if not graphframes_available(spark):
            raise UsageError(
                f"components.backend=graphframes but the GraphFrames jar is not loaded "
                f"(class {_GRAPHFRAMES_CLASS} not found): {_graphframes_hint()}"
            )
        if _checkpoint_dir(spark) is None:
            raise UsageError(
                "components.backend=graphframes needs a Spark checkpoint directory: "
                "--conf spark.checkpoint.dir=PATH (a shared file system on a cluster), "
                "or set components.backend=builtin"
            )

    start = time.perf_counter()
    iterations = 0
    if backend == "driver":
        result = _driver_components(spark, edges)
    elif backend == "graphframes":
        result = _graphframes_components(spark, _normalize(edges))
    else:
        oriented = _normalize(edges)
        result, iterations = _builtin_components(oriented, max_iterations)
    stats = {
        "backend": backend,
        "iterations": iterations,
        "seconds": round(time.perf_counter() - start, 3),
    }
    return result, stats


def _check_edges(edges: DataFrame) -> None:
    names = set(edges.columns)
    missing = [c for c in (SRC, DST) if c not in names]
    if missing:
        raise ValueError(f"edges lack column(s) {missing}; they have {edges.columns}")
    src_type = edges.schema[SRC].dataType
    dst_type = edges.schema[DST].dataType
    # Mixed types would be widened silently by least()/greatest() and the output ids
    # would no longer be the input ids: a bug upstream, not something to paper over.
    if src_type != dst_type:
        raise ValueError(
            f"edges {SRC} and {DST} must have the same type, got "
            f"{src_type.simpleString()} and {dst_type.simpleString()}"
        )


def _normalize(edges: DataFrame) -> DataFrame:
    """Distinct undirected edges as (SRC=larger, DST=smaller), no self-loops, no nulls."""
    s, d = F.col(SRC), F.col(DST)
    return (
        edges.where(s.isNotNull() & d.isNotNull() & (s != d))
        .select(F.greatest(s, d).alias(SRC), F.least(s, d).alias(DST))
        .distinct()
    )


def _checkpoint_dir(spark: SparkSession) -> str | None:
    try:
        return spark.sparkContext.getCheckpointDir()
    except Exception:  # Spark Connect has no SparkContext
        return None


def checkpoint(df: DataFrame) -> DataFrame:
    """Materialize df and cut its lineage (one job).

    A reliable checkpoint survives executor loss; a local one (no checkpoint directory)
    is faster but lives in executor storage only.
    """
    if _checkpoint_dir(df.sparkSession) is not None:
        return df.checkpoint(eager=True)
    return df.localCheckpoint(eager=True)


# --- driver: scipy on the collected edges ------------------------------------------


def _scipy_available() -> bool:
    # A required dependency; a driver without it (a hand-made cluster image) runs the rounds.
    return importlib.util.find_spec("scipy") is not None


def _driver_components(spark: SparkSession, edges: DataFrame) -> DataFrame:
    s, d = F.col(SRC), F.col(DST)
    real = edges.where(s.isNotNull() & d.isNotNull() & (s != d))
    id_type = edges.schema[SRC].dataType
    schema = T.StructType([T.StructField(DOC_ID, id_type, False), T.StructField(COMPONENT, id_type, False)])
    ends = collect_arrays(real, [SRC, DST])
    nodes, labels = smallest_labels(ends[SRC], ends[DST])
    return frame_from_arrays(spark, {DOC_ID: nodes, COMPONENT: labels}, schema)


# --- builtin: large-star / small-star ---------------------------------------------


def _node_stats(oriented: DataFrame) -> DataFrame:
    """(_U, _MIN, _DEG) for every node: smallest neighbour and degree."""
    return _both_directions(oriented).groupBy(_U).agg(F.min(_V).alias(_MIN), F.count(F.lit(1)).alias(_DEG))


def _not_a_star() -> Column:
    # Every node a local minimum (all neighbours larger) or of degree 1 <=> a forest of
    # stars centred on their component minima: a leaf's only neighbour is smaller,
    # hence a local minimum, whose neighbours are all larger, hence all leaves.
    return (F.col(_MIN) < F.col(_U)) & (F.col(_DEG) > 1)


def _both_directions(oriented: DataFrame) -> DataFrame:
    return oriented.select(F.col(SRC).alias(_U), F.col(DST).alias(_V)).unionByName(
        oriented.select(F.col(DST).alias(_U), F.col(SRC).alias(_V))
    )


def _with_smallest(edges: DataFrame, node: str, neighbour: str) -> DataFrame:
    """edges with _MIN: the smallest `neighbour` of each row's `node`.

    An aggregation by node joined back, not a window by node: a hub (the centre of a star
    of a page copied thousands of times) would put all its edges in one task of a window,
    whereas the aggregation combines them in every task before its shuffle (a row per node
    and task), and the join of the small result is a broadcast (adaptive execution sees its
    size) or, at scale, a sort-merge join whose skewed partitions adaptive execution splits.
    """
    smallest = edges.groupBy(node).agg(F.min(neighbour).alias(_MIN))
    return edges.join(smallest, node)


def _large_star(oriented: DataFrame) -> DataFrame:
    """Connect every strictly larger neighbour v of u to m(u) = min(u, neighbours of u).

    Output (SRC=v, DST=m(u)) with DST < SRC, possibly with duplicates.
    """
    return (
        _with_smallest(_both_directions(oriented), _U, _V)
        .where(F.col(_V) > F.col(_U))
        .select(F.col(_V).alias(SRC), F.least(F.col(_MIN), F.col(_U)).alias(DST))
    )


def _small_star(oriented: DataFrame) -> DataFrame:
    """Connect u and each of its smaller neighbours to the smallest of them.

    Input and output oriented (SRC > DST); the output is distinct. Duplicates in the
    input do not change a minimum, so the large-star output need not be deduplicated
    first (saving one shuffle per round).
    """
    # Each input row (u, d) yields (d, m) and (u, m); (u, m) repeats once per row of u's
    # group, which the map-side half of distinct() removes before the shuffle.
    pairs = F.array(
        F.struct(F.col(DST).alias(SRC), F.col(_MIN).alias(DST)),
        F.struct(F.col(SRC).alias(SRC), F.col(_MIN).alias(DST)),
    )
    return (
        _with_smallest(oriented, SRC, DST).select(F.inline(pairs)).where(F.col(SRC) != F.col(DST)).distinct()
    )


def _builtin_components(normalized: DataFrame, max_iterations: int) -> tuple[DataFrame, int]:
    oriented = checkpoint(normalized)
    iterations = 0
    while True:
        if _node_stats(oriented).where(_not_a_star()).isEmpty():
            break
        if iterations >= max_iterations:
            raise NeardupError(
                f"connected components did not converge in {max_iterations} "
                "large-star/small-star rounds; raise the iteration limit"
            )
        oriented = checkpoint(_small_star(_large_star(oriented)))
        iterations += 1
    # A star forest: each leaf's smallest (only) neighbour is its centre, the component
    # minimum; a centre's neighbours are all larger, so it labels itself.
    result = _node_stats(oriented).select(
        F.col(_U).alias(DOC_ID), F.least(F.col(_MIN), F.col(_U)).alias(COMPONENT)
    )
    return result, iterations


# --- graphframes ------------------------------------------------------------------


def _graphframes_components(spark: SparkSession, normalized: DataFrame) -> DataFrame:
    from graphframes import GraphFrame

    # Materialized inputs: GraphFrames has returned wrong components when its inputs were
    # recomputed (graphframes issues #159, #428, #453).
    edges = checkpoint(normalized)
    nodes = edges.select(F.col(SRC).alias(_U)).unionByName(edges.select(F.col(DST).alias(_U))).distinct()
    if isinstance(edges.schema[SRC].dataType, T.IntegralType):
        # GraphFrames labels integral ids as they are (as longs).
        numbered = checkpoint(nodes.select(F.col(_U), F.col(_U).cast("long").alias("id")))
        graph_edges = edges
    else:
        # Other ids numbered here, once: GraphFrames would number them itself with
        # monotonically_increasing_id after a shuffle of its own, which numbers a recomputed
        # or coalesced partition's rows anew (the cause of #428 and #453) and stays cached
        # after the run. These numbers are fixed by the checkpoint that assigns them.
        numbered = checkpoint(nodes.select(F.col(_U), F.monotonically_increasing_id().alias("id")))
        graph_edges = edges.join(numbered.select(F.col(_U).alias(SRC), F.col("id").alias(_V)), SRC).join(
            numbered.select(F.col(_U).alias(DST), F.col("id").alias(_MIN)), DST
        )
        graph_edges = graph_edges.select(F.col(_V).alias(SRC), F.col(_MIN).alias(DST))
    aqe_key = "spark.sql.adaptive.enabled"
    previous = spark.conf.get(aqe_key, "true")
    # Adaptive execution is the other trigger of those wrong results (GraphFrames switches it
    # off itself as well); the result is checkpointed before AQE comes back, since DataFrames
    # are evaluated lazily.
    spark.conf.set(aqe_key, "false")
    labelled = None
    try:
        # Named, not GraphFrames' default: in 0.11.0 the default name "graphframes" is a
        # deprecated alias of "two_phase", the one that agreed with breadth-first search on
        # both Spark lines ("randomized_contraction" failed on Spark 4.3 and split string ids
        # into singletons on 3.5; "graphx" takes one round per hop of the longest path).
        labelled = GraphFrame(numbered.select("id"), graph_edges).connectedComponents(algorithm="two_phase")
        labels = labelled.join(numbered, "id").select(F.col(_U).alias(DOC_ID), F.col("component"))
        smallest = labels.groupBy("component").agg(F.min(DOC_ID).alias(COMPONENT))
        return checkpoint(labels.join(smallest, "component").select(DOC_ID, COMPONENT))
    finally:
        if labelled is not None:
            # GraphFrames returns its labels persisted and leaves them so; the checkpoint
            # holds the result, and the cached copy would sit in executors' memory for the
            # rest of the run.
            labelled.unpersist()
        spark.conf.set(aqe_key, previous or "true")
