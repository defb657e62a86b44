"""Stage: the over-merge guard.

Connected components chain: A~B and B~C at 0.8 do not make A~C, and a cluster grown
along a drifting chain removes documents that share little with the one kept in their
place. After the survivors are chosen, every removed representative is scored against
its cluster's kept document (the verified edge's similarity where the two are joined
directly, else the verification method's score of that one pair). Those below
`guard.threshold` are split off and re-clustered among themselves over their own
verified edges, each new cluster choosing its own survivor; and again, until every
removed document clears the threshold against its kept document. Each round scores
each document still pending once (no pairs inside a cluster), so the cost is linear in
the removed documents per round. After `guard.max_rounds`, documents still failing are
kept alone: the guard never removes a document below its threshold.

Splitting peels a cluster around each kept document in turn, and two near-identical
documents on either side of the threshold against one kept document end apart: on real
text, plain copies of a licence around the longer files that quote it (recall at J >= 0.9
fell to 0.91). So when the rounds have split a cluster into at most `NEAREST_UP_TO` kept
documents, each removed document of it below `nearest_below` (the verification threshold)
against its kept one is scored against all of them and goes to the one it is most similar
to, if more similar by `NEAREST_MARGIN` than to its own (ties: the one it has, then the
smallest id). It still clears the guard; twins, scoring alike, go to the same one (recall
0.9999 on that corpus). Without the margin, near ties parted them: copies at 0.79 to one
variant of a licence and 0.81 to another went half to each. A document at the verification
threshold or above is where the user asked it to be, and stays.

With `dedup --against`, indexed documents are `pinned`: never removed. One that is not its
cluster's survivor (a batch document bridged two indexed ones) fails whatever its score and
is re-clustered like any failing document, where it becomes a survivor in its turn; so the
rounds also run with the guard off (threshold None), for pinned documents alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from neardup import columns as C
from neardup.errors import InvariantError
from neardup.kernels.nearest_kept import choose_nearest, pairs_to_score
from neardup.stages.components import checkpoint
from neardup.stages.driver_frames import DRIVER_ID_TYPES, collect_arrays, frame_from_arrays, nan_as_null
from neardup.stages.skew import Counted, counted

# Scores (src, dst) pairs: given a bound on their number, and their srcs counted, where known.
Scorer = Callable[[DataFrame, int | None, Counted | None], DataFrame]
_SCORED = "_scored"
_PINNED = "_pinned"
_FRESH = "_fresh"
_ORIGIN = "_origin"  # a document's kept one before the guard: its cluster as clustered
_NEAR = "_near"  # a kept document of the same cluster, that a removed one may move to
_CURRENT = "_current"
# A cluster split into more kept documents than this keeps the rounds' assignment: the
# nearest of its kept documents is a score per removed document and kept one.
NEAREST_UP_TO = 32
# A removed document moves only to a kept one more similar than its own by this much. Near
# ties part twins: a licence's copies at 0.79 to one variant and 0.81 to another, a hair
# apart, went half to each (recall at J >= 0.9 0.983 on 1,798 files); twins at J >= 0.9
# differ by a few hundredths against any third document on real text.
NEAREST_MARGIN = 0.05


@dataclass
class GuardStats:
    """What the guard did, for the log line and report.json."""

    rounds: int = 0  # scoring rounds run
    scored_pairs: int = 0  # (document, kept) pairs without a verified edge, scored afresh
    clusters_split: int = 0  # clusters (of any round) that lost members
    documents_rehomed: int = 0  # removed documents whose kept document changed
    released: int = 0  # still failing after max_rounds: kept alone
    moved_to_nearest: int = 0  # removed documents moved to a nearer kept one of their cluster
    failing_per_round: list[int] = field(default_factory=list)


def guard_clusters(
    clustered: DataFrame,
    edges: DataFrame,
    score: Scorer,
    choose: Callable[[DataFrame], DataFrame],
    components: Callable[[DataFrame], DataFrame],
    keep: Callable[[DataFrame], DataFrame],
    threshold: float | None,
    max_rounds: int,
    pinned: DataFrame | None = None,
    small_pinned: bool = True,
    nearest_below: float | None = None,
    first_bound: int | None = None,
    on_driver: bool = False,
) -> tuple[DataFrame, GuardStats]:
    """clustered (_id, _kept_id): every representative in a cluster (kept ones included);
    edges (src, dst, similarity): the verified edges, src < dst
    -> (_id, _kept_id, similarity) for the same ids, and the guard's figures.

    score: (src, dst) pairs, src the kept document (its id larger or smaller), a bound on
    their number where the guard knows one (None: not known), and their srcs counted where
    the guard has them on the driver (else None) ->
    (src, dst, similarity) for every pair; choose: a frame (_id, _component) -> (_id, _kept_id) by
    the survivor policy; components: edges (src, dst) -> (_id, _component); keep: persist
    a frame for the rest of the run. threshold None: the guard is off and the removed
    documents are only scored. pinned (_id): documents never removed (indexed ones),
    broadcast when `small_pinned`; a pinned document that is not its cluster's survivor
    fails whatever its score. nearest_below: removed documents of split clusters below this
    against their kept one go to the nearest kept one of their cluster (None: no such step).
    first_bound: the rows of `clustered`, where known: the first round scores at most one
    pair per removed document. on_driver: the caller knows `clustered` is small enough to
    collect (the broadcast bound): the rounds' and the nearest step's bookkeeping run on the
    driver (`_round_on_driver`, `_nearest_kept_on_driver`).
    """
    stats = GuardStats()
    edge_sims = edges.select(C.SRC, C.DST, C.SIMILARITY)
    settled: list[DataFrame] = []
    pending = clustered.select(C.DOC_ID, C.KEPT_ID)
    flags = None
    clears = F.lit(True) if threshold is None else F.col(C.SIMILARITY) >= threshold
    clears = F.coalesce(clears, F.lit(False))
    if pinned is not None:
        flags = pinned.select(C.DOC_ID, F.lit(True).alias(_PINNED))
        flags = F.broadcast(flags) if small_pinned else flags
        clears = clears & F.col(_PINNED).isNull()
    is_kept = F.col(C.DOC_ID) == F.col(C.KEPT_ID)
    is_failing = ~is_kept & ~clears
    bound = first_bound  # the pairs a round scores: after the first, its failing documents
    driver = on_driver and isinstance(clustered.schema[C.DOC_ID].dataType, DRIVER_ID_TYPES)
    while True:
        stats.rounds += 1
        if driver:
            sims, figures = _round_on_driver(pending, edge_sims, score, flags, threshold)
            sims = keep(sims)
        else:
            sims = _similarity_to_kept(pending, edge_sims, score, bound)
            sims = keep(sims.join(flags, C.DOC_ID, "left") if flags is not None else sims)
            # One job for the round's figures; it also fills the kept frame the rest reads.
            row = sims.agg(
                F.count(F.when(F.col(_FRESH), 1)).alias("scored"),
                F.count(F.when(is_failing, 1)).alias("n"),
                F.countDistinct(F.when(is_failing, F.col(C.KEPT_ID))).alias("clusters"),
            ).first()
            assert row is not None
            figures = {k: int(row[k]) for k in ("scored", "n", "clusters")}
        stats.scored_pairs += figures["scored"]
        if threshold is None and pinned is None:
            settled.append(sims.select(C.DOC_ID, C.KEPT_ID, C.SIMILARITY))
            break
        n_failing = figures["n"]
        stats.failing_per_round.append(n_failing)
        # A survivor stays, and so does every member at or above the threshold against it.
        settled.append(sims.filter(is_kept | clears).select(C.DOC_ID, C.KEPT_ID, C.SIMILARITY))
        if n_failing == 0:
            break
        stats.clusters_split += figures["clusters"]
        if stats.rounds == 1:
            stats.documents_rehomed = n_failing
        ids = sims.filter(is_failing).select(C.DOC_ID)
        if stats.rounds >= max_rounds:
            stats.released = n_failing
            settled.append(_alone(ids))
            break
        # The failing documents' own edges: both ends failing (so inside one old cluster).
        own = edge_sims.join(ids.withColumnRenamed(C.DOC_ID, C.SRC), C.SRC).join(
            ids.withColumnRenamed(C.DOC_ID, C.DST), C.DST
        )
        regrouped = keep(components(own.select(C.SRC, C.DST)))
        settled.append(_alone(ids.join(regrouped.select(C.DOC_ID), C.DOC_ID, "left_anti")))
        pending = keep(choose(regrouped))
        bound = n_failing
    out = settled[0]
    for part in settled[1:]:
        out = out.unionByName(part)
    if threshold is not None and nearest_below is not None and stats.clusters_split:
        # Distributed, checkpointed before and after: the rounds' plans, unioned and joined
        # again, took minutes to plan and ran the driver out of memory on the planted
        # chains. On the driver, no checkpoint (1.7 s on the skew benchmark): the rounds'
        # frames are of the driver's arrays (small plans), and the step collects them and
        # returns a frame of its own arrays.
        if driver:
            out, stats.moved_to_nearest = _nearest_kept_on_driver(out, clustered, score, nearest_below)
        else:
            out = checkpoint(out)
            out, stats.moved_to_nearest = _nearest_kept(
                out, clustered, lambda pairs: score(pairs, None, None), keep, nearest_below
            )
            out = checkpoint(out)
    return out, stats


def _pair_schema(id_type: T.DataType) -> T.StructType:
    """(src, dst) pairs of ids of `id_type`, made on the driver for `score`."""
    return T.StructType([T.StructField(C.SRC, id_type, False), T.StructField(C.DST, id_type, False)])


def _round_on_driver(
    pending: DataFrame,
    edge_sims: DataFrame,
    score: Scorer,
    flags: DataFrame | None,
    threshold: float | None,
) -> tuple[DataFrame, dict[str, int]]:
    """A round's `_similarity_to_kept`, with its pinned flags and figures, kept on the
    driver: one job collects each document with its kept one and their verified edge's
    similarity, the pairs without one are scored (counted here, so no job looks for large
    stars), and the round's figures come from the arrays, not from a job. On the skew
    benchmark's 1,000,000 documents the distributed round ran a dozen jobs, and a sampling
    job for the notice's star of 128,000 pairs."""
    spark = pending.sparkSession
    id_type = pending.schema[C.DOC_ID].dataType
    src, dst = F.least(C.DOC_ID, C.KEPT_ID), F.greatest(C.DOC_ID, C.KEPT_ID)
    rows = pending.select(C.DOC_ID, C.KEPT_ID, src.alias(C.SRC), dst.alias(C.DST)).join(
        edge_sims, [C.SRC, C.DST], "left"
    )
    if flags is not None:
        rows = rows.join(flags, C.DOC_ID, "left")
    pinned = F.coalesce(F.col(_PINNED), F.lit(False)) if flags is not None else F.lit(False)
    # A kept document's own "edge" (src == dst) is never a verified one: NaN, as a missing one.
    got = collect_arrays(
        rows.select(
            C.DOC_ID,
            C.KEPT_ID,
            F.coalesce(C.SIMILARITY, F.lit(float("nan"))).alias(C.SIMILARITY),
            pinned.alias(_PINNED),
        ),
        [C.DOC_ID, C.KEPT_ID, C.SIMILARITY, _PINNED],
    )
    ids, kept, sims = got[C.DOC_ID], got[C.KEPT_ID], got[C.SIMILARITY].astype(np.float64)
    is_pinned = got[_PINNED].astype(bool)
    is_kept = ids == kept
    fresh = ~is_kept & np.isnan(sims)
    n = int(fresh.sum())
    if n:
        # From the kept document (as `_similarity_to_kept`): one row per removed document.
        pairs = frame_from_arrays(spark, {C.SRC: kept[fresh], C.DST: ids[fresh]}, _pair_schema(id_type))
        scored = collect_arrays(score(pairs, n, counted(kept[fresh])), [C.DST, C.SIMILARITY])
        # Every pair comes back once (scored at threshold 0): each removed document's own.
        back = scored[C.DST]
        order = np.argsort(back, kind="stable")
        place = np.searchsorted(back, ids[fresh], sorter=order)
        at = order[np.minimum(place, len(order) - 1)] if len(order) else place
        if len(back) != n or not np.array_equal(back[at], ids[fresh]):
            raise InvariantError(f"guard: {n} pairs scored, but the scores came back for other pairs")
        sims[fresh] = scored[C.SIMILARITY][at]
    clears = np.ones(len(ids), bool) if threshold is None else sims >= threshold  # NaN: False
    failing = ~is_kept & ~(clears & ~is_pinned)
    figures = {"scored": n, "n": int(failing.sum()), "clusters": len(np.unique(kept[failing]))}
    schema = T.StructType(
        [
            T.StructField(C.DOC_ID, id_type, False),
            T.StructField(C.KEPT_ID, id_type, False),
            T.StructField(C.SIMILARITY, T.DoubleType(), True),
            T.StructField(_FRESH, T.BooleanType(), False),
            T.StructField(_PINNED, T.BooleanType(), False),
        ]
    )
    frame = frame_from_arrays(
        spark, {C.DOC_ID: ids, C.KEPT_ID: kept, C.SIMILARITY: sims, _FRESH: fresh, _PINNED: is_pinned}, schema
    )
    # As the distributed round has them: a kept document's similarity null, and the pinned
    # flag null where not pinned.
    out = frame.select(
        C.DOC_ID,
        C.KEPT_ID,
        nan_as_null(C.SIMILARITY),
        _FRESH,
        *([F.when(F.col(_PINNED), F.lit(True)).alias(_PINNED)] if flags is not None else []),
    )
    return out, figures


