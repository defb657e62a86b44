"""The deduplication pipeline, top to bottom:

    read -> sign (normalize, hash, MinHash, band keys: the one pass over the text)
         -> exact copies -> LSH candidates -> verify -> components
         -> survivors -> write -> check -> publish

Everything is written under a staging directory beside the output
(`<output>.neardup-staging`) and moved into place only after the job's own checks
pass; `_SUCCESS` is written last. A crash at any point leaves the previous output
(or none) and a staging directory, never output that looks complete.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
import uuid
from dataclasses import asdict, dataclass
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from neardup import __version__
from neardup import columns as C
from neardup.bands import s_curve
from neardup.components import connected_components
from neardup.config import Config
from neardup.errors import UsageError
from neardup.exact import group_exact
from neardup.fs import FileSystem
from neardup.invariants import check_outputs
from neardup.lsh import candidate_edges
from neardup.memory import BatchSizes, human, slot_share
from neardup.read import CORRUPT, RowCheck, check_columns, check_rows, documents, read_input
from neardup.session import heap_and_slots
from neardup.sign import SignParams, sign_documents
from neardup.sizing import (
    InputProfile,
    batch_settings,
    measured_profile,
    parquet_profile,
    plan_batches,
    writer_options,
)
from neardup.stagelog import StageLog
from neardup.survivors import select_survivors
from neardup.verify import verify_pairs
from neardup.workdir import WorkDir, fingerprint, input_fingerprint

log = logging.getLogger("neardup")

# Up to this many ids (exact copies, dropped documents) are broadcast to filter a frame
# where it is read; past it a shuffle join is cheaper than shipping the set.
_BROADCAST_ROWS = 2_000_000


@dataclass(frozen=True)
class Paths:
    output: str
    staging: str

    @property
    def work(self) -> str:
        return f"{self.staging}/_work"

    def staged(self, name: str) -> str:
        return f"{self.staging}/{name}"

    def final(self, name: str) -> str:
        return f"{self.output}/{name}"


@dataclass(frozen=True)
class Result:
    output: str
    report: dict[str, Any]


def _paths(
    spark: SparkSession, input_path: str, output: str, cfg: Config, fmt: str
) -> tuple[Paths, FileSystem]:
    fs = FileSystem.for_path(spark, output)
    out = fs.qualify(output.rstrip("/"))
    if fmt != "table":
        src = FileSystem.for_path(spark, input_path).qualify(input_path.rstrip("/"))
        if out == src or out.startswith(src + "/"):
            raise UsageError(f"output {output} is inside input {input_path}; choose another output path")
        if src.startswith(out + "/"):
            raise UsageError(f"input {input_path} is inside output {output}; --overwrite would delete it")
    if fs.exists(out) and not cfg.output.overwrite:
        raise UsageError(f"output {output} already exists; pass --overwrite to replace it")
    return Paths(output=out, staging=f"{out}.neardup-staging"), fs


def run(spark: SparkSession, cfg: Config, input_path: str, output: str) -> Result:
    """Run the whole job; returns the report also written to report.json."""
    started = time.time()
    paths, fs = _paths(spark, input_path, output, cfg, cfg.input.format)
    # A previous failed run's finished stages under _work/ are kept for reuse; the rest
    # of its staging directory is stale and goes.
    if fs.exists(paths.staging):
        for name in fs.list_names(paths.staging):
            if name != "_work":
                fs.delete(paths.staged(name))
    fs.delete(f"{paths.work}/checkpoints")
    fs.mkdirs(paths.work)
    spark.sparkContext.setCheckpointDir(f"{paths.work}/checkpoints")
    work = WorkDir(spark, fs, paths.work)
    # Each stage's Spark jobs carry its name (Spark UI, event log, the memory benchmark).
    stages = StageLog(lambda name: spark.sparkContext.setJobDescription(f"neardup: {name}"))
    params = SignParams.from_config(cfg)
    cached: list[DataFrame] = []
    settings = contextlib.ExitStack()

    def keep(df: DataFrame) -> DataFrame:
        cached.append(df.persist(StorageLevel.MEMORY_AND_DISK))
        return cached[-1]

    try:
        with stages.stage("read") as n:
            inp = read_input(spark, input_path, cfg)
            check_columns(inp, cfg)
            is_parquet = inp.format == "parquet"
            row_check = check_rows(inp, cfg, measure_text=not is_parquet)
            n["input"] = n_input = row_check.rows
            files = sorted(inp.df.inputFiles()) if inp.format != "table" else []
            batches = _size_batches(spark, cfg, inp.format, files, row_check)
            settings.enter_context(batch_settings(spark, batches, cfg.spark))
            work.writer_options = writer_options(batches, None)
            source = inp.df.drop(CORRUPT) if CORRUPT in inp.df.columns else inp.df
            keep_sigs = cfg.verify.method == "signature"
            sign_fp = fingerprint(
                {
                    "input": input_fingerprint(spark, files),
                    "table": input_path if inp.format == "table" else None,
                    "columns": [cfg.input.id_col, cfg.input.text_col],
                    "sign": asdict(params),
                    "signatures_kept": keep_sigs,
                    # Signatures carry the survivor column (_rank); candidates are drawn
                    # between the exact groups' representatives, which the policy picks.
                    "survivor": asdict(cfg.survivor),
                }
            )
            cand_fp = fingerprint({"sign": sign_fp, "all_pairs_up_to": cfg.lsh.all_pairs_up_to})
            edge_fp = fingerprint(
                {"candidates": cand_fp, "verify": asdict(cfg.verify), "t": cfg.verify_threshold}
            )
        docs = documents(source, cfg)

        with stages.stage("sign") as n:
            signed = work.materialize("signatures", sign_fp, lambda: sign_documents(docs, params, keep_sigs))
            totals = signed.agg(F.count(F.lit(1)).alias("rows"), F.count(C.REASON).alias("rejected")).first()
            assert totals is not None
            n["rejected"] = n_rejected = int(totals["rejected"])
            n["signed"] = int(totals["rows"]) - n_rejected

        with stages.stage("exact") as n:
            accepted = signed.filter(F.col(C.REASON).isNull())
            rejected = keep(signed.filter(F.col(C.REASON).isNotNull()).select(C.DOC_ID, C.REASON))
            members = keep(group_exact(accepted, cfg))
            copies = members.filter(F.col(C.REP) != F.col(C.DOC_ID)).select(C.DOC_ID)
            n["exact_duplicates"] = n_copies = copies.count()
            if n_copies <= _BROADCAST_ROWS:
                copies = F.broadcast(copies)
            # The representatives of exact groups are what LSH bands and verification compare.
            reps = accepted.join(copies, C.DOC_ID, "left_anti")

        with stages.stage("candidates") as n:
            candidates = work.materialize(
                "candidates", cand_fp, lambda: candidate_edges(reps, cfg.lsh.all_pairs_up_to)
            )
            n["candidate_pairs"] = n_candidates = candidates.count()

        with stages.stage("verify") as n:
            verified = work.materialize(
                "edges",
                edge_fp,
                lambda: verify_pairs(
                    candidates,
                    signed,
                    docs,
                    params,
                    cfg.verify.method,
                    cfg.verify_threshold,
                    broadcast_ends=2 * n_candidates <= _BROADCAST_ROWS,
                ),
            )
            n["verified_pairs"] = n_verified = verified.count()

        with stages.stage("components") as n:
            components, comp_stats = connected_components(
                verified.select(C.SRC, C.DST),
                backend=cfg.components.backend,
                max_iterations=cfg.components.max_iterations,
                checkpoint_dir=f"{paths.work}/checkpoints",
            )
            components = keep(components)
            n["components_backend"] = comp_stats.get("backend")
            n["components_iterations"] = comp_stats.get("iterations")

        with stages.stage("survivors") as n:
            small = 2 * n_verified <= _BROADCAST_ROWS  # a component's nodes are endpoints of edges
            assigned = keep(select_survivors(members, components, cfg, small))
            is_kept = F.col(C.DOC_ID) == F.col(C.KEPT_ID)
            sizes = assigned.agg(
                F.sum((is_kept & (F.col("_size") > 1)).cast("long")).alias("clusters"),
                F.max("_size").alias("largest"),
                F.sum(is_kept.cast("long")).alias("kept"),
            ).first()
            assert sizes is not None
            n["clusters"] = int(sizes["clusters"] or 0)
            n["largest_cluster"] = int(sizes["largest"] or 1)
            n_kept = int(sizes["kept"] or 0)

        with stages.stage("write"):
            options = writer_options(batches, cfg.input.text_col)
            _write_outputs(source, cfg, assigned, rejected, n_rejected, n_input - n_kept, paths, options)

        with stages.stage("check") as n:
            checked = check_outputs(
                n_input,
                spark.read.parquet(paths.staged("clusters")),
                spark.read.parquet(paths.staged("kept")),
                spark.read.parquet(paths.staged("rejected")),
            )
            n.update(checked)
    finally:
        settings.close()
        for df in cached:
            # After a JVM death this fails too; the original error is the one to report.
            with contextlib.suppress(Exception):
                df.unpersist()

    report = _report(cfg, input_path, paths.output, stages, started)
    report["memory"] = asdict(batches)
    report["resumed_stages"] = work.resumed
    _publish(fs, paths, report)
    return Result(paths.output, report)


def _write_outputs(
    source: DataFrame,
    cfg: Config,
    assigned: DataFrame,
    rejected: DataFrame,
    n_rejected: int,
    n_dropped: int,
    paths: Paths,
    block: dict[str, str],
) -> None:
    """clusters/ (sorted by id), kept/ and rejected/ (input columns unchanged) under staging,
    with the writer options `block` that bound the Parquet writer's memory."""
    id_type = next(f.dataType for f in source.schema.fields if f.name == cfg.input.id_col)
    clusters = assigned.select(
        F.col(C.DOC_ID).alias(C.ID),
        F.col(C.KEPT_ID).alias(C.CLUSTER_ID),
        (F.col(C.DOC_ID) == F.col(C.KEPT_ID)).alias(C.KEPT),
        F.col(C.STATUS),
        F.lit(None).cast("string").alias(C.REASON),
    ).unionByName(
        rejected.select(
            F.col(C.DOC_ID).alias(C.ID),
            F.lit(None).cast(id_type).alias(C.CLUSTER_ID),
            F.lit(False).alias(C.KEPT),
            F.lit(C.STATUS_REJECTED).alias(C.STATUS),
            F.col(C.REASON),
        )
    )
    clusters.orderBy(C.ID).write.mode("overwrite").options(**block).parquet(paths.staged("clusters"))

    id_col = cfg.input.id_col
    # kept/ = input minus removed minus rejected: when those ids are few enough to broadcast
    # the texts are filtered where they are read, instead of being shuffled for a join.
    dropped = (
        assigned.filter(F.col(C.DOC_ID) != F.col(C.KEPT_ID))
        .select(F.col(C.DOC_ID).alias("_drop_id"))
        .unionByName(rejected.select(F.col(C.DOC_ID).alias("_drop_id")))
    )
    if n_dropped <= _BROADCAST_ROWS:
        dropped = F.broadcast(dropped)
    kept = source.join(dropped, F.col(id_col) == F.col("_drop_id"), "left_anti")
    kept.write.mode("overwrite").options(**block).parquet(paths.staged("kept"))

    # The user's own `reason` column, if any, stays as it is; ours takes another name.
    reason_name = "neardup_reason" if C.REASON in source.columns else C.REASON
    reasons = rejected.select(F.col(C.DOC_ID).alias("_rej_id"), F.col(C.REASON).alias(reason_name))
    if n_rejected <= _BROADCAST_ROWS:
        reasons = F.broadcast(reasons)
    bad = source.join(reasons, F.col(id_col) == F.col("_rej_id")).drop("_rej_id")
    bad.write.mode("overwrite").options(**block).parquet(paths.staged("rejected"))


