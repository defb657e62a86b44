"""`neardup dedup`: the deduplication job, top to bottom (`run` is the list):

    read -> sign (normalize, hash, MinHash, band keys: the one pass over the text)
         -> exact copies -> LSH candidates -> verify -> components -> further stars
         -> survivors -> over-merge guard -> write -> check
         -> report (figures for report.html) -> publish

With `against` (dedup --against INDEX), an `index` stage after read checks the batch's ids
against the index's, an `against` stage after the candidates adds candidates between the
batch and the indexed documents, and verification, components, survivors (indexed documents
first) and the guard (indexed documents never removed) take them in; the outputs hold the
batch's rows only (stages/against.py, runtime/indexstore.py).

Each stage is one call that takes the values earlier stages returned and returns its own
with its counts; the run's context (harness.py) holds nothing of dedup's. The Spark work
lives in `neardup.stages`, the math in `neardup.kernels`. Stages whose results are kept
under `_work/` (signatures, candidates, edges, stars) are reused by a rerun with the same
fingerprint (`fingerprints`).

`sample` is what `neardup tune --input` runs instead: the same read and checks, then a
sample of the documents brought to the driver.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from neardup import columns as C
from neardup.config import Config
from neardup.harness import (
    Claim,
    Counts,
    Paths,
    ReadResult,
    Result,
    RunContext,
    broadcastable,
    claimed_output,
    counted,
    envelope,
    open_input,
    opened_run,
    plan_memory,
    publish,
    read_stage,
)
from neardup.kernels.bands import s_curve
from neardup.kernels.signatures import BAND_KEYS_FORMAT, SIGNED_COLUMNS, SignParams
from neardup.report import check_renderer
from neardup.report.summary import Summary
from neardup.runtime.indexstore import check_id_type
from neardup.runtime.interrupts import held as held_interrupts
from neardup.runtime.jobgroups import count
from neardup.runtime.memory import human
from neardup.runtime.sizing import batch_settings, writer_options
from neardup.runtime.stagelog import StageLog
from neardup.runtime.workdir import fingerprint, read_parquet
from neardup.stages.against import (
    OpenIndex,
    cross_edges,
    index_read_errors,
    indexed_signatures,
    indexed_texts,
    open_index,
    refuse_indexed_ids,
    shared_index_rows,
)
from neardup.stages.candidates import (
    STAR_EDGES,
    Candidates,
    Held,
    band_rows,
    candidate_edges,
    keys_fit_driver,
)
from neardup.stages.check import check_outputs
from neardup.stages.components import connected_components
from neardup.stages.driver_frames import DRIVER_ID_TYPES, ids_frame
from neardup.stages.driver_scoring import Prefetch, frame_sizes, prefetcher
from neardup.stages.exact import (
    HELD_BYTES,
    HeldMembers,
    exact_groups,
    exact_on_driver,
    group_exact,
    orders_on_driver,
)
from neardup.stages.guard import guard_clusters
from neardup.stages.membership import (
    assign_members,
    assign_on_driver,
    cluster_sizes,
    clustered_figures,
    clustered_of_arrays,
    clustered_on_driver,
    sizes_on_driver,
)
from neardup.stages.read import documents
from neardup.stages.report_figures import gather
from neardup.stages.sign import sign_documents, sign_params
from neardup.stages.skew import Counted, split_threshold
from neardup.stages.stars import RULE as STAR_ROUNDS_RULE
from neardup.stages.stars import further_stars, relabel
from neardup.stages.survivors import choose_survivors, survivor_ranking, survivors_on_driver
from neardup.stages.tune_sample import Sample, draw_sample
from neardup.stages.verify import endpoint_texts, verify_pairs
from neardup.stages.write import write_outputs

log = logging.getLogger("neardup")

# report.json's counts, in order; the counts of stages that other sections show are named in
# _SHOWN_ELSEWHERE, and any other count a stage makes is added after these (harness.counted).
COUNTS = (
    "input",
    "malformed",
    "rejected",
    "exact_duplicates",
    "signed",
    "candidate_pairs",
    "verified_pairs",
    "clustered",
    "clusters",
    "largest_cluster",
    "near_duplicates",
    "unique",
    "kept",
    "matched_index",
)
_SHOWN_ELSEWHERE = (
    "components_backend",
    "components_iterations",
    "star_edges",
    "star_rounds",
    "star_pairs",
    "star_verified_pairs",
    "stars_split",
    "guard_rounds",
    "clusters_split",
    "documents_rehomed",
    "index_documents",
    "index_segments",
    "index_candidate_pairs",
    "index_candidates",
)


@dataclass(frozen=True)
class Fingerprints:
    """What each finished stage under _work/ was computed from (see `fingerprints`)."""

    signatures: str
    candidates: str
    edges: str
    stars: str
    against: str | None = None  # dedup --against: the candidates between batch and index


def fingerprints(
    cfg: Config,
    params: SignParams,
    input_files: list[tuple[str, int, int]],
    table: str | None,
    index: dict[str, Any] | None = None,
) -> Fingerprints:
    """Digests of every parameter that affects each reusable stage, chained so that a
    change upstream changes everything downstream.

    signatures: the input files (names, sizes, modification times) or the table name, the
    id and text columns, the signing parameters, the band keys' format and the signed
    columns (signatures kept by an earlier release are not read as this one's), whether
    signatures are kept (signature verification), and the survivor policy (signatures carry
    its column, and candidates are drawn between exact groups' representatives, which the
    policy picks).
    candidates: + lsh.all_pairs_up_to and the rule for a document's star edges.
    edges: + the verification method and threshold.
    stars: + lsh.star_rounds and the rule that picks a further centre.
    With `index` (dedup --against: the index's path, build id and version), against:
    candidates + the index, and edges + the index too.
    """
    sign = fingerprint(
        {
            "input": input_files,
            "table": table,
            "columns": [cfg.input.id_col, cfg.input.text_col],
            "sign": asdict(params),
            "band_keys": BAND_KEYS_FORMAT,
            "signed_columns": SIGNED_COLUMNS,
            "signatures_kept": cfg.verify.method == "signature",
            "survivor": asdict(cfg.survivor),
        }
    )
    candidates = fingerprint(
        {"sign": sign, "all_pairs_up_to": cfg.lsh.all_pairs_up_to, "star_edges": STAR_EDGES}
    )
    verified = {"candidates": candidates, "verify": asdict(cfg.verify), "t": cfg.verify_threshold}
    against = None if index is None else fingerprint({"candidates": candidates, "index": index})
    edges = fingerprint(verified if against is None else {**verified, "against": against})
    stars = fingerprint({"edges": edges, "star_rounds": cfg.lsh.star_rounds, "rule": STAR_ROUNDS_RULE})
    return Fingerprints(sign, candidates, edges, stars, against)


def run(spark: SparkSession, cfg: Config, input_path: str, output: str, against: str | None = None) -> Result:
    """Run the whole job; returns the report also written to report.json. `against`: an
    index (neardup index build) to deduplicate the input against as well."""
    with claimed_output(spark, cfg, input_path, output, {"index": against} if against else None) as claim:
        return _run(spark, cfg, input_path, claim, against)


def _run(spark: SparkSession, cfg: Config, input_path: str, claim: Claim, against: str | None) -> Result:
    """`run` on its claimed output (paths checked, lease held until publication)."""
    started = time.time()
    check_renderer(cfg)
    summary: Summary | None = None
    # An index built with other parameters is refused before any work.
    index = open_index(spark, against, sign_params(cfg), cfg.verify.method) if against else None
    # A file of the index that cannot be read ends the run as a damaged index (exit 4).
    unreadable = index_read_errors(index.store, index.manifest) if index is not None else nullcontext()
    with opened_run(spark, cfg, input_path, claim) as r, unreadable:
        inp = r.stage("read", input_path, read_stage)
        digest = index.manifest.digest(index.store.path) if index is not None else None
        fps = fingerprints(cfg, inp.params, inp.files, inp.table, digest)
        if index is not None:
            r.stage("index", index.shown, _check_index, inp, index)
        signed = r.stage("sign", count(inp.rows - inp.malformed_rows, "documents"), _sign, inp, fps)
        exact = r.stage("exact", count(signed.signed, "signed"), _exact, signed)
        n_reps = signed.signed - exact.copies
        reps = count(n_reps, "representatives")
        candidates = r.stage("candidates", reps, _candidates, fps, signed, exact)
        exact = replace(exact, held=None)  # the driver's band keys, no longer needed
        found: _Against | None = None
        if index is not None:
            indexed = count(index.manifest.documents, "indexed")
            found = r.stage("against", f"{reps} x {indexed}", _against, fps, index, exact, n_reps)
        scoring = _Scoring(inp, signed, cfg.verify.method, found)
        pairs = candidates.rows + (found.edges.rows if found else 0)
        edges = r.stage("verify", count(pairs, "candidates"), _verify, fps, scoring, candidates)
        components = r.stage("components", count(edges.rows, "edges"), _components, edges)
        stars = count(candidates.stars, "star edges")
        edges, components = r.stage(
            "stars", stars, _stars, fps, scoring, exact, candidates, edges, components
        )
        chosen = r.stage("survivors", count(edges.rows, "edges"), _survivors, exact, edges, components, found)
        guarded = r.stage("guard", count(chosen.rows, "clustered"), _guard, scoring, exact, edges, chosen)
        written = f"{guarded.kept:,} kept / {signed.signed - guarded.kept:,} removed"
        staged = r.stage("write", written, _write, inp, exact, edges, guarded, found)
        statuses = r.stage("check", count(inp.rows, "rows"), _check, inp, staged, index)
        if cfg.report.html:
            about = f"{count(inp.rows, 'rows')}, {count(edges.rows, 'edges')}"
            summary = r.stage("report", about, _gather_report, inp, edges, staged, statuses)
    report = _report(r, started, inp, index, guarded)
    files = {"report.html": _render_html(report, summary)} if summary is not None else {}
    with held_interrupts():  # exit 130 means nothing was published
        publish(r.fs, r.paths, report, files)
    return Result(r.paths.output, report)


def sample(spark: SparkSession, cfg: Config, input_path: str, size: int, max_bytes: int) -> Sample:
    """What `neardup tune --input` reads: the input read and checked as `run` reads it,
    then a sample of its documents (stages/tune_sample.py) on the driver."""

    def describe(name: str, about: str) -> None:
        spark.sparkContext.setJobDescription(f"neardup tune: {name} {about}".rstrip())

    stages = StageLog(describe)
    with stages.stage("read", input_path) as counts:
        opened = open_input(spark, cfg, input_path)
        counts["input"] = opened.check.rows + opened.check.malformed
    batches = plan_memory(spark, cfg, opened.profile)
    with batch_settings(spark, batches, cfg.spark), stages.stage("sample", f"{size:,} documents") as counts:
        drawn = draw_sample(documents(opened.source, cfg), sign_params(cfg), size, max_bytes)
        counts.update(documents=len(drawn.texts), text_bytes=drawn.text_bytes)
    return drawn


# --- the stages -----------------------------------------------------------------------


@dataclass(frozen=True)
class _Signed:
    frame: DataFrame  # sign_documents' output, read back from _work/
    rejected: int
    signed: int  # rows with a signature (not rejected)


def _sign(r: RunContext, inp: ReadResult, fps: Fingerprints) -> tuple[_Signed, Counts]:
    r.warmed()
    keep_sigs = r.cfg.verify.method == "signature"
    signed = r.work.materialize(
        "signatures", fps.signatures, lambda: sign_documents(inp.docs, inp.params, keep_sigs)
    )
    totals = signed.agg(F.count(F.lit(1)).alias("rows"), F.count(C.REASON).alias("rejected")).first()
    assert totals is not None
    rejected = int(totals["rejected"])
    n = int(totals["rows"]) - rejected
    return _Signed(signed, rejected, n), {"rejected": rejected, "signed": n}


@dataclass(frozen=True)
class _Exact:
    members: DataFrame  # (_id, _rep, _len, _rank): every signed document
    groups: DataFrame  # (_rep, _copies): the exact groups with copies
    reps: DataFrame  # the signed rows of the exact groups' representatives
    rejected: DataFrame  # (_id, reason)
    copies: int  # exact duplicates (members that are not their group's representative)
    rejected_rows: int
    held: Held | None = None  # the representatives' ids and band keys, where on the driver
    # The members' ids and representatives, the representatives' policy keys and texts' bytes
    driver: HeldMembers | None = None


def _exact(r: RunContext, signed: _Signed) -> tuple[_Exact, Counts]:
    accepted = signed.frame.filter(F.col(C.REASON).isNull())
    rejected = r.keep(signed.frame.filter(F.col(C.REASON).isNotNull()).select(C.DOC_ID, C.REASON))
    id_field = signed.frame.schema[C.DOC_ID]
    # Few enough documents: grouped on the driver, from a collect that also brings the band
    # keys the candidates stage sorts there.
    held, driver = None, None
    if (
        broadcastable(signed.signed)
        and keys_fit_driver(signed.signed, r.cfg.bands, id_field, HELD_BYTES)
        and orders_on_driver(signed.frame, r.cfg)
    ):
        got = exact_on_driver(accepted, r.cfg)
        # Not kept: where the survivors, the guard and the write take the members the driver
        # holds, no stage reads the frame; the write's Spark path reads it once, and where
        # the survivors run in Spark, `_survivors` keeps it.
        members, groups, n_copies = got.members, r.keep(got.groups), len(got.copy_ids)
        copies = F.broadcast(ids_frame(r.spark, got.copy_ids, id_field.dataType))
        held, driver = Held(got.rep_ids, got.band_keys, got.held.rep_rows), got.held
    else:
        members = r.keep(group_exact(accepted, r.cfg))
        groups = r.keep(exact_groups(members))
        total = groups.agg(F.sum(C.COPIES)).first()
        n_copies = int(total[0] or 0) if total is not None else 0
        copies = members.filter(F.col(C.REP) != F.col(C.DOC_ID)).select(C.DOC_ID)
        if broadcastable(n_copies):
            copies = F.broadcast(copies)
    # The representatives of exact groups are what LSH bands and verification compare.
    reps = accepted.join(copies, C.DOC_ID, "left_anti")
    found = _Exact(members, groups, reps, rejected, n_copies, signed.rejected, held, driver)
    return found, {"exact_duplicates": n_copies}


@dataclass(frozen=True)
class _Edges:
    frame: DataFrame  # (src, dst[, similarity]), read back from _work/
    rows: int
    # Exact verification: the candidates' ends' (_id, _text), kept for the guard's scoring.
    texts: DataFrame | None = None


@dataclass(frozen=True)
class _Candidates(_Edges):
    # (src, dst): every star edge before a document keeps one (stages/stars.py reads them)
    star_edges: DataFrame | None = None
    stars: int = 0
    known: Counted | None = None  # the pairs of each src, where counted on the driver


def _candidates(
    r: RunContext, fps: Fingerprints, signed: _Signed, exact: _Exact
) -> tuple[_Candidates, Counts]:
    cap = r.cfg.lsh.all_pairs_up_to
    reps = signed.signed - exact.copies
    # Few enough documents: their band keys are sorted on the driver, with no shuffle.
    on_driver = exact.held is not None or (
        broadcastable(reps) and keys_fit_driver(reps, r.cfg.bands, exact.reps.schema[C.DOC_ID])
    )
    # The shuffle moves a row per representative and band.
    rows = reps * r.cfg.bands
    over = None if on_driver else split_threshold(r.spark, r.cfg.lsh.split_buckets_over, rows, floor=cap)
    # The distinct candidates, before a document's further star edges are dropped: read
    # three times while they are written, released after.
    kept: list[DataFrame] = []

    def keep(df: DataFrame) -> DataFrame:
        kept.append(r.keep(df))
        return kept[-1]

    built: list[Candidates] = []

    def build() -> Candidates:
        # Once for both results (a resumed run may need only one of them).
        if not built:
            built.append(candidate_edges(exact.reps, cap, over, keep, rows, on_driver, exact.held))
        return built[0]

    candidates = r.work.materialize("candidates", fps.candidates, lambda: build().edges)
    stars = r.work.materialize("star_edges", fps.candidates, lambda: build().stars)
    for df in kept:
        r.release(df)
    n, n_stars = candidates.count(), stars.count()
    known = built[0].known if built else None  # a resumed run read them back: not counted
    return _Candidates(candidates, n, star_edges=stars, stars=n_stars, known=known), {
        "candidate_pairs": n,
        "star_edges": n_stars,
    }


def _check_index(r: RunContext, inp: ReadResult, index: OpenIndex) -> tuple[None, Counts]:
    """The batch's ids against the index's: of the same type, and none of them indexed
    already (an indexed document is never deduplicated again, and ids name one document)."""
    id_type = next(f.dataType for f in inp.docs.schema.fields if f.name == C.DOC_ID)
    check_id_type(index.manifest, id_type.simpleString(), index.shown, f"input {r.input_path}")
    ours = inp.docs.select(C.DOC_ID)
    refuse_indexed_ids(index.docs, ours, broadcastable(inp.rows), r.input_path, index.shown)
    return None, {"index_documents": index.manifest.documents, "index_segments": len(index.manifest.segments)}


@dataclass(frozen=True)
class _Against:
    edges: _Edges  # (src, dst, _index_id) between batch representatives and indexed documents
    nodes: DataFrame  # (_id): the indexed documents among them, the only ones verification reads
    n_nodes: int
    # Their texts (exact) or signatures (signature), read once (lazily, when first scored
    # from) for verify and the guard; None with verify.method none.
    sources: DataFrame | None


def _against(
    r: RunContext, fps: Fingerprints, index: OpenIndex, exact: _Exact, n_reps: int
) -> tuple[_Against, Counts]:
    """Candidates between the batch's representatives and the indexed documents."""
    assert fps.against is not None
    rows = band_rows(exact.reps)

    def build() -> DataFrame:
        # The batch's band rows are broadcast to the scan of the index's (one per band).
        shared = r.keep(shared_index_rows(index.keys, rows, broadcastable(n_reps * r.cfg.bands)))
        n_shared = shared.count()
        return cross_edges(shared, index.docs, rows, r.cfg.lsh.all_pairs_up_to, broadcastable(n_shared))

    edges = r.work.materialize("against", fps.against, build)
    n = edges.count()
    nodes = r.keep(edges.select(F.col(C.INDEX_ID).alias(C.DOC_ID)).distinct())
    n_nodes = nodes.count()
    method = r.cfg.verify.method
    sources = None
    if method != "none":
        read = indexed_texts if method == "exact" else indexed_signatures
        # Texts on disk, as the candidates' own (_verify); signatures are small. Persisting
        # is lazy: nothing is read until verification scores from them.
        level = StorageLevel.DISK_ONLY if method == "exact" else StorageLevel.MEMORY_AND_DISK
        sources = r.keep(read(r.spark, index, nodes, broadcastable(n_nodes)), level)
    counts = {"index_candidate_pairs": n, "index_candidates": n_nodes}
    return _Against(_Edges(edges, n), nodes, n_nodes, sources), counts


@dataclass(frozen=True)
class _Scoring:
    """What verification and the guard score pairs from: the batch's texts and signed rows,
    and with --against those of the indexed documents among the candidates (and of no
    other)."""

    inp: ReadResult
    signed: _Signed
    method: str  # verify.method
    against: _Against | None

    def sources(self) -> tuple[DataFrame, DataFrame]:
        """(texts, signed rows)."""
        docs, sigs = self.inp.docs, self.signed.frame
        indexed = self.against.sources if self.against is not None else None
        if indexed is None:
            return docs, sigs
        if self.method == "exact":
            return docs.select(C.DOC_ID, C.TEXT).unionByName(indexed), sigs
        return docs, sigs.select(C.DOC_ID, C.SIG).unionByName(indexed)


def _verify(r: RunContext, fps: Fingerprints, scoring: _Scoring, candidates: _Edges) -> tuple[_Edges, Counts]:
    pairs, n = candidates.frame, candidates.rows
    if scoring.against is not None:
        pairs = pairs.unionByName(scoring.against.edges.frame.select(C.SRC, C.DST))
        n += scoring.against.edges.rows
    texts = None
    if r.cfg.verify.method == "exact":
        # Kept (lazily: a resumed verify leaves it to the guard to compute, if it scores; past
        # the broadcast bound the ends' fingerprints are collected now, stages/verify.py), on
        # disk: cached blocks in the heap leave less of it to verification's sort and to the
        # row-by-row reader and the Parquet writer of long documents, whose buffers Spark does
        # not account for (with the texts in the heap the heavy-tailed corpus of
        # tests/e2e/test_memory.py ran out of a 1 GB heap in write). Every end of a further
        # star's edge (stages/stars.py) is an end of a candidate: each member of a star keeps
        # an edge to a centre, and each centre one to a member.
        docs, _ = scoring.sources()
        end_texts = endpoint_texts(pairs, docs, broadcastable(2 * n), 2 * n, r.share)
        texts = r.keep(end_texts, StorageLevel.DISK_ONLY)
    # Pairs the candidates stage counted on the driver need no sample for their large groups.
    known = candidates.known if isinstance(candidates, _Candidates) and scoring.against is None else None
    edges = r.work.materialize("edges", fps.edges, lambda: _verified(r, scoring, pairs, n, texts, known))
    n = edges.count()
    return _Edges(edges, n, texts), {"verified_pairs": n}


def _verified(
    r: RunContext,
    scoring: _Scoring,
    pairs: DataFrame,
    n: int,
    texts: DataFrame | None,
    known: Counted | None = None,
) -> DataFrame:
    """`pairs` (at most `n`) scored, those at the threshold kept; from `texts`, the kept
    texts of the candidates' ends, where exact verification has them. `known`: the pairs'
    groups counted by the caller (the star rounds on the driver)."""
    docs, sigs = scoring.sources()
    # The group memberships and the ends: at most two per candidate (or counted).
    split = split_threshold(r.spark, r.cfg.verify.split_stars_over, 2 * n, known=known)
    return verify_pairs(
        pairs,
        sigs,
        texts if texts is not None else docs,
        scoring.inp.params,
        r.cfg.verify.method,
        r.cfg.verify_threshold,
        broadcast_ends=broadcastable(2 * n),
        split_over=split,
        known=known,
    )


def _components(r: RunContext, edges: _Edges) -> tuple[DataFrame, Counts]:
    components, stats = _labels(r, edges.frame, edges.rows)
    counts = {"components_backend": stats.get("backend"), "components_iterations": stats.get("iterations")}
    return r.keep(components), counts


def _labels(r: RunContext, edges: DataFrame, bound: int) -> tuple[DataFrame, dict[str, Any]]:
    """Connected components of (src, dst) edges, at most `bound` of them."""
    return connected_components(
        edges.select(C.SRC, C.DST),
        backend=r.cfg.components.backend,
        max_iterations=r.cfg.components.max_iterations,
        checkpoint_dir=f"{r.paths.work}/checkpoints",
        on_driver=broadcastable(bound),
    )


def _stars(
    r: RunContext,
    fps: Fingerprints,
    scoring: _Scoring,
    exact: _Exact,
    candidates: _Candidates,
    edges: _Edges,
    components: DataFrame,
) -> tuple[tuple[_Edges, DataFrame], Counts]:
    """Further centres for the star groups verification split (stages/stars.py): the
    verified edges with theirs added, and the components relabelled."""
    if r.cfg.verify.method == "none" or r.cfg.lsh.star_rounds == 0 or not candidates.stars:
        return (edges, components), {}
    stars = candidates.star_edges
    assert stars is not None
    figures: dict[str, int] = {}

    def build() -> DataFrame:
        found = further_stars(
            stars,
            components,
            verify=lambda pairs, n, known: _verified(r, scoring, pairs, n, edges.texts, known),
            components=lambda graph, n: _labels(r, graph, n)[0],
            max_rounds=r.cfg.lsh.star_rounds,
            all_up_to=r.cfg.lsh.all_pairs_up_to,
            keep=r.keep,
            # A member row per star edge and centre: at most two per star edge.
            on_driver=broadcastable(2 * candidates.stars),
            prefetch=_prefetch(r, scoring, exact, edges.texts, r.cfg.verify_threshold),
        )
        figures.update(star_rounds=found.rounds, star_pairs=found.pairs, stars_split=found.split)
        return found.edges

    more = r.work.materialize("stars", fps.stars, build)
    n = more.count()
    figures["star_verified_pairs"] = n
    if n == 0:
        return (edges, components), figures
    labels = r.keep(relabel(components, more, lambda graph: _labels(r, graph, n)[0]))
    union = edges.frame.unionByName(more)
    return (_Edges(union, edges.rows + n, edges.texts), labels), figures


def _prefetch(
    r: RunContext, scoring: _Scoring, exact: _Exact, texts: DataFrame | None, threshold: float
) -> Prefetch | None:
    """For exact verification: ids -> their texts collected on the driver, to score their
    pairs there at `threshold` (stages/driver_scoring.py), from the texts `_verified` and the
    guard score from; their bytes as they were signed: from the rows the exact stage holds
    on the driver, where it does (no job), else summed from the signed rows."""
    if r.cfg.verify.method != "exact":
        return None
    docs = texts if texts is not None else scoring.sources()[0]
    held = exact.driver
    sizes = held.text_bytes if held is not None else frame_sizes(scoring.signed.frame)
    return prefetcher(docs, scoring.inp.params, threshold, sizes)


@dataclass(frozen=True)
class _Chosen:
    frame: DataFrame  # (_id, _kept_id): every representative in a cluster
    rows: int
    largest: int  # the largest cluster, in documents (the guard's "before")
    nodes: DataFrame  # what a survivor is chosen among (_nodes), for the guard's rounds
    against: _Against | None


def _survivors(
    r: RunContext, exact: _Exact, edges: _Edges, components: DataFrame, against: _Against | None
) -> tuple[_Chosen, Counts]:
    # choose_survivors broadcasts the component nodes: at most two per verified edge.
    small = broadcastable(2 * edges.rows)
    nodes = _nodes(exact, against)
    sums_on_driver = _sums_on_driver(small, exact, components)
    if sums_on_driver and exact.driver is not None and against is None:
        ids, kept = survivors_on_driver(components, exact.driver.order)
        id_type = components.schema[C.DOC_ID].dataType
        chosen, n, largest = clustered_of_arrays(ids, kept, id_type, exact.groups)
        return _Chosen(chosen, n, largest, nodes, against), {"clustered": n}
    if exact.driver is not None:
        # The exact stage's members, from the driver, are read by the choice, the guard's
        # rounds and the write: kept (each read would otherwise turn the driver's Arrow
        # batches into rows again).
        r.keep(exact.members)
    chosen = choose_survivors(nodes, components, r.cfg, small, against is not None)
    if sums_on_driver:
        chosen, n, largest = clustered_on_driver(chosen, exact.groups)
    else:
        chosen = r.keep(chosen)
        n, largest = clustered_figures(chosen, exact.groups)
    return _Chosen(chosen, n, largest, nodes, against), {"clustered": n}


def _ranking(r: RunContext, exact: _Exact, chosen: _Chosen) -> Callable[[np.ndarray], np.ndarray]:
    """The guard's ranking of representatives by the survivor policy: by the keys the driver
    holds where it does (no --against: indexed documents are not among them), else a sort."""
    if exact.driver is not None and chosen.against is None:
        return exact.driver.order.best_first
    return lambda ids: survivor_ranking(chosen.nodes, ids, r.cfg, chosen.against is not None)


def _sums_on_driver(small: bool, exact: _Exact, clustered: DataFrame) -> bool:
    """Whether the cluster sizes' sums run on the driver: the clustered rows (`small`) and
    the exact groups (at most the copies) within the broadcast bound, ids of a driver type."""
    driver_ids = isinstance(clustered.schema[C.DOC_ID].dataType, DRIVER_ID_TYPES)
    return small and broadcastable(exact.copies) and driver_ids


def _nodes(exact: _Exact, against: _Against | None) -> DataFrame:
    """The nodes a survivor is chosen among: the exact groups' representatives, and with
    --against the indexed documents among the candidates (`_from_index`, which leads the
    survivor order; they have no length or policy column)."""
    reps = exact.members.filter(F.col(C.REP) == F.col(C.DOC_ID))
    if against is None:
        return reps
    types = {f.name: f.dataType for f in reps.schema.fields}
    # Every policy column null (ranked last), whatever the policy carries.
    indexed = against.nodes.select(
        C.DOC_ID,
        F.col(C.DOC_ID).alias(C.REP),
        *[F.lit(None).cast(t).alias(name) for name, t in types.items() if name not in (C.DOC_ID, C.REP)],
        F.lit(True).alias(C.FROM_INDEX),
    )
    return reps.withColumn(C.FROM_INDEX, F.lit(False)).unionByName(indexed)


@dataclass(frozen=True)
class _Guarded:
    frame: DataFrame  # (_id, _kept_id, similarity): every representative in a cluster
    sizes: DataFrame  # (_kept_id, _size): cluster sizes, members counted
    kept: int  # documents kept (signed ones)
    figures: dict[str, Any] = field(default_factory=dict)  # report.json's guard section


def _guard(
    r: RunContext, scoring: _Scoring, exact: _Exact, edges: _Edges, chosen: _Chosen
) -> tuple[_Guarded, Counts]:
    """The over-merge guard, on representatives only; cluster sizes are summed from them
    and the exact groups, so the members are not read here (they join once, in write)."""
    cfg = r.cfg
    against = chosen.against
    small = broadcastable(2 * edges.rows)
    small_index = against is None or broadcastable(against.n_nodes)
    started = time.time()
    stats = None
    prefer = against is not None
    # No similarities to score with; but indexed documents, never removed, still need the rounds.
    if cfg.verify.method == "none" and not prefer:
        guarded = chosen.frame.withColumn(C.SIMILARITY, F.lit(None).cast("double"))
    else:
        docs, sigs = scoring.sources()
        # Every pair the guard scores joins two documents of verified edges, whose texts
        # exact verification kept.
        texts = edges.texts if edges.texts is not None else docs

        def score(pairs: DataFrame, bound: int | None, known: Counted | None) -> DataFrame:
            # Every pair, whatever its score: threshold 0. The pairs are kept: the sample
            # that looks for large stars and the scoring both read them. The guard bounds
            # its pairs where it can (a round's, one per document it holds; the nearest
            # step's on the driver, their number), else twice the verified edges stand in.
            # They are grouped by kept document, so a star is at most the largest cluster
            # (in documents, exact copies too): spread if that is large, however few the
            # pairs (a cluster of 100,000 near copies verifies with about one edge each).
            # Where both are small, no star is worth a sampling job (on the skew
            # benchmark's corpus, about 1 s of the guard, for a star of 20,000 pairs).
            # Pairs counted on the driver need no sample: their large stars are known.
            rows = 2 * edges.rows if bound is None else bound
            largest = chosen.largest if bound is None else min(bound, chosen.largest)
            split = split_threshold(r.spark, cfg.verify.split_stars_over, rows, largest=largest, known=known)
            return verify_pairs(
                r.keep(pairs), sigs, texts, scoring.inp.params, cfg.verify.method, 0.0, small, split, known
            )

        def regroup(own_edges: DataFrame) -> DataFrame:
            found, _ = connected_components(
                own_edges,
                backend=cfg.components.backend,
                max_iterations=cfg.components.max_iterations,
                checkpoint_dir=f"{r.paths.work}/checkpoints",
                # A subset of the verified edges.
                on_driver=small,
            )
            return found

        guarded, stats = guard_clusters(
            chosen.frame,
            edges.frame,
            score=score,
            choose=lambda comps: choose_survivors(chosen.nodes, comps, cfg, small, prefer),
            components=regroup,
            keep=r.keep,
            threshold=cfg.guard_threshold,
            max_rounds=cfg.guard.max_rounds,
            pinned=against.nodes if against is not None else None,
            small_pinned=against is not None and broadcastable(against.n_nodes),
            nearest_below=cfg.verify_threshold,
            first_bound=chosen.rows,
            # The clustered documents, the verified edges and the indexed ones collected.
            on_driver=broadcastable(chosen.rows) and small and small_index,
            ranking=_ranking(r, exact, chosen),
            # Every pair, whatever its score, as `score` has them.
            prefetch=_prefetch(r, scoring, exact, edges.texts, 0.0),
        )
    # Kept before the sizes are summed from it: write reads it again. Summing fills it, so
    # the texts the rounds scored from are read no more (nor by any later stage:
    # `edges.texts` is not read after this).
    guarded = r.keep(guarded)
    clustered = guarded.select(C.DOC_ID, C.KEPT_ID)
    if _sums_on_driver(broadcastable(chosen.rows), exact, chosen.frame):
        sizes, after = sizes_on_driver(clustered, exact.groups)
        sizes = r.keep(sizes)
    else:
        sizes = r.keep(cluster_sizes(clustered, exact.groups))
        after = _size_figures(sizes)
    for scored_from in (edges.texts, against.sources if against is not None else None):
        if scored_from is not None:
            r.release(scored_from)
    kept = scoring.signed.signed - after["removed"]
    counts: Counts = {"clusters": after["clusters"], "largest_cluster": after["largest"]}
    figures: dict[str, Any] = {"enabled": False, "reason": "verify.method none keeps no similarities"}
    if stats is not None:
        counts.update(
            guard_rounds=stats.rounds,
            clusters_split=stats.clusters_split,
            documents_rehomed=stats.documents_rehomed,
        )
        figures = {
            "enabled": cfg.guard_threshold is not None,
            "threshold": cfg.guard_threshold,
            "rounds": stats.rounds,
            "failing_per_round": stats.failing_per_round,
            "scored_pairs": stats.scored_pairs,
            "clusters_split": stats.clusters_split,
            "documents_rehomed": stats.documents_rehomed,
            "released": stats.released,
            "moved_to_nearest": stats.moved_to_nearest,
            "largest_cluster_before": chosen.largest,
            "largest_cluster_after": after["largest"],
            "seconds": round(time.time() - started, 3),
        }
    return _Guarded(guarded, sizes, kept, figures), counts


def _size_figures(sizes: DataFrame) -> dict[str, int]:
    """From (_kept_id, _size): clusters with more than one document, the largest, and the
    documents removed (each cluster's size but its kept one)."""
    size = F.col("_size")
    row = sizes.agg(
        F.sum((size > 1).cast("long")).alias("clusters"),
        F.max(size).alias("largest"),
        F.sum(size - 1).alias("removed"),
    ).first()
    assert row is not None
    return {
        "clusters": int(row["clusters"] or 0),
        "largest": int(row["largest"] or 1),
        "removed": int(row["removed"] or 0),
    }


def _write(
    r: RunContext, inp: ReadResult, exact: _Exact, edges: _Edges, guarded: _Guarded, against: _Against | None
) -> tuple[Staged, Counts]:
    # What assign_members broadcasts: a row per clustered representative (at most two per
    # verified edge) and a row per cluster or exact group with removed members.
    small = broadcastable(2 * edges.rows + exact.copies)
    # The members as the exact stage collected them, where it did (and no index's documents).
    driver = exact.driver if small and against is None else None
    if driver is not None:
        assigned = assign_on_driver(driver, exact.members, guarded.frame, guarded.sizes)
    else:
        assigned = assign_members(exact.members, guarded.frame, guarded.sizes, small)
    schemas = write_outputs(
        inp.source,
        r.cfg,
        # Kept: clusters/ is written from it and kept/ takes its removed ids.
        r.keep(assigned),
        exact.rejected,
        {name: r.paths.staged(name) for name in ("clusters", "kept", "rejected")},
        writer_options(inp.batches, r.cfg.input.text_col),
        broadcast_dropped=broadcastable(inp.rows - guarded.kept),
        broadcast_rejected=broadcastable(exact.rejected_rows),
        malformed=inp.malformed,
        matched=against.nodes if against is not None else None,
        broadcast_matched=against is not None and broadcastable(against.n_nodes),
        any_rejected=exact.rejected_rows > 0,
        sorted_by_id=driver is not None,
    )
    return Staged(r.spark, r.paths, schemas), {}


@dataclass(frozen=True)
class Staged:
    """The written outputs, read back with the schemas they were written with (no job)."""

    spark: SparkSession
    paths: Paths
    schemas: dict[str, StructType]

    def read(self, name: str) -> DataFrame:
        return read_parquet(self.spark, self.paths.staged(name), self.schemas[name])


def _check(
    r: RunContext, inp: ReadResult, staged: Staged, index: OpenIndex | None
) -> tuple[dict[str, int], Counts]:
    """The outputs' own checks; returns clusters/ rows per status (for the report)."""
    c = check_outputs(
        inp.rows,
        staged.read("clusters"),
        staged.read("kept"),
        staged.read("rejected"),
        inp.malformed_rows,
        r.cfg.guard_threshold,
        index_ids=index.docs.select(C.DOC_ID) if index is not None else None,
        # clusters/ has a row per input row with an id.
        on_driver=broadcastable(inp.rows),
    )
    statuses = {
        C.STATUS_UNIQUE: c["unique"],
        C.STATUS_KEPT: c["kept"] - c["unique"],
        C.STATUS_EXACT: c["exact_duplicates"],
        C.STATUS_NEAR: c["near_duplicates"],
        C.STATUS_REJECTED: c["rejected"] - inp.malformed_rows,  # malformed lines have no row
    }
    return {k: n for k, n in statuses.items() if n}, dict(c)


_IN_CLUSTERS = (C.STATUS_KEPT, C.STATUS_EXACT, C.STATUS_NEAR)


def _gather_report(
    r: RunContext, inp: ReadResult, edges: _Edges, staged: Staged, statuses: dict[str, int]
) -> tuple[Summary, Counts]:
    summary = gather(
        staged.read("clusters"),
        edges.frame,
        inp.source,
        r.cfg.input.id_col,
        r.cfg.input.text_col,
        r.cfg.report.sample_clusters,
        r.cfg.report.seed,
        statuses,
        on_driver=broadcastable(
            sum(statuses.get(s, 0) for s in (C.STATUS_KEPT, C.STATUS_EXACT, C.STATUS_NEAR))
        ),
    )
    return summary, {}


def _render_html(report: dict[str, Any], summary: Summary) -> bytes:
    """report.html from the finished report (so its seconds and total are report.json's);
    rendering is driver-side matplotlib, about a second, after the total is taken."""
    from neardup.report.page import render  # matplotlib is imported only when a page is made

    start = time.perf_counter()
    page = render(report, summary).encode("utf-8")
    log.info("report.html: %s rendered in %.1f s", human(len(page)), time.perf_counter() - start)
    return page


# --- the report -------------------------------------------------------------------------------


def _report(
    r: RunContext, started: float, inp: ReadResult, index: OpenIndex | None, guarded: _Guarded
) -> dict[str, Any]:
    cfg, c = r.cfg, r.stages.counts
    sections: dict[str, Any] = {
        "components": {"backend": c.get("components_backend"), "iterations": c.get("components_iterations")},
        # Further centres of split star groups (stages/stars.py); null figures: resumed.
        "stars": {
            "star_edges": c.get("star_edges"),
            "rounds": c.get("star_rounds"),
            "pairs": c.get("star_pairs"),
            "verified_pairs": c.get("star_verified_pairs"),
            "still_split": c.get("stars_split"),
        },
        "bands": {"bands": cfg.bands, "rows": cfg.rows, "s_curve": s_curve(cfg.bands, cfg.rows)},
        "guard": guarded.figures,
    }
    if index is not None:
        m = index.manifest
        sections["index"] = {
            "path": index.store.path,
            "version": m.version,
            "build_id": m.build_id,
            "documents": m.documents,
            "segments": len(m.segments),
            "candidate_pairs": c.get("index_candidate_pairs"),
            "candidate_documents": c.get("index_candidates"),
            "matched": c.get("matched_index"),
        }
    return envelope(r, started, inp, "dedup", counted(c, COUNTS, _SHOWN_ELSEWHERE), sections)


def summary(output: str, report: dict[str, Any]) -> str:
    """The lines `neardup dedup` prints when it is done."""
    c = report["counts"]
    secs = report["seconds"]["total"]
    n = c["input"] or 0
    rate = n / secs if secs else 0.0
    page = " and report.html (open it in a browser)" if report["config"]["report"]["html"] else ""
    return (
        f"neardup: {n:,} documents in {secs:.1f} s ({rate:,.0f} docs/s). "
        f"Kept {c['kept']:,} ({c['unique']:,} unique, {c['clusters']:,} clusters of duplicates, "
        f"the largest {c['largest_cluster']:,}); removed {c['near_duplicates']:,} near and "
        f"{c['exact_duplicates']:,} exact duplicates"
        f"{f' ({m:,} of them in favour of indexed documents)' if (m := c.get('matched_index')) else ''}; "
        f"rejected {c['rejected']:,}"
        f"{f' ({m:,} malformed lines)' if (m := c.get('malformed')) else ''}. "
        f"Candidates {c['candidate_pairs']:,}, verified {c['verified_pairs']:,}.\n"
        f"Outputs in {output}: kept/ (the deduplicated corpus), clusters/ (every input id "
        f"with its cluster and status), rejected/, report.json{page}."
    )
