"""Stage: verify candidate edges before clustering.

Unverified band collisions, chained by connected components, grow giant false
clusters; so every candidate pair is scored and dropped below verify.threshold.
`signature`: the MinHash estimate (the fraction of equal slots), which needs only
the two signatures; `exact`: the Jaccard of the two shingle sets, recomputed
from the normalized texts; `none`: every candidate is kept (similarity null).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
from pyspark.broadcast import Broadcast
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from neardup import columns as C
from neardup.kernels.id_filter import id_set
from neardup.kernels.signatures import SignParams
from neardup.stages import skew
from neardup.stages.driver_frames import collect_arrays

log = logging.getLogger("neardup")
_PARTS = "_parts"  # how many parts a large star is scored in
_PRINT = "_print"
# At most this many candidates' ends are collected for `may_be_ends`' filter: 64 MB of
# fingerprints on the driver and in every Python worker (on the benchmark corpus, with about
# one end to every three documents, some 48 million documents).
ID_SET_ENDS = 16_000_000


def _edge_schema(edges: DataFrame) -> T.StructType:
    fields = {f.name: f for f in edges.schema.fields}
    return T.StructType([fields[C.SRC], fields[C.DST], T.StructField(C.SIMILARITY, T.DoubleType(), False)])


def endpoint_texts(
    edges: DataFrame,
    docs: DataFrame,
    broadcast: bool,
    bound: int,
    share: Callable[[bytes], Broadcast[bytes]] | None = None,
) -> DataFrame:
    """(_id, _text) of every document at either end of an edge (src, dst): what exact
    verification reads, and all the over-merge guard may need to score afterwards (its
    pairs join documents of verified edges). Kept, it spares the guard a second scan of
    the whole input for a few thousand texts. `broadcast`: the ends are few enough to
    ship to every task, so the other texts are dropped where they are read; `bound`: at
    most this many ends.

    Otherwise the join shuffles texts, and without a filter every text of the input: at
    10,000,000 documents 15 GB of the 19 GB verification shuffled, for the 3.3 million it
    needs. So with `share` (which broadcasts a payload to the tasks) and at most
    `ID_SET_ENDS` ends, the texts are filtered first (`may_be_ends`); the join after it
    drops the few non-ends that pass.
    """
    ends = (
        edges.select(F.col(C.SRC).alias(C.DOC_ID))
        .union(edges.select(F.col(C.DST).alias(C.DOC_ID)))
        .distinct()
    )
    texts = docs.select(C.DOC_ID, C.TEXT)
    if broadcast:
        return texts.join(F.broadcast(ends), C.DOC_ID)
    if share is not None and bound <= ID_SET_ENDS:
        texts = may_be_ends(texts, ends, share)
    return texts.join(ends, C.DOC_ID)


def may_be_ends(texts: DataFrame, ends: DataFrame, share: Callable[[bytes], Broadcast[bytes]]) -> DataFrame:
    """The rows of `texts` whose _id may be one of `ends`' (_id): every end's, and others
    with probability about len(ends) / 2**32. The ends are collected once (now, not when the
    frame is read) as 32-bit fingerprints of their ids' hashes (kernels/id_filter.py: four
    bytes each on the driver and in every Python worker, which `share` ships them to), and
    where the texts are read a vectorized UDF tests each row's id against them: only the
    ids' hashes go to Python, the texts stay in the JVM."""
    from neardup.stages.ends_filter import may_be_in

    prints = F.shiftright(F.xxhash64(C.DOC_ID), 32).cast("int").alias(_PRINT)
    found = collect_arrays(ends.select(prints), [_PRINT])[_PRINT]
    return texts.filter(may_be_in(share(id_set(found)))(F.xxhash64(C.DOC_ID)))


def _routed_to_groups(
    candidates: DataFrame,
    docs: DataFrame,
    broadcast: bool,
    split_over: skew.Threshold | None,
    known: skew.Counted | None = None,
) -> DataFrame:
    """(_group, _id, _text): each candidate endpoint's text sent to every group (edges of one
    src) it is in, clustered by src and sorted by (_src, not src, _id): src comes first.

    A group is one part unless it has more than `split_over` edges (found from a sample,
    stages/skew.py; None: never split), or of `known`'s counts where the caller counted
    them: then its destinations are spread over parts by a hash of their id, and the
    source's text goes to every part, so a star's edges are scored in several tasks, each
    normalizing and shingling the centre once.
    """
    members = (
        candidates.select(F.col(C.SRC).alias(C.GROUP), F.col(C.SRC).alias(C.DOC_ID))
        .union(candidates.select(F.col(C.SRC).alias(C.GROUP), F.col(C.DST).alias(C.DOC_ID)))
        .distinct()
    )
    if split_over is None:
        parts = None
    elif known is not None:
        parts = _counted_parts(candidates, known, skew.threshold(split_over))
    else:
        parts = _star_parts(candidates, split_over)
    keys = [C.GROUP]
    if parts is not None:
        keys.append(C.PART)
        n = F.coalesce(F.col(_PARTS), F.lit(1))
        # The source in every part of its group, each destination in one.
        part = F.when(F.col(C.DOC_ID) == F.col(C.GROUP), F.sequence(F.lit(0), n - 1)).otherwise(
            F.array(F.pmod(F.xxhash64(C.DOC_ID), n).cast("int"))
        )
        members = members.join(F.broadcast(parts), C.GROUP, "left").select(
            C.GROUP, C.DOC_ID, F.explode(part).alias(C.PART)
        )
    routed = docs.select(C.DOC_ID, C.TEXT).join(F.broadcast(members) if broadcast else members, C.DOC_ID)
    # Parts of one group that share a task sort as one group (kernels/scoring.py); its source
    # first, whether its id is the smallest (candidates) or not (the guard's pairs, from the
    # kept document).
    if known is None:
        shuffled = routed.repartition(*keys)
    else:
        shuffled = routed.repartition(skew.counted_partitions(candidates.sparkSession, known), *keys)
    return shuffled.sortWithinPartitions(C.GROUP, F.col(C.DOC_ID) != F.col(C.GROUP), C.DOC_ID).select(
        C.GROUP, C.DOC_ID, C.TEXT
    )


