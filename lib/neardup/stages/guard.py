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

Where the clustered documents and the verified edges are few enough to collect (dedup's
broadcast bound), the rounds and the nearest step run on the driver's arrays
(`_guard_on_driver`, kernels/guard_rounds.py): the Spark work is three collects, one sort
where documents fail, and the scoring of the pairs without a verified edge. Otherwise each
round is a dozen jobs over frames, and the nearest step joins and aggregates.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from neardup import columns as C
from neardup.errors import InvariantError
from neardup.kernels import id_arrays
from neardup.kernels.guard_rounds import EdgeIndex, regroup
from neardup.kernels.nearest_kept import choose_nearest, pairs_to_score
from neardup.stages.components import checkpoint
from neardup.stages.driver_frames import (
    DRIVER_ID_TYPES,
    collect_arrays,
    frame_from_arrays,
    nan_as_null,
)
from neardup.stages.driver_scoring import Prefetch
from neardup.stages.skew import Counted, counted

# Scores (src, dst) pairs: given a bound on their number, and their srcs counted, where known.
Scorer = Callable[[DataFrame, int | None, Counted | None], DataFrame]
# The driver's rounds' scoring: (src, dst) ids -> {src, dst, similarity} of every pair.
_Scored = Callable[[np.ndarray, np.ndarray], dict[str, np.ndarray]]
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
    ranking: Callable[[np.ndarray], np.ndarray] | None = None,
    prefetch: Prefetch | None = None,
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
    pair per removed document. on_driver: the caller knows `clustered`, the edges and the
    pinned documents are small enough to collect (the broadcast bound), and `ranking`:
    ids -> the same ids, best first by the survivor policy (the order `choose`
    picks by): the rounds and the nearest step then run on the driver
    (`_guard_on_driver`); with `prefetch` (stages/driver_scoring.py, at threshold 0) their
    scoring too, where the clustered documents' texts fit its budget.
    """
    stats = GuardStats()
    edge_sims = edges.select(C.SRC, C.DST, C.SIMILARITY)
    if on_driver and ranking is not None and isinstance(clustered.schema[C.DOC_ID].dataType, DRIVER_ID_TYPES):
        args = (threshold, max_rounds, pinned, nearest_below, stats, prefetch)
        return _guard_on_driver(clustered, edge_sims, score, ranking, *args), stats
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
    while True:
        stats.rounds += 1
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
        # Checkpointed before and after: the rounds' plans, unioned and joined again, took
        # minutes to plan and ran the driver out of memory on the planted chains.
        out = checkpoint(out)
        out, stats.moved_to_nearest = _nearest_kept(
            out, clustered, lambda pairs: score(pairs, None, None), keep, nearest_below
        )
        out = checkpoint(out)
    return out, stats


def _pair_schema(id_type: T.DataType) -> T.StructType:
    """(src, dst) pairs of ids of `id_type`, made on the driver for `score`."""
    return T.StructType([T.StructField(C.SRC, id_type, False), T.StructField(C.DST, id_type, False)])


def _guard_on_driver(
    clustered: DataFrame,
    edges: DataFrame,
    score: Scorer,
    ranking: Callable[[np.ndarray], np.ndarray],
    threshold: float | None,
    max_rounds: int,
    pinned: DataFrame | None,
    nearest_below: float | None,
    stats: GuardStats,
    prefetch: Prefetch | None = None,
) -> DataFrame:
    """`guard_clusters`' rounds and nearest step on the driver's arrays
    (kernels/guard_rounds.py): the clustered documents, the verified edges and the pinned
    ones are collected once, and the survivor policy's ranking of the first round's failing
    documents where there are any (one sort); then the only Spark work is the scoring of
    pairs without a verified edge, and the result is a frame of the driver's arrays. The
    distributed rounds ran about thirty jobs on 1,000,000 documents, each over a few
    thousand rows."""
    spark = clustered.sparkSession
    id_type = clustered.schema[C.DOC_ID].dataType
    got = collect_arrays(clustered, [C.DOC_ID, C.KEPT_ID])
    # Codes: indices into the sorted ids, so order (the smallest id) is kept.
    ids = id_arrays.unique(np.concatenate([got[C.DOC_ID], got[C.KEPT_ID]]))[0]
    n = len(ids)
    docs, origin = _codes(ids, got[C.DOC_ID]), _codes(ids, got[C.KEPT_ID])
    nan = F.lit(float("nan"))
    e = collect_arrays(
        edges.select(C.SRC, C.DST, F.coalesce(C.SIMILARITY, nan).alias(C.SIMILARITY)),
        [C.SRC, C.DST, C.SIMILARITY],
    )
    # Only edges between clustered documents matter (the distributed rounds join them so).
    src, dst = _codes(ids, e[C.SRC]), _codes(ids, e[C.DST])
    inside = (src >= 0) & (dst >= 0)
    src, dst = src[inside], dst[inside]
    index = EdgeIndex(src, dst, e[C.SIMILARITY][inside], n)
    # Every pair the guard scores is of clustered documents: their texts, if they fit.
    local = prefetch(ids) if prefetch is not None else None
    # Where they do not, the texts of the first scoring's documents, when it asks for them:
    # every later round scores that round's failing documents again, among themselves and
    # with their clusters' kept ones, and so does the nearest step, so one collect usually
    # serves them all (on the 1M benchmark, one job in place of a scoring's two each round).
    fetched: dict[str, Any] = {}

    def on_driver(src_ids: np.ndarray, dst_ids: np.ndarray) -> dict[str, np.ndarray] | None:
        if local is not None:
            return local(src_ids, dst_ids)
        if prefetch is None:
            return None
        needed = id_arrays.unique(np.concatenate([src_ids, dst_ids]))[0]
        held = fetched.get("ids")
        if held is None or not _holds(held, needed):
            if fetched.get("refused"):
                return None  # over the budget once: not tried again, each try costs a job
            want = needed if held is None else id_arrays.unique(np.concatenate([held, needed]))[0]
            scorer = prefetch(want)
            if scorer is None:
                fetched["refused"] = True  # what was collected still serves what it holds
                return None
            fetched.update(ids=want, scorer=scorer)
        return fetched["scorer"](src_ids, dst_ids)

    def scored(src_ids: np.ndarray, dst_ids: np.ndarray) -> dict[str, np.ndarray]:
        """Every pair's score (threshold 0): on the driver from the collected texts, else
        one scoring by `score`, its srcs counted so no job looks for large stars."""
        here = on_driver(src_ids, dst_ids)
        if here is not None:
            return here
        pairs = frame_from_arrays(spark, {C.SRC: src_ids, C.DST: dst_ids}, _pair_schema(id_type))
        return collect_arrays(score(pairs, len(src_ids), counted(src_ids)), [C.SRC, C.DST, C.SIMILARITY])

    # The survivor policy's ranks, of the first round's failing documents only: every later
    # round's are among them, and a subset of a total order orders as the whole does.
    rank = np.full(n, -1, np.int64)
    is_pinned = np.zeros(n, bool)
    if pinned is not None:
        held = _codes(ids, collect_arrays(pinned, [C.DOC_ID])[C.DOC_ID])
        is_pinned[held[held >= 0]] = True

    settled: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    pending, kept = docs, origin
    while True:
        stats.rounds += 1
        is_kept = pending == kept
        sims = index.lookup(pending, kept)
        sims[is_kept] = np.nan
        fresh = ~is_kept & np.isnan(sims)
        if fresh.any():
            sims[fresh] = _score_each(ids[kept[fresh]], ids[pending[fresh]], scored)
        stats.scored_pairs += int(fresh.sum())
        if threshold is None and pinned is None:
            settled.append((pending, kept, sims))
            break
        clears = (np.ones(len(sims), bool) if threshold is None else sims >= threshold) & ~is_pinned[pending]
        failing = ~is_kept & ~clears
        n_failing = int(failing.sum())
        stats.failing_per_round.append(n_failing)
        stay = is_kept | clears
        settled.append((pending[stay], kept[stay], sims[stay]))
        if n_failing == 0:
            break
        stats.clusters_split += len(np.unique(kept[failing]))
        if stats.rounds == 1:
            stats.documents_rehomed = n_failing
        out = pending[failing]
        if stats.rounds >= max_rounds:
            stats.released = n_failing
            settled.append((out, out, np.full(len(out), np.nan)))
            break
        if stats.rounds == 1:
            _rank_of(out, ids, ranking, rank)
        pending, kept, alone = regroup(out, src, dst, rank)
        settled.append((alone, alone, np.full(len(alone), np.nan)))
    docs_out = np.concatenate([d for d, _, _ in settled])
    kept_out = np.concatenate([k for _, k, _ in settled])
    sims_out = np.concatenate([x for _, _, x in settled])
    if threshold is not None and nearest_below is not None and stats.clusters_split:
        origin_of = np.empty(n, np.int64)
        origin_of[docs] = origin
        kept_out, sims_out, stats.moved_to_nearest = _nearest_on_driver(
            ids, docs_out, kept_out, sims_out, origin_of[docs_out], scored, nearest_below
        )
    # The similarity nullable: through pandas (Spark 3.5) a NaN arrives as a null.
    schema = T.StructType(
        [
            T.StructField(C.DOC_ID, id_type, False),
            T.StructField(C.KEPT_ID, id_type, False),
            T.StructField(C.SIMILARITY, T.DoubleType(), True),
        ]
    )
    result = frame_from_arrays(
        spark, {C.DOC_ID: ids[docs_out], C.KEPT_ID: ids[kept_out], C.SIMILARITY: sims_out}, schema
    )
    # A kept document's similarity null again.
    return result.select(C.DOC_ID, C.KEPT_ID, nan_as_null(C.SIMILARITY))


def _rank_of(
    docs: np.ndarray, ids: np.ndarray, ranking: Callable[[np.ndarray], np.ndarray], rank: np.ndarray
) -> None:
    """rank[docs] = their places in the survivor policy's order (one sort, `ranking`)."""
    order = _codes(ids, ranking(ids[docs]))
    if len(order) != len(docs) or (order < 0).any():
        raise InvariantError(f"guard: {len(order)} documents ranked for {len(docs)} failing ones")
    rank[order] = np.arange(len(order))


