"""Stage: further centres for the star groups that verification split.

A bucket of more than `lsh.all_pairs_up_to` documents is a star from its smallest id, and
each member keeps one star edge (stages/lsh.py). The smallest id is any document of the
bucket. On real text it can be a long file that quotes a licence, sharing buckets with a
hundred copies of that licence: every copy's edge to it fails verification, and nothing
links the copies to each other (recall at J >= 0.9 fell to 0.62 on 29,491 licence and
package files).

A star group is a centre with every document it is the centre of (its star edges before
`lsh._per_document` keeps some). After verification and components, a group is split when a
member is outside the components of all the group's centres so far. Round by round, each
split group takes one such member as a further centre, and a star from it to every member
outside its component is verified. The verified edges join the graph, and the group is
whole once every member is in the component of one of its centres. A further centre is
the least member by a hash of group, member and round, not the smallest id again: a
corpus's order could make that the same kind of document each time.

Each round verifies at most one edge per member of a split group, so `lsh.star_rounds`
bounds the work linearly in the groups' sizes. A group whose members are dissimilar to
each other (a notice shared by otherwise different documents) stays split whatever the
rounds: that is the truth, and the rounds bound what finding it out costs. Groups still
split after the last round are counted in report.json. The rounds on a corpus whose groups
are all whole cost one job: the check that finds none split.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from neardup import columns as C
from neardup.stages.components import checkpoint

log = logging.getLogger("neardup")
_LABEL = "_label"  # a document's component: the smallest id in it, or its own id
_CENTRE = "_centre"
_NEW = "_new_component"
# The rule, in the fingerprint of the stage's result under _work/.
RULE = "further centres: least hash of (group, member, round) outside the centres' components"


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


def further_stars(
    stars: DataFrame,
    labels: DataFrame,
    verify: Callable[[DataFrame], DataFrame],
    components: Callable[[DataFrame], DataFrame],
    max_rounds: int,
    keep: Callable[[DataFrame], DataFrame],
) -> StarRounds:
    """Star edges (src, dst) and the components (_id, _component) of the verified graph ->
    the further verified edges that make the split groups whole, within `max_rounds`.

    `verify` scores (src, dst) pairs and keeps those at the threshold; `components` labels
    a small graph; `keep` persists a frame read more than once. Each round: one job finds
    the split groups and their further centres, one counts the pairs, then verification
    and the relabelling. One more job counts the groups still split after the last."""
    members = keep(star_members(stars))
    centres = members.filter(F.col(C.GROUP) == F.col(C.DOC_ID)).select(
        C.GROUP, F.col(C.DOC_ID).alias(_CENTRE)
    )
    found: list[DataFrame] = []
    pairs = 0
    for number in range(1, max_rounds + 2):
        labelled = keep(_labelled(members, C.DOC_ID, labels))
        covered = _labelled(centres, _CENTRE, labels).select(C.GROUP, _LABEL).distinct()
        outside = labelled.join(covered, [C.GROUP, _LABEL], "left_anti")
        # The least of (hash, id): a member that no id order favours, the same in every run.
        least = F.min(F.struct(F.xxhash64(C.GROUP, C.DOC_ID, F.lit(number)).alias("h"), C.DOC_ID))
        chosen = keep(outside.groupBy(C.GROUP).agg(least[C.DOC_ID].alias(_CENTRE)))
        split = chosen.count()
        if split == 0 or number > max_rounds:
            break
        log.info("stars: round %d, %d split star groups get a further centre", number, split)
        centre = _labelled(chosen, _CENTRE, labels).withColumnRenamed(_LABEL, "_centre_label")
        star = (
            labelled.join(centre, C.GROUP)
            .filter(F.col(_LABEL) != F.col("_centre_label"))
            .select(
                F.least(C.DOC_ID, _CENTRE).alias(C.SRC),
                F.greatest(C.DOC_ID, _CENTRE).alias(C.DST),
            )
            .distinct()
        )
        star = keep(star)
        pairs += star.count()
        # Checkpointed: each round's plans would otherwise hold every round before, and
        # planning them took minutes by the third round.
        verified = checkpoint(verify(star))
        found.append(verified)
        labels = checkpoint(relabel(labels, verified, components))
        centres = checkpoint(centres.unionByName(chosen.select(C.GROUP, _CENTRE)))
    edges = found[0] if found else None
    for more in found[1:]:
        assert edges is not None
        edges = edges.unionByName(more)
    if edges is None:
        edges = stars.select(C.SRC, C.DST, F.lit(None).cast("double").alias(C.SIMILARITY)).limit(0)
    return StarRounds(edges, len(found), pairs, split)