def _size_batches(
    spark: SparkSession, cfg: Config, fmt: str, files: list[str], checked: RowCheck
) -> BatchSizes:
    """Batch sizes from the input's bytes per row and the heap; logs both."""
    profile: InputProfile | None
    if fmt == "parquet":
        profile = parquet_profile(spark, files, cfg.input.text_col)
    else:
        profile = measured_profile(checked.rows, checked.text_bytes or 0, checked.largest_text or 0)
    sizes = plan_batches(spark, profile, cfg.batch_bytes)
    heap, slots, where = heap_and_slots(spark)
    log.info(
        "memory: %s heap %s for %d task slot(s); %s; %s",
        where,
        human(heap),
        slots,
        profile.describe() if profile else "input sizes unknown",
        sizes.describe(),
    )
    share = slot_share(heap, slots)
    if profile is not None and profile.largest_chunk and profile.largest_chunk > share // 2:
        log.warning(
            "the input's largest Parquet row group holds %s of compressed text, which the reader "
            "keeps in memory whole, against %s of heap per task slot: if the run fails for memory, "
            "give it more or rewrite the input with smaller row groups",
            human(profile.largest_chunk),
            human(share),
        )
    return sizes


def _report(cfg: Config, input_path: str, output: str, stages: StageLog, started: float) -> dict[str, Any]:
    c = stages.counts
    return {
        "neardup_version": __version__,
        "run_id": uuid.uuid4().hex,
        "input": input_path,
        "output": output,
        "config": cfg.to_dict(),
        "counts": {
            "input": c.get("input"),
            "rejected": c.get("rejected"),
            "exact_duplicates": c.get("exact_duplicates"),
            "signed": c.get("signed"),
            "candidate_pairs": c.get("candidate_pairs"),
            "verified_pairs": c.get("verified_pairs"),
            "clusters": c.get("clusters"),
            "largest_cluster": c.get("largest_cluster"),
            "near_duplicates": c.get("near_duplicates"),
            "unique": c.get("unique"),
            "kept": c.get("kept"),
        },
        "components": {
            "backend": c.get("components_backend"),
            "iterations": c.get("components_iterations"),
        },
        "seconds": {**stages.seconds, "total": round(time.time() - started, 3)},
        "bands": {"bands": cfg.bands, "rows": cfg.rows, "s_curve": s_curve(cfg.bands, cfg.rows)},
    }


def _publish(fs: FileSystem, paths: Paths, report: dict[str, Any]) -> None:
    """Move the checked staging directory into place; _SUCCESS last."""
    fs.delete(paths.work)
    fs.write_bytes(paths.staged("report.json"), (json.dumps(report, indent=2, default=str) + "\n").encode())
    fs.delete(paths.output)
    fs.rename(paths.staging, paths.output)
    fs.write_bytes(paths.final("_SUCCESS"), b"")