def _codes(ids: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Each value's index in the sorted `ids`, -1 where it is not one of them."""
    return id_arrays.lookup(ids, values)


def _holds(held: np.ndarray, ids: np.ndarray) -> bool:
    """Whether the sorted distinct `held` has every one of the sorted distinct `ids`."""
    return bool((id_arrays.lookup(held, ids) >= 0).all())


def _score_each(src: np.ndarray, dst: np.ndarray, scored: _Scored) -> np.ndarray:
    """The scores of (src, dst) pairs, each dst once (a removed document against its kept
    one), in the order given."""
    got = scored(src, dst)
    # Every pair comes back once (scored at threshold 0).
    back = got[C.DST]
    order = id_arrays.argsort(back)
    place = id_arrays.lookup(back[order], dst)
    at = order[np.maximum(place, 0)] if len(order) else place
    if len(back) != len(dst) or (place < 0).any():
        raise InvariantError(f"guard: {len(dst)} pairs scored, but the scores came back for other pairs")
    return np.asarray(got[C.SIMILARITY][at], dtype=np.float64)


def _nearest_on_driver(
    ids: np.ndarray,
    docs: np.ndarray,
    kept: np.ndarray,
    sims: np.ndarray,
    origin: np.ndarray,
    scored: _Scored,
    below: float,
) -> tuple[np.ndarray, np.ndarray, int]:
    """`_nearest_kept` on the rounds' arrays (codes; kernels/nearest_kept.py): the pairs
    scored by `score`, the moved rows changed -> (kept, similarity, how many moved). On the
    skew benchmark's corpus the distributed step took about 11 s, a dozen jobs over 57,649
    rows, for one document moved."""
    owner, near = pairs_to_score(docs, kept, sims, origin, below, NEAREST_UP_TO)
    if not len(owner):
        return kept, sims, 0
    # Grouped by the kept document: a cluster split into a few, with thousands below the
    # threshold, is a group of thousands of pairs, spread over tasks by their counts.
    got = scored(ids[near], ids[docs[owner]])
    low = np.unique(owner)
    doc, new_kept, new_sim = choose_nearest(
        docs[low],
        kept[low],
        sims[low],
        _codes(ids, got[C.DST]),
        _codes(ids, got[C.SRC]),
        got[C.SIMILARITY],
        NEAREST_MARGIN,
    )
    # Each moved document's row, found among the rows (documents are unique).
    order = np.argsort(docs, kind="stable")
    at = order[np.searchsorted(docs, doc, sorter=order)]
    kept, sims = kept.copy(), sims.copy()
    kept[at], sims[at] = new_kept, new_sim
    return kept, sims, len(doc)


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