def _nearest_kept_on_driver(
    guarded: DataFrame,
    clustered: DataFrame,
    score: Scorer,
    below: float,
) -> tuple[DataFrame, int]:
    """`_nearest_kept` with its bookkeeping on the driver (kernels/nearest_kept.py): the
    guarded rows collected with their origin (one job), the pairs scored by `score` (its
    jobs), and the rows, the moved ones changed, returned as a frame of the driver's arrays.
    On the skew benchmark's corpus the distributed step took about 11 s, a dozen jobs over
    57,649 rows, for one document moved."""
    spark = guarded.sparkSession
    origin = clustered.select(C.DOC_ID, F.col(C.KEPT_ID).alias(_ORIGIN))
    rows = guarded.join(origin, C.DOC_ID).select(
        C.DOC_ID, C.KEPT_ID, F.coalesce(C.SIMILARITY, F.lit(float("nan"))).alias(C.SIMILARITY), _ORIGIN
    )
    got = collect_arrays(rows, [C.DOC_ID, C.KEPT_ID, C.SIMILARITY, _ORIGIN])
    ids, kept, sims = got[C.DOC_ID], got[C.KEPT_ID], got[C.SIMILARITY].astype(np.float64)
    owner, near = pairs_to_score(ids, kept, sims, got[_ORIGIN], below, NEAREST_UP_TO)
    id_type = guarded.schema[C.DOC_ID].dataType
    moved = 0
    if len(owner):
        pairs = frame_from_arrays(spark, {C.SRC: near, C.DST: ids[owner]}, _pair_schema(id_type))
        # Grouped by the kept document: a cluster split into a few, with thousands below the
        # threshold, is a group of thousands of pairs, spread over tasks by their counts.
        scored = collect_arrays(score(pairs, len(owner), counted(near)), [C.SRC, C.DST, C.SIMILARITY])
        low = np.unique(owner)
        doc, new_kept, new_sim = choose_nearest(
            ids[low], kept[low], sims[low], scored[C.DST], scored[C.SRC], scored[C.SIMILARITY], NEAREST_MARGIN
        )
        # Each moved document's row, found among the rows (ids are unique).
        order = np.argsort(ids, kind="stable")
        at = order[np.searchsorted(ids, doc, sorter=order)]
        kept, sims = kept.copy(), sims.copy()
        kept[at], sims[at] = new_kept, new_sim
        moved = len(doc)
    # The whole result from the arrays: a frame of driver data, its plan one node. The
    # similarity nullable: through pandas (Spark 3.5) a NaN arrives as a null.
    schema = T.StructType(
        [
            T.StructField(C.DOC_ID, id_type, False),
            T.StructField(C.KEPT_ID, id_type, False),
            T.StructField(C.SIMILARITY, T.DoubleType(), True),
        ]
    )
    frame = frame_from_arrays(spark, {C.DOC_ID: ids, C.KEPT_ID: kept, C.SIMILARITY: sims}, schema)
    # A kept document's similarity null again.
    return frame.select(C.DOC_ID, C.KEPT_ID, nan_as_null(C.SIMILARITY)), moved


