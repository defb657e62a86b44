"""`neardup decontaminate`: remove the corpus documents that contain evaluation data.

    reference (read, checked, sized, broadcast) -> read (the corpus, as dedup reads and
    checks it) -> match (one narrow pass over the corpus) -> write -> check -> publish

A document is removed when it shares a run of `decontaminate.ngram` words with a
reference item, or is a near-duplicate of one (kernels/contamination.py); matches/ says which
item and why. The run is dedup's around its own stages: the same reading, batch sizing,
staging directory, stage log and job groups, resumable match results under `_work/`, the
job's own checks on what was written, and atomic publication (harness.py).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

from pyspark.broadcast import Broadcast
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from neardup import columns as C
from neardup.config import Config
from neardup.harness import (
    Counts,
    ReadResult,
    Result,
    RunContext,
    broadcastable,
    claimed_output,
    counted,
    envelope,
    opened_run,
    publish,
    read_stage,
)
from neardup.kernels.contamination import REASON_NEAR, REASON_NGRAM, REF, DeconParams
from neardup.runtime.interrupts import held as held_interrupts
from neardup.runtime.jobgroups import count
from neardup.runtime.sizing import writer_options
from neardup.runtime.workdir import fingerprint, input_fingerprint
from neardup.stages.decon_check import check_decontaminated
from neardup.stages.decon_match import match_documents
from neardup.stages.decon_reference import ReferenceSet, load_reference
from neardup.stages.decon_write import OUTPUTS, Broadcasts, write_decontaminated
from neardup.stages.sign import sign_params


def decon_params(cfg: Config) -> DeconParams:
    d = cfg.decontaminate
    return DeconParams(
        sign=sign_params(cfg),
        ngram=d.ngram if d.ngram_matching else 0,
        threshold=cfg.decontaminate_threshold,
        verify=d.verify,
    )


def run(spark: SparkSession, cfg: Config, input_path: str, reference_path: str, output: str) -> Result:
    """Decontaminate `input_path` against `reference_path` into `output`; returns the report
    also written to report.json. The reference, like the input, must not overlap the output
    (harness.claimed_output): --overwrite replaces the output."""
    started = time.time()
    params = decon_params(cfg)
    with claimed_output(spark, cfg, input_path, output, {"reference": reference_path}) as claim:
        with opened_run(spark, cfg, input_path, claim) as r:
            # The reference first: a reference that is too large or malformed stops the run
            # before the corpus is read.
            ref = r.stage("reference", reference_path, _reference, reference_path, params)
            inp = r.stage("read", input_path, read_stage)
            n = count(inp.rows - inp.malformed_rows, "documents")
            found = r.stage("match", n, _match, inp, ref, params)
            r.stage("write", count(found.removed, "removed"), _write, inp, ref, found)
            r.stage("check", count(inp.rows, "rows"), _check, inp)
        report = _report(r, started, inp, reference_path, ref, params)
        with held_interrupts():  # exit 130 means nothing was published
            publish(r.fs, r.paths, report, {})
    return Result(r.paths.output, report)


def _reference(r: RunContext, path: str, params: DeconParams) -> tuple[_Loaded, Counts]:
    ref = load_reference(r.spark, r.cfg, path, params)
    payload = r.share(ref.payload)
    loaded = _Loaded(ref, r.keep(ref.ids), payload)
    return loaded, {
        "reference_items": ref.items,
        "reference_empty": ref.empty,
        "reference_ngrams": ref.ngrams,
        "reference_text_bytes": ref.text_bytes,
        "broadcast_bytes": len(ref.payload),
    }


@dataclass(frozen=True)
class _Loaded:
    ref: ReferenceSet
    ids: DataFrame  # (_ref, reference_id), kept in memory
    payload: Broadcast[bytes]


@dataclass(frozen=True)
class _Found:
    frame: DataFrame  # match_documents' rows, read back from _work/
    removed: int  # documents with a match
    rejected: int


def _match(r: RunContext, inp: ReadResult, loaded: _Loaded, params: DeconParams) -> tuple[_Found, Counts]:
    fp = fingerprint(
        {
            "input": inp.files,
            "table": inp.table,
            "columns": [r.cfg.input.id_col, r.cfg.input.text_col],
            "reference": input_fingerprint(r.spark, loaded.ref.files),
            "reference_columns": r.cfg.decontaminate.reference_columns(r.cfg.input),
            "payload": loaded.ref.key,
            "params": asdict(params),
        }
    )
    found = r.work.materialize(
        "matches", fp, lambda: match_documents(inp.docs, params, loaded.payload, loaded.ref.key)
    )
    matched = F.col(REF).isNotNull()
    row = found.agg(
        F.countDistinct(F.when(matched, F.col(C.DOC_ID))).alias("removed"),
        F.count(F.when(~matched, 1)).alias("rejected"),
        F.countDistinct(F.when(F.col(C.REASON) == REASON_NEAR, F.col(C.DOC_ID))).alias("near_duplicate"),
        F.countDistinct(F.when(F.col(C.REASON) == REASON_NGRAM, F.col(C.DOC_ID))).alias("ngram"),
        F.countDistinct(F.when(matched, F.col(REF))).alias("reference_items_matched"),
    ).first()
    assert row is not None
    counts = {k: int(row[k] or 0) for k in row.asDict()}
    return _Found(found, counts["removed"], counts["rejected"]), counts


def _write(r: RunContext, inp: ReadResult, loaded: _Loaded, found: _Found) -> tuple[None, Counts]:
    write_decontaminated(
        inp.source,
        r.cfg,
        found.frame,
        loaded.ids,
        {name: r.paths.staged(name) for name in OUTPUTS},
        writer_options(inp.batches, r.cfg.input.text_col),
        Broadcasts(
            removed=broadcastable(found.removed),
            dropped=broadcastable(found.removed + found.rejected),
            rejected=broadcastable(found.rejected),
        ),
        malformed=inp.malformed,
    )
    return None, {}


def _check(r: RunContext, inp: ReadResult) -> tuple[None, Counts]:
    read = r.spark.read.parquet
    staged = r.paths.staged
    counts = check_decontaminated(
        inp.rows,
        r.cfg.input.id_col,
        read(staged("kept")),
        read(staged("removed")),
        read(staged("rejected")),
        read(staged("matches")),
        r.cfg.decontaminate_threshold,
        inp.malformed_rows,
    )
    return None, dict(counts)


# report.json's counts, in order; those of the other sections are named in _SHOWN_ELSEWHERE,
# and any other count a stage makes is added after these (harness.counted).
COUNTS = ("input", "malformed", "rejected", "removed", "kept", "matches", "reference_items_matched")
_SHOWN_ELSEWHERE = (
    "near_duplicate",
    "ngram",
    "reference_items",
    "reference_empty",
    "reference_text_bytes",
    "reference_ngrams",
    "broadcast_bytes",
)


def _report(
    r: RunContext, started: float, inp: ReadResult, reference_path: str, loaded: _Loaded, params: DeconParams
) -> dict[str, Any]:
    c = r.stages.counts
    sections = {
        "parameters": {
            "ngram": params.ngram or None,
            "near_duplicate_threshold": params.threshold,
            "verify": params.verify if params.threshold is not None else None,
            "bands": r.cfg.bands,
            "rows": r.cfg.rows,
            "ngram_reported": "the first shared n-gram in the document's order, per reference item",
        },
        "removed_by_reason": {REASON_NEAR: c.get("near_duplicate"), REASON_NGRAM: c.get("ngram")},
        "reference": {
            "path": reference_path,
            "items": c.get("reference_items"),
            "empty": c.get("reference_empty"),
            "text_bytes": c.get("reference_text_bytes"),
            "ngrams": c.get("reference_ngrams"),
            "broadcast_bytes": c.get("broadcast_bytes"),
            "files": len(loaded.ref.files),
        },
    }
    return envelope(r, started, inp, "decontaminate", counted(c, COUNTS, _SHOWN_ELSEWHERE), sections)


def summary(output: str, report: dict[str, Any]) -> str:
    c, why, p = report["counts"], report["removed_by_reason"], report["parameters"]
    secs = report["seconds"]["total"]
    n = c["input"] or 0
    reasons = []
    if p["ngram"]:
        reasons.append(f"{why[REASON_NGRAM]:,} sharing {p['ngram']} words in a row with a reference item")
    if p["near_duplicate_threshold"] is not None:
        reasons.append(f"{why[REASON_NEAR]:,} near-duplicates of one")
    both = " (a document can be both)" if len(reasons) == 2 else ""
    return (
        f"neardup: {n:,} documents against {report['reference']['items']:,} reference items in "
        f"{secs:.1f} s. Removed {c['removed']:,}: {', '.join(reasons)}{both}; "
        f"{c['reference_items_matched']:,} reference items matched. Kept {c['kept']:,}; rejected "
        f"{c['rejected']:,}.\n"
        f"Outputs in {output}: kept/ (the decontaminated corpus), removed/, matches/ (which "
        "reference item each removed document matched, and why), rejected/, report.json."
    )
