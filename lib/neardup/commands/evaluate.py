"""`neardup evaluate`: how good is a finished output?

With labels (a cluster id per document, or duplicate pairs): pair precision, recall, F1,
the adjusted Rand index, and removal precision (the share of removed documents whose
kept document is a true duplicate of them). Without labels: a seeded sample of the
removed documents, each scored by exact Jaccard against its kept document (read again
from the input), as a histogram and quantiles, and the removal precision at a minimum
similarity (the share of the sample at or above it, with its Wilson 95 % interval).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from pyspark.sql import SparkSession

from neardup import config as config_mod
from neardup.errors import UsageError
from neardup.kernels.metrics import scores, similarity_summary, wilson
from neardup.runtime.fs import FileSystem
from neardup.stages import evaluate_output as stage


def evaluate(
    spark: SparkSession,
    output: str,
    labels: str | None,
    sample: int,
    seed: int | None,
    min_similarity: float | None,
) -> dict[str, Any]:
    fs = FileSystem.for_path(spark, output)
    out = fs.qualify(output.rstrip("/"))
    if not fs.exists(f"{out}/_SUCCESS") or not fs.exists(f"{out}/report.json"):
        raise UsageError(f"{output} is not a finished neardup output (no _SUCCESS or report.json)")
    report = json.loads(fs.read_text(f"{out}/report.json"))
    cfg = config_mod.build({k: v for k, v in report["config"].items() if k != "spark"})
    pred = stage.predicted(spark, out).cache()
    result: dict[str, Any] = {"output": out, "documents": None}
    result["documents"] = pred.count()
    if labels is not None:
        id_type = pred.schema["id"].dataType
        kind, frame = stage.read_labels(spark, labels, id_type)
        pair_counts, partition_counts, (removed, ok), unknown = stage.labeled_counts(
            pred, kind, frame, f"{out}.neardup-evaluate-checkpoints"
        )
        fs.delete(f"{out}.neardup-evaluate-checkpoints")
        pair_scores, partition_scores = scores(pair_counts), scores(partition_counts)
        result |= {
            "labels": labels,
            "label_kind": kind,
            "label_ids_not_in_output": unknown,
            "pairs": {
                "true": pair_counts.true,
                "predicted": pair_counts.predicted,
                "both": pair_counts.together,
            },
            "precision": pair_scores.precision,
            "recall": pair_scores.recall,
            "f1": pair_scores.f1,
            "adjusted_rand_index": partition_scores.adjusted_rand_index,
            "removed": removed,
            "removal_precision": ok / removed if removed else 1.0,
        }
        return result
    threshold = cfg.guard_threshold if min_similarity is None else min_similarity
    if threshold is None:
        threshold = round(cfg.verify_threshold - 0.1, 6)
    if seed is None:
        seed = cfg.minhash.seed
    values, total = stage.sampled_similarities(spark, pred, cfg, report["input"], sample, seed)
    v = np.asarray(values)
    ok = int((v >= threshold).sum())
    low, high = wilson(ok, len(v))
    result |= {
        "removed": total,
        "sampled": len(v),
        "min_similarity": threshold,
        "threshold": cfg.verify_threshold,
        "removal_precision": ok / len(v) if len(v) else 1.0,
        "removal_precision_95": [round(low, 6), round(high, 6)],
        "at_or_above_threshold": float((v >= cfg.verify_threshold).mean()) if len(v) else 1.0,
        **similarity_summary(v),
    }
    return result


def as_text(r: dict[str, Any]) -> str:
    """The evaluation as a table for people."""
    lines = [f"neardup evaluate: {r['output']} ({r['documents']:,} documents, rejected ones aside)"]
    if "labels" in r:
        lines += [
            f"labels: {r['labels']} ({r['label_kind']}; {r['label_ids_not_in_output']:,} not in the output)",
            f"  pairs: {r['pairs']['true']:,} true, {r['pairs']['predicted']:,} predicted, "
            f"{r['pairs']['both']:,} both",
            f"  pair precision       {r['precision']:.4f}",
            f"  pair recall          {r['recall']:.4f}",
            f"  pair F1              {r['f1']:.4f}",
            f"  adjusted Rand index  {r['adjusted_rand_index']:.4f}",
            f"  removal precision    {r['removal_precision']:.4f} ({r['removed']:,} removed)",
        ]
        return "\n".join(lines)
    low, high = r["removal_precision_95"]
    lines += [
        f"removed documents: {r['removed']:,}; scored by exact Jaccard against their kept document: "
        f"{r['sampled']:,}",
        f"  removal precision (similarity >= {r['min_similarity']:g}): {r['removal_precision']:.4f}"
        f" (95 % interval {low:.4f}..{high:.4f})",
        f"  at or above the threshold {r['threshold']:g}: {r['at_or_above_threshold']:.4f}",
        "  quantiles: " + ", ".join(f"{q}: {v:.3f}" for q, v in r["quantiles"].items() if v is not None),
        "  similarity      documents",
    ]
    top = max((b["count"] for b in r["histogram"]), default=0)
    for b in r["histogram"]:
        if b["count"] or b["from"] >= 0.5:
            bar = "#" * (round(40 * b["count"] / top) if top else 0)
            lines.append(f"  [{b['from']:.2f}, {b['to']:.2f})  {b['count']:>8,}  {bar}")
    return "\n".join(lines)