def _star_parts(candidates: DataFrame, split: skew.Threshold) -> DataFrame | None:
    """(_group, _parts) of the sources with an estimated more than the threshold's edges, or
    None if there are none: one job over a sample of the candidates (by their destination),
    sampled for the threshold of their bound; a derived threshold is then taken for the rows
    the sample estimates (two per candidate). Any estimate will do: a group in any number of
    parts gives the same edges."""
    rate = skew.sample_rate(skew.threshold(split))
    sampled = candidates.filter(skew.in_sample(C.DST, rate))
    # A configured threshold needs no estimate of the rows.
    found, pairs = skew.frequent(sampled, C.SRC, rate, skew.least(split), total=not isinstance(split, int))
    over = skew.threshold(split, 2 * pairs)
    found = [(k, n) for k, n in found if n > over]
    if not found:
        return None
    log.info(
        "verify: %d stars of more than %d edges (the largest about %d) spread over tasks",
        len(found),
        over,
        found[0][1],
    )
    return _parts_frame(candidates, [(k, skew.pieces(n, over)) for k, n in found])


def _counted_parts(candidates: DataFrame, known: skew.Counted, over: int) -> DataFrame | None:
    """`_star_parts` from the caller's exact counts: no job."""
    found = [(k, skew.pieces(n, over)) for k, n in known.over(over)]
    if not found:
        return None
    log.info("verify: %d counted stars of more than %d edges spread over tasks", len(found), over)
    return _parts_frame(candidates, found)


def _parts_frame(candidates: DataFrame, parts: list[tuple[Any, int]]) -> DataFrame:
    src = next(f for f in candidates.schema.fields if f.name == C.SRC)
    schema = T.StructType(
        [T.StructField(C.GROUP, src.dataType, False), T.StructField(_PARTS, T.IntegerType(), False)]
    )
    return candidates.sparkSession.createDataFrame(parts, schema)


def verify_pairs(
    candidates: DataFrame,
    signed: DataFrame,
    docs: DataFrame,
    params: SignParams,
    method: str,
    threshold: float,
    broadcast_ends: bool = True,
    split_over: skew.Threshold | None = None,
    known: skew.Counted | None = None,
) -> DataFrame:
    """(src, dst) -> (src, dst, similarity: double) for pairs scoring >= threshold.

    `signature` joins `signed` (_id, _sig) twice (two shuffles of the candidates and the
    signatures they need). `exact` needs the texts of `docs` (_id, _text): the edges are
    grouped by src (a candidate's smaller end: a star's centre, or a small bucket's every
    member but the last; the kept document of a pair the guard scores), each endpoint's
    text is shuffled once to each group it is in, and a group is scored where it lands:
    one scan and one shuffle of the texts, and a text normalized and shingled once per
    group rather than once per edge. (Joining the texts
    as src and then as dst shuffled them three times over and took 18 s against 13 s on
    1M documents.) With `broadcast_ends` the group memberships are broadcast, so the texts
    of all other documents are dropped where they are read. A group of more than
    `split_over` edges is scored in parts (`_routed_to_groups`); `known`: the groups' edges,
    where the caller counted them (else a sample finds the large ones).
    """
    if method == "none":
        return candidates.select(C.SRC, C.DST, F.lit(None).cast("double").alias(C.SIMILARITY))
    if method == "exact":
        routed = _routed_to_groups(candidates, docs, broadcast_ends, split_over, known)

        def score(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            from neardup.kernels.scoring import score_groups

            return score_groups(batches, params, threshold)

        return routed.mapInArrow(score, _edge_schema(candidates))
    if method != "signature":  # pragma: no cover - config validation forbids it
        raise ValueError(method)
    side = signed.select(C.DOC_ID, C.SIG)
    pairs = (
        candidates.join(side.withColumnRenamed(C.DOC_ID, C.SRC).withColumnRenamed(C.SIG, C.SIG_A), C.SRC)
        .join(side.withColumnRenamed(C.DOC_ID, C.DST).withColumnRenamed(C.SIG, C.SIG_B), C.DST)
        .select(C.SRC, C.DST, C.SIG_A, C.SIG_B)
    )
    num_perm = params.num_perm

    def estimate(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from neardup.kernels.scoring import score_signature_pairs

        for batch in batches:
            yield score_signature_pairs(batch, num_perm, threshold)

    return pairs.mapInArrow(estimate, _edge_schema(candidates))
