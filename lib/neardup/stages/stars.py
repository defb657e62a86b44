"""Stage: further centres for the star groups that verification split.

A bucket of more than `lsh.all_pairs_up_to` documents is a star from its smallest id, and
each member keeps one star edge (stages/candidates.py). The smallest id is any document of the
bucket. On real text it can be a long file that quotes a licence, sharing buckets with a
hundred copies of that licence: every copy's edge to it fails verification, and nothing
links the copies to each other (recall at J >= 0.9 fell to 0.62 on 29,491 licence and
package files).

A star group is a centre with every document it is the centre of (its star edges before
`candidates._per_document` keeps some). After verification and components, a group is split while
a member is outside the components of all the group's centres so far. Round by round, each
split group takes further centres among such members, and a star from each to every member
outside its component is verified. The verified edges join the graph, and the group is
whole once every member is a centre or in a centre's component.

A star is verified in two steps. First a centre's pairs to a sample of each other component
of its group: every member of a component of at most `lsh.all_pairs_up_to` in the group,
else about that many by the round's hash. Then, once those edges have joined components,
its pairs to the components it is still apart from. The second step leaves out only pairs
whose ends are already joined, so the components are the same as verifying the whole star;
where a centre is like most of its group (a notice copied 20,000 times, its first centre
alike to most copies) a further centre verifies about a sample per component instead of
the whole group again. On real text a further centre is a licence's copy against a
component of long files: the sample fails, and the second step tries the rest. Further centres are chosen
by a hash of group, member and round, not as the smallest ids again: a corpus's order could
make those the same kind of document each time.

How many: every outside member at once when there are at most `lsh.all_pairs_up_to` of
them (as a bucket that small verifies all its pairs), otherwise 1, 2, 4, ... in rounds 1,
2, 3, .... One centre per round was not enough on real text: a group of a licence's
copies also holds a dozen files that only quote it, each its own component, and the
copies of a second variant were reached after the rounds ran out (recall at J >= 0.9
0.983 on one machine's 1,798 files). Over `lsh.star_rounds` rounds a group of n members
verifies at most max(all_pairs_up_to, 2^rounds) x n pairs: linear in the group. A group of
many mutually dissimilar members (a notice shared by otherwise different documents) is
where the bound binds; those left split after the last round are counted in report.json.
The rounds on a corpus whose groups are all whole cost one job: the check that finds none
split.

Where the groups' members are few enough to collect (dedup's broadcast bound) and their ids
are integers or strings, the rounds' bookkeeping runs on the driver (kernels/star_rounds.py)
and a round costs one Spark job, its pairs' verification; otherwise each round is a dozen
jobs over the members' frames. On the skew benchmark's corpus (a notice copied 20,000
times) the distributed rounds took 50 s of a 141 s run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from neardup import columns as C
from neardup.kernels import id_arrays
from neardup.kernels.star_rounds import FRACTION, StarGroups, next_round, rest, split_groups
from neardup.stages.components import checkpoint
from neardup.stages.driver_frames import DRIVER_ID_TYPES, collect_arrays, frame_from_arrays
from neardup.stages.driver_scoring import Prefetch
from neardup.stages.skew import Counted, counted

log = logging.getLogger("neardup")
_LABEL = "_label"  # a document's component: the smallest id in it, or its own id
_CENTRE = "_centre"
_NEW = "_new_component"
_FIRST = "_first"  # a star pair verified in a round's first step
# The rule, in the fingerprint of the stage's result under _work/.
RULE = (
    "further centres: all outside members up to all_pairs_up_to, else the least by a hash of (group,"
    " member, round) and those whose hash falls in a 2^(round-1)/outside share of its range; each"
    " centre's pairs to a sample of up to all_pairs_up_to of each other component first, the rest"
    " where still apart"
)


@dataclass(frozen=True)
class StarRounds:
    edges: DataFrame  # the further verified edges: (src, dst, similarity)
    rounds: int  # rounds that verified a star
    pairs: int  # pairs they verified
    split: int  # groups still split after the last round


def star_members(stars: DataFrame) -> DataFrame:
    """Star edges (src: centre, dst: member) -> (_group, _id): every group's members, its
    centre included."""
    centres = stars.select(F.col(C.SRC).alias(C.GROUP), F.col(C.SRC).alias(C.DOC_ID)).distinct()
    return stars.select(F.col(C.SRC).alias(C.GROUP), F.col(C.DST).alias(C.DOC_ID)).unionByName(centres)


def _labelled(frame: DataFrame, key: str, labels: DataFrame) -> DataFrame:
    """`frame` with _label: the component of its `key` column (its own id outside any)."""
    found = labels.select(F.col(C.DOC_ID).alias(key), F.col(C.COMPONENT).alias(_LABEL))
    joined = frame.join(found, key, "left")
    return joined.withColumn(_LABEL, F.coalesce(F.col(_LABEL), F.col(key)))


def relabel(labels: DataFrame, edges: DataFrame, components: Callable[[DataFrame], DataFrame]) -> DataFrame:
    """(_id, _component) of a graph, edges (src, dst) added -> (_id, _component) of the
    union graph: the components of the graph of the old components the edges join, each
    old one renamed to the smallest id of its new one (the smallest of their smallest).
    `components` labels a small graph (stages/components.py)."""
    ends = edges.select(F.col(C.SRC).alias(C.DOC_ID)).union(edges.select(F.col(C.DST).alias(C.DOC_ID)))
    new_nodes = ends.distinct().join(labels, C.DOC_ID, "left_anti")
    nodes = labels.unionByName(new_nodes.select(C.DOC_ID, F.col(C.DOC_ID).alias(C.COMPONENT)))
    from_src = _labelled(edges.select(C.SRC, C.DST), C.SRC, labels).withColumnRenamed(_LABEL, "_src_label")
    joined = _labelled(from_src, C.DST, labels)
    merged = components(joined.select(F.col("_src_label").alias(C.SRC), F.col(_LABEL).alias(C.DST)))
    renamed = merged.select(F.col(C.DOC_ID).alias(C.COMPONENT), F.col(C.COMPONENT).alias(_NEW))
    return nodes.join(renamed, C.COMPONENT, "left").select(
        C.DOC_ID, F.coalesce(F.col(_NEW), F.col(C.COMPONENT)).alias(C.COMPONENT)
    )


def _further_centres(outside: DataFrame, number: int, all_up_to: int) -> DataFrame:
    """(_group, _id) of the members outside their group's centres' components -> (_group,
    _centre) of round `number`: all of a group's when at most `all_up_to`, else its least
    member by a hash of (group, member, round) and about 2^(number-1) more, those whose hash
    falls in that share of its range. An aggregation and a join on the group rather than a
    window: a window sorts a whole group in one task, and the largest groups are what the
    skew goals are about."""
    hashed = outside.withColumn("_h", F.xxhash64(C.GROUP, C.DOC_ID, F.lit(number)))
    stats = hashed.groupBy(C.GROUP).agg(
        F.count(F.lit(1)).alias("_outside"), F.min(F.struct("_h", C.DOC_ID))[C.DOC_ID].alias("_least")
    )
    share = F.lit(float(FRACTION * 2 ** (number - 1))) / F.col("_outside")
    take = (
        (F.col("_outside") <= all_up_to)
        | (F.col(C.DOC_ID) == F.col("_least"))
        | (F.pmod(F.col("_h"), F.lit(FRACTION)) < share)
    )
    return hashed.join(stats, C.GROUP).filter(take).select(C.GROUP, F.col(C.DOC_ID).alias(_CENTRE))


def _sampled(labelled: DataFrame, number: int, up_to: int) -> DataFrame:
    """(_group, _id, _label) -> the same with _first: whether the member is in its (group,
    component)'s sample for round `number`: all of them when at most `up_to`, else the least
    by a hash of (group, member, round) and those whose hash falls in an up_to/size share of
    its range. A centre's pairs to the sample are verified first, the rest where still
    needed. An aggregation and a join, as in `_further_centres`."""
    hashed = labelled.withColumn("_h", F.xxhash64(C.GROUP, C.DOC_ID, F.lit(number)))
    stats = hashed.groupBy(C.GROUP, _LABEL).agg(
        F.count(F.lit(1)).alias("_size"), F.min(F.struct("_h", C.DOC_ID))[C.DOC_ID].alias("_least")
    )
    share = F.lit(float(FRACTION * up_to)) / F.col("_size")
    first = (
        (F.col("_size") <= up_to)
        | (F.col(C.DOC_ID) == F.col("_least"))
        | (F.pmod(F.col("_h"), F.lit(FRACTION)) < share)
    )
    return hashed.join(stats, [C.GROUP, _LABEL]).select(C.GROUP, C.DOC_ID, _LABEL, first.alias(_FIRST))


def _apart(pairs: DataFrame, labels: DataFrame) -> DataFrame:
    """(src, dst) pairs -> those whose ends are in different components of `labels`."""
    with_src = _labelled(pairs, C.SRC, labels).withColumnRenamed(_LABEL, "_src_label")
    return (
        _labelled(with_src, C.DST, labels).filter(F.col("_src_label") != F.col(_LABEL)).select(C.SRC, C.DST)
    )


def _bounded(components: Callable[[DataFrame, int], DataFrame], n: int, graph: DataFrame) -> DataFrame:
    return components(graph, n)


def further_stars(
    stars: DataFrame,
    labels: DataFrame,
    verify: Callable[[DataFrame, int, Counted | None], DataFrame],
    components: Callable[[DataFrame, int], DataFrame],
    max_rounds: int,
    all_up_to: int,
    keep: Callable[[DataFrame], DataFrame],
    on_driver: bool = False,
    prefetch: Prefetch | None = None,
) -> StarRounds:
    """Star edges (src, dst) and the components (_id, _component) of the verified graph ->
    the further verified edges that make the split groups whole, within `max_rounds`.

    `verify` scores n (src, dst) pairs and keeps those at the threshold, given their srcs
    counted where the driver has them (a further centre with a smaller id than its members
    is a group of thousands of pairs, to spread over tasks); `components`
    labels a small graph of at most n edges; `keep` persists a frame read more than once.
    `on_driver`: the caller knows the star edges are few enough to collect; `prefetch`
    (the members' ids -> their texts on the driver, or None where they exceed its budget):
    the rounds then score on the driver, with no Spark job.

    On the driver: one job collects the members and their components, and each round is
    one job (its pairs verified and collected). Distributed, each round: one job finds the
    split groups and their further centres, one counts the pairs, then verification and
    the relabelling; one more job counts the groups still split after the last."""
    if on_driver and isinstance(stars.schema[C.SRC].dataType, DRIVER_ID_TYPES):
        return _driver_rounds(stars, labels, verify, max_rounds, all_up_to, prefetch)
    members = keep(star_members(stars))
    centres = members.filter(F.col(C.GROUP) == F.col(C.DOC_ID)).select(
        C.GROUP, F.col(C.DOC_ID).alias(_CENTRE)
    )
    found: list[DataFrame] = []
    pairs = rounds = 0
    for number in range(1, max_rounds + 2):
        labelled = keep(_labelled(members, C.DOC_ID, labels))
        covered = _labelled(centres, _CENTRE, labels).select(C.GROUP, _LABEL).distinct()
        outside = labelled.join(covered, [C.GROUP, _LABEL], "left_anti")
        chosen = keep(_further_centres(outside, number, all_up_to))
        split = chosen.select(C.GROUP).distinct().count()
        if split == 0 or number > max_rounds:
            break
        log.info("stars: round %d, %d split star groups get further centres", number, split)
        centre = _labelled(chosen, _CENTRE, labels).withColumnRenamed(_LABEL, "_centre_label")
        star = keep(
            _sampled(labelled, number, all_up_to)
            .join(centre, C.GROUP)
            .filter(F.col(_LABEL) != F.col("_centre_label"))
            .select(
                F.least(C.DOC_ID, _CENTRE).alias(C.SRC),
                F.greatest(C.DOC_ID, _CENTRE).alias(C.DST),
                _FIRST,
            )
        )
        first = keep(star.filter(F.col(_FIRST)).select(C.SRC, C.DST).distinct())
        # A pair in two groups, sampled in one, is verified first only.
        held = (
            star.filter(~F.col(_FIRST))
            .select(C.SRC, C.DST)
            .distinct()
            .join(first, [C.SRC, C.DST], "left_anti")
        )
        for step in range(2):
            step_pairs = first if step == 0 else keep(_apart(held, labels))
            count = step_pairs.count()
            if step and count == 0:
                break
            pairs += count
            # Checkpointed: each round's plans would otherwise hold every round before, and
            # planning them took minutes by the third round.
            verified = checkpoint(verify(step_pairs, count, None))
            found.append(verified)
            labels = checkpoint(relabel(labels, verified, partial(_bounded, components, count)))
        rounds += 1
        centres = checkpoint(centres.unionByName(chosen.select(C.GROUP, _CENTRE)))
    edges = found[0] if found else None
    for more in found[1:]:
        assert edges is not None
        edges = edges.unionByName(more)
    if edges is None:
        edges = stars.select(C.SRC, C.DST, F.lit(None).cast("double").alias(C.SIMILARITY)).limit(0)
    return StarRounds(edges, rounds, pairs, split)


def _driver_rounds(
    stars: DataFrame,
    labels: DataFrame,
    verify: Callable[[DataFrame, int, Counted | None], DataFrame],
    max_rounds: int,
    all_up_to: int,
    prefetch: Prefetch | None = None,
) -> StarRounds:
    """`further_stars` with the rounds' bookkeeping on the driver, and with `prefetch` their
    scoring too where the members' texts fit its budget."""
    spark = stars.sparkSession
    id_type = stars.schema[C.SRC].dataType
    # The rounds' hashes, as the distributed rounds compute them (`_further_centres`).
    hashes = [f"_h{number}" for number in range(1, max_rounds + 1)]
    labelled = _labelled(star_members(stars), C.DOC_ID, labels).select(
        C.GROUP,
        C.DOC_ID,
        _LABEL,
        *[F.xxhash64(C.GROUP, C.DOC_ID, F.lit(n)).alias(h) for n, h in enumerate(hashes, start=1)],
    )
    found = collect_arrays(labelled, [C.GROUP, C.DOC_ID, _LABEL, *hashes])
    # Codes in the ids' order: `ids[code]` is the id.
    ids, codes, _ = id_arrays.unique(np.concatenate([found[C.GROUP], found[C.DOC_ID]]))
    n = len(found[C.GROUP])
    if n == 0:
        none = stars.select(C.SRC, C.DST, F.lit(None).cast("double").alias(C.SIMILARITY)).limit(0)
        return StarRounds(none, 0, 0, 0)
    _, label_codes, _ = id_arrays.unique(found[_LABEL])
    by_round = (
        np.stack([found[h].astype(np.int64) for h in hashes], axis=1)
        if hashes
        else np.empty((n, 0), np.int64)
    )
    groups = StarGroups(
        codes[:n].astype(np.int64), codes[n:].astype(np.int64), label_codes.astype(np.int64), by_round
    )
    centre_rows = groups.first_centres()
    local = prefetch(ids) if prefetch is not None else None
    pair_schema = T.StructType([T.StructField(C.SRC, id_type, False), T.StructField(C.DST, id_type, False)])
    src: list[np.ndarray] = []
    dst: list[np.ndarray] = []
    sim: list[np.ndarray] = []
    rounds = pairs = split = 0
    for number in range(1, max_rounds + 2):
        if number > max_rounds:
            split = split_groups(groups, centre_rows)
            break
        star = next_round(groups, centre_rows, number, all_up_to)
        if star is None:
            break
        log.info("stars: round %d, %d further centres (on the driver)", number, len(star.centre_rows))
        for step in range(2):
            a, b = (star.src, star.dst) if step == 0 else rest(groups, star)
            if step and len(a) == 0:
                break
            verified = local(ids[a], ids[b]) if local is not None else None
            if verified is None:
                frame = frame_from_arrays(spark, {C.SRC: ids[a], C.DST: ids[b]}, pair_schema)
                got = verify(frame, len(a), counted(ids[a]))
                verified = collect_arrays(got, [C.SRC, C.DST, C.SIMILARITY])
            pairs += len(a)
            ends = id_arrays.lookup(ids, verified[C.SRC]), id_arrays.lookup(ids, verified[C.DST])
            groups.union(groups.label_of(ends[0]), groups.label_of(ends[1]))
            src.append(verified[C.SRC])
            dst.append(verified[C.DST])
            sim.append(verified[C.SIMILARITY].astype(np.float64))
        rounds += 1
        centre_rows = np.concatenate([centre_rows, star.centre_rows])
    schema = T.StructType([*pair_schema.fields, T.StructField(C.SIMILARITY, T.DoubleType(), True)])
    if not src:
        return StarRounds(
            stars.select(C.SRC, C.DST, F.lit(None).cast("double").alias(C.SIMILARITY)).limit(0), 0, 0, split
        )
    edges = {C.SRC: np.concatenate(src), C.DST: np.concatenate(dst), C.SIMILARITY: np.concatenate(sim)}
    return StarRounds(frame_from_arrays(spark, edges, schema), rounds, pairs, split)