def _nearest_kept(
    guarded: DataFrame,
    clustered: DataFrame,
    score: Callable[[DataFrame], DataFrame],
    keep: Callable[[DataFrame], DataFrame],
    below: float,
) -> tuple[DataFrame, int]:
    """Each removed document below `below` against its kept one, of a cluster that the rounds
    split into 2 to `NEAREST_UP_TO` kept documents, moved to the one it is most similar to ->
    (the assignment, how many moved). Two jobs: the scoring with the choice, and the count."""
    is_kept = F.col(C.DOC_ID) == F.col(C.KEPT_ID)
    origin = clustered.select(C.DOC_ID, F.col(C.KEPT_ID).alias(_ORIGIN))
    rows = guarded.join(origin, C.DOC_ID)
    survivors = rows.filter(is_kept).select(_ORIGIN, F.col(C.DOC_ID).alias(_NEAR))
    sizes = survivors.groupBy(_ORIGIN).agg(F.count(F.lit(1)).alias("_n"))
    split = sizes.filter((F.col("_n") > 1) & (F.col("_n") <= NEAREST_UP_TO)).select(_ORIGIN)
    removed = rows.filter(~is_kept & (F.col(C.SIMILARITY) < below)).join(split, _ORIGIN, "left_semi")
    pairs = (
        removed.join(survivors, _ORIGIN)
        .filter(F.col(_NEAR) != F.col(C.KEPT_ID))
        .select(F.col(_NEAR).alias(C.SRC), F.col(C.DOC_ID).alias(C.DST))
    )
    others = score(pairs).select(
        F.col(C.DST).alias(C.DOC_ID),
        F.col(C.SRC).alias(C.KEPT_ID),
        C.SIMILARITY,
        F.lit(False).alias(_CURRENT),
    )
    current = removed.select(C.DOC_ID, C.KEPT_ID, C.SIMILARITY, F.lit(True).alias(_CURRENT))
    # The most similar, the current one given NEAREST_MARGIN; then the current one; then the
    # smallest id.
    bonus = F.when(F.col(_CURRENT), F.lit(NEAREST_MARGIN)).otherwise(F.lit(0.0))
    best = F.min(
        F.struct(-(F.col(C.SIMILARITY) + bonus), ~F.col(_CURRENT), C.KEPT_ID, C.SIMILARITY, _CURRENT)
    )
    chosen = keep(
        current.unionByName(others)
        .groupBy(C.DOC_ID)
        .agg(best.alias("_best"))
        .select(C.DOC_ID, "_best.*")
        .select(C.DOC_ID, C.KEPT_ID, C.SIMILARITY, _CURRENT)
    )
    moved = chosen.filter(~F.col(_CURRENT)).count()
    unmoved = guarded.join(chosen.select(C.DOC_ID), C.DOC_ID, "left_anti")
    return unmoved.unionByName(chosen.select(C.DOC_ID, C.KEPT_ID, C.SIMILARITY)), moved


def _alone(ids: DataFrame) -> DataFrame:
    """Documents that end up in no cluster: each kept by itself."""
    return ids.select(
        C.DOC_ID, F.col(C.DOC_ID).alias(C.KEPT_ID), F.lit(None).cast("double").alias(C.SIMILARITY)
    )


def _similarity_to_kept(
    pending: DataFrame,
    edge_sims: DataFrame,
    score: Scorer,
    bound: int | None,
) -> DataFrame:
    """pending (_id, _kept_id) -> (_id, _kept_id, similarity, _fresh): a removed document's
    similarity to its kept document (null for the kept ones), and whether it was scored
    afresh (no verified edge between the two)."""
    removed = pending.filter(F.col(C.DOC_ID) != F.col(C.KEPT_ID)).select(
        C.DOC_ID,
        C.KEPT_ID,
        F.least(C.DOC_ID, C.KEPT_ID).alias(C.SRC),
        F.greatest(C.DOC_ID, C.KEPT_ID).alias(C.DST),
    )
    # Most removed documents are joined to their kept one by a verified edge (stars):
    # that score is already known. A removed document has one kept document, so each
    # missing pair is one row, scored once.
    known = removed.join(edge_sims, [C.SRC, C.DST], "left").withColumn(_FRESH, F.col(C.SIMILARITY).isNull())
    # From the kept document, whichever id is smaller: scoring groups pairs by src, so the
    # kept text is sent, normalized and shingled once per group (or part of a large one),
    # not once per removed document with a smaller id.
    missing = known.filter(F.col(_FRESH)).select(F.col(C.KEPT_ID).alias(C.SRC), F.col(C.DOC_ID).alias(C.DST))
    fresh = score(missing, bound, None).select(
        F.col(C.SRC).alias(C.KEPT_ID), F.col(C.DST).alias(C.DOC_ID), F.col(C.SIMILARITY).alias(_SCORED)
    )
    known = known.join(fresh, [C.DOC_ID, C.KEPT_ID], "left").withColumn(
        C.SIMILARITY, F.coalesce(F.col(C.SIMILARITY), F.col(_SCORED))
    )
    kept = pending.filter(F.col(C.DOC_ID) == F.col(C.KEPT_ID)).select(
        C.DOC_ID, C.KEPT_ID, F.lit(None).cast("double").alias(C.SIMILARITY), F.lit(False).alias(_FRESH)
    )
    return known.select(C.DOC_ID, C.KEPT_ID, C.SIMILARITY, _FRESH).unionByName(kept)
