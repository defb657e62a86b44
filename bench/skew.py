#!/usr/bin/env python3
"""Skew benchmark: the largest task of each shuffle against the median task, and the wall time,
on a corpus with one boilerplate page copied many times and many large clusters.

    python -m bench skew [--docs 100000] [--copies N] [--clusters M] [--cluster-size 100]
                                  [--partitions 200] [--out bench/results/skew.md] [--label TEXT]

Corpora: the base corpus of e2e.py (`synth.CorpusSpec(num_docs=--docs)`, cached under --cache),
and the same with `skew.SkewSpec(copies, clusters, cluster_size)` spread through it (defaults: a
tenth as many copies of the cookie notice as base documents, one cluster of --cluster-size per
thousand). Truth: the base corpus's exact truth (e2e.py's, cached beside it) and each skew group
one component (`truth.skewed_truth`, which checks every copy's exact Jaccard to its base).

Runs, each its own process in local[--workers]:

- tasks: both corpora with spark.sql.shuffle.partitions=--partitions and AQE's coalescing of
  small partitions off (so every shuffle runs as --partitions tasks, as on a cluster where each
  partition is large; with coalescing on, a 100,000-document run's shuffles fit one task).
  From the event log's task-end events: for every Spark stage that reads shuffle data, the
  largest task's shuffle-read bytes and records against the median task's; the stage belongs
  to the neardup stage named by its job's group (runtime/jobgroups.py).
- wall: both corpora with neardup's own local settings (but input splits of 16 MB, so that
  both are read with both cores), --repeat times, alternating: the fastest wall time of the
  skewed corpus against the base corpus alone, each output's clusters scored against the exact truth
  (pairwise precision, recall, F1, adjusted Rand index), and from the event log the seconds of
  the jobs that look for large keys.

The report goes to --out (appended with --append), with the command, the commit and the machine.
"""

from __future__ import annotations

import sys
from pathlib import Path

# The corpus generator and the references live in testkit/, which the wheel does not ship.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "testkit"))

import argparse
import hashlib
import json
import os
import shutil
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from e2e import Measure, cached_truth, machine, neardup_command, output_labels, run_measured, truth_path
from eventlog import OUTSIDE, app_log, events, job_stages, shuffle_read_bytes
from neardup_testkit import skew, synth
from neardup_testkit.skew import SkewSpec
from neardup_testkit.synth import CorpusSpec
from neardup_testkit.truth import SkewTruth, ensure_corpus, score, skewed_truth

BENCH = Path(__file__).resolve().parent
# A shuffle stage that reads less than this in all is left out of the table (counts, the
# sampled heavy keys): its tasks' ratios say nothing about a straggler.
MIN_STAGE_BYTES = 1 << 20


# --------------------------------------------------------------------------- corpora


def skewed_corpus(base: CorpusSpec, spec: SkewSpec, cache: Path) -> Path:
    """The skewed corpus as one Parquet file, generated once under cache."""
    sources = Path(synth.__file__).read_bytes() + Path(skew.__file__).read_bytes()
    key = hashlib.sha256(repr((base, spec)).encode() + sources + np.__version__.encode()).hexdigest()[:12]
    path = cache / "skew" / f"{base.num_docs}d+{spec.docs}-{key}" / "corpus.parquet"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        skew.write_skewed_parquet(base, spec, tmp)
        tmp.rename(path)  # atomic: a crashed generation never looks complete
    return path


def cached_skewed_truth(path: Path, threshold: float, sample: int, base: Any) -> SkewTruth:
    saved = truth_path(path, threshold, sample)
    if saved.exists():
        z = np.load(saved)
        meta = json.loads(str(z["meta"]))
        return SkewTruth(labels=z["labels"], base=base, **meta)
    table = pq.read_table(path, columns=["text", "cluster", "target_jaccard"])
    found = skewed_truth(table, threshold, sample, base=base)
    meta = {k: v for k, v in found.__dict__.items() if k not in ("labels", "base")}
    np.savez(saved, labels=found.labels, meta=json.dumps(meta))
    return found


# --------------------------------------------------------------------------- task metrics


@dataclass
class StageTasks:
    """One Spark stage's shuffle reads, task by task."""

    neardup: str  # the neardup stage of its job
    stage_id: int
    what: str = ""  # the operators it runs after its shuffle read (Window, MapInArrow, ...)
    read_bytes: list[int] = field(default_factory=list)
    read_records: list[int] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(self.read_bytes)

    @staticmethod
    def _ratio(values: list[int]) -> float:
        median = statistics.median(values)
        return max(values) / median if median else float("inf")

    @property
    def bytes_ratio(self) -> float:
        return self._ratio(self.read_bytes)

    @property
    def records_ratio(self) -> float:
        return self._ratio(self.read_records)


def shuffle_reads(event_log: Path) -> list[StageTasks]:
    """Every Spark stage that read shuffle data, with its successful tasks' shuffle reads."""
    group_of: dict[int, str] = {}
    what: dict[int, str] = {}
    stages: dict[tuple[int, int], StageTasks] = {}
    for event in events(event_log):
        kind = event.get("Event")
        if kind == "SparkListenerStageSubmitted":
            info = event["Stage Info"]
            what[int(info["Stage ID"])] = _operators(info)
        if kind == "SparkListenerJobStart":
            stage, ids = job_stages(event)
            for sid in ids:
                group_of.setdefault(sid, stage)
        elif kind == "SparkListenerTaskEnd":
            if (event.get("Task End Reason") or {}).get("Reason") != "Success":
                continue
            read = (event.get("Task Metrics") or {}).get("Shuffle Read Metrics") or {}
            sid, attempt = int(event["Stage ID"]), int(event["Stage Attempt ID"])
            nbytes = shuffle_read_bytes(read)
            blocks = int(read.get("Remote Blocks Fetched", 0)) + int(read.get("Local Blocks Fetched", 0))
            if not blocks and not nbytes:
                continue  # a task of a stage that reads no shuffle
            tasks = stages.setdefault(
                (sid, attempt), StageTasks(group_of.get(sid, OUTSIDE), sid, what.get(sid, ""))
            )
            tasks.read_bytes.append(nbytes)
            tasks.read_records.append(int(read.get("Total Records Read", 0)))
    return [s for s in stages.values() if s.total >= MIN_STAGE_BYTES]


_PLUMBING = ("Exchange", "AdaptiveSparkPlan", "InMemoryTableScan")


def _operators(info: dict[str, Any]) -> str:
    """What a stage does, from its RDDs' SQL scopes: the named operators (a Window, the
    Python of a mapInArrow, a join), not exchanges and generated code; else its call site."""
    names = []
    for rdd in info.get("RDD Info", []):
        scope = json.loads(rdd.get("Scope") or "{}").get("name", "").split(" ")[0]
        # SQL operators are capitalized (RDD operations are not); these say nothing.
        if scope[:1].isupper() and scope not in _PLUMBING and not scope.startswith("WholeStageCodegen"):
            names.append(scope)
    site = str(info.get("Stage Name", "")).split(" at ")[0]
    found = ", ".join(sorted(set(names)))
    return found or ("" if site.startswith("$anonfun") else site)


def per_neardup_stage(stages: list[StageTasks]) -> dict[str, StageTasks]:
    """For each neardup stage, its shuffle stage whose largest task is the most records
    above its median task (the straggler)."""
    worst: dict[str, StageTasks] = {}
    for s in stages:
        if s.neardup not in worst or s.records_ratio > worst[s.neardup].records_ratio:
            worst[s.neardup] = s
    return worst


# The collects that find large keys before their shuffle (stages/skew.py's sample, and the
# exact count of the large buckets in stages/candidates.py), by their call sites.
_DETECTION = ("/stages/skew.py:", "/stages/candidates.py:")


def detection_seconds(event_log: Path) -> dict[str, float]:
    """Per neardup stage, the seconds of its Spark jobs that find large keys (from job start
    to end): what the spreading costs a run, whether or not it finds any."""
    stage_names: dict[int, str] = {}
    started: dict[int, tuple[str, int, list[int]]] = {}
    seconds: dict[str, float] = {}
    for event in events(event_log):
        kind = event.get("Event")
        if kind == "SparkListenerJobStart":
            stage, _ = job_stages(event)
            for info in event.get("Stage Infos", []):
                stage_names[int(info["Stage ID"])] = str(info.get("Stage Name", ""))
            started[int(event["Job ID"])] = (stage, int(event["Submission Time"]), event.get("Stage IDs", []))
        elif kind == "SparkListenerJobEnd" and int(event["Job ID"]) in started:
            stage, start, ids = started.pop(int(event["Job ID"]))
            names = [stage_names.get(int(i), "") for i in ids]
            if any(n.startswith("collect at") and any(d in n for d in _DETECTION) for n in names):
                seconds[stage] = seconds.get(stage, 0.0) + (int(event["Completion Time"]) - start) / 1000
    return seconds


# --------------------------------------------------------------------------- runs


@dataclass
class Run:
    corpus: str  # "skewed" or "plain"
    mode: str  # "tasks" or "wall"
    docs: int
    measure: Measure | None = None
    report: dict[str, Any] = field(default_factory=dict)
    stages: list[StageTasks] = field(default_factory=list)
    detection: dict[str, float] = field(default_factory=dict)  # seconds finding large keys
    repeats: list[float] = field(default_factory=list)  # wall seconds of every repeat
    scores: dict[str, float] = field(default_factory=dict)
    error: str | None = None


def run_neardup(
    run: Run, corpus: Path, truth_labels: np.ndarray, work: Path, args: argparse.Namespace
) -> None:
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    out = work / "out"
    logs = work / "eventlog"
    logs.mkdir()
    conf = [
        f"spark.driver.memory={args.driver_memory}",
        "spark.eventLog.enabled=true",
        f"spark.eventLog.dir={logs}",
        "spark.eventLog.compress=false",
        # Input splits of 16 MB: with Spark's 128 MB, the 155 MB base corpus is read as a
        # 128 MB and a 27 MB task, which halves its read and sign on two cores and would
        # make the comparison one of input splits, not of skew.
        "spark.sql.files.maxPartitionBytes=16m",
        *args.neardup_conf,
    ]
    if run.mode == "tasks":
        conf += [
            f"spark.sql.shuffle.partitions={args.partitions}",
            "spark.sql.adaptive.coalescePartitions.enabled=false",
        ]
    cmd = neardup_command(corpus, out, args.workers, conf, ["report.html=false"], args.neardup_set)
    run.measure = run_measured(cmd, work / "log.txt", args.timeout)
    if run.measure.timed_out or run.measure.returncode != 0:
        tail = (work / "log.txt").read_text(errors="replace").strip().splitlines()[-3:]
        run.error = f"exit {run.measure.returncode}: {' | '.join(tail)}"[-400:]
        return
    run.report = json.loads((out / "report.json").read_text())
    log = app_log(logs)
    run.detection = detection_seconds(log)
    if run.mode == "tasks":
        run.stages = shuffle_reads(log)
    s = score(output_labels(out, corpus), truth_labels)
    run.scores = {
        "precision": s.precision,
        "recall": s.recall,
        "f1": s.f1,
        "ari": s.ari,
        "clusters": s.duplicate_clusters,
        "largest": s.largest,
    }


# --------------------------------------------------------------------------- report


def _ratio(x: float) -> str:
    return "inf" if x == float("inf") else f"{x:.2f}"


def render(runs: list[Run], args: argparse.Namespace, skew_spec: SkewSpec, truth: SkewTruth) -> str:
    title = f"## {args.label}: {args.docs:,} documents + {skew_spec.docs:,} skewed"
    lines = [
        title,
        "",
        f"Skew: {skew_spec.copies:,} near-identical copies of one cookie notice and {skew_spec.clusters:,} "
        f"clusters of {skew_spec.cluster_size} near copies (`{skew_spec!r}`), spread through the base "
        f"corpus `CorpusSpec(num_docs={args.docs}, seed={args.seed})`. Truth: {truth.duplicate_clusters:,} "
        f"components of 2+ documents (largest {truth.largest:,}); every skew copy's exact Jaccard to its "
        f"base >= {truth.min_jaccard_to_base:.4f}; cross-cluster check: {truth.sample_cross_pairs} similar "
        f"pairs across planted groups among {truth.sample_docs:,} sampled documents "
        f"({truth.sample_within_pairs:,} within).",
        "",
    ]
    tasks = [r for r in runs if r.mode == "tasks" and not r.error]
    if tasks:
        names = list(dict.fromkeys(s.neardup for r in tasks for s in r.stages))
        lines += [
            f"Largest task / median task of each neardup stage's shuffle reads, "
            f"spark.sql.shuffle.partitions={args.partitions}, AQE coalescing off "
            "(for each neardup stage, its Spark stage with the largest ratio in records; the shuffle is "
            "compressed, and near copies compress well, so bytes understate them):",
            "",
            "| neardup stage | "
            + " | ".join(
                f"{r.corpus}: Spark stage | max / median bytes | max / median records | max task MB"
                for r in tasks
            )
            + " |",
            "|---|" + "---|---:|---:|---:|" * len(tasks),
        ]
        for name in names:
            cells = []
            for r in tasks:
                s = per_neardup_stage(r.stages).get(name)
                if s is None:
                    cells.append("- | - | - | -")
                    continue
                cells.append(
                    f"{s.stage_id} {s.what} | {_ratio(s.bytes_ratio)} | "
                    f"{_ratio(s.records_ratio)} | {max(s.read_bytes) / 2**20:.1f}"
                )
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        lines += [
            "",
            "Every shuffle-reading Spark stage of the skewed run (reading at least 1 MB): "
            "stage, neardup stage, tasks, MB read, max / median bytes, max / median records:",
            "",
        ]
        skewed = next((r for r in tasks if r.corpus == "skewed"), tasks[0])
        for s in sorted(skewed.stages, key=lambda s: s.stage_id):
            lines.append(
                f"- {s.stage_id} ({s.neardup}; {s.what or 'aggregation or join'}): "
                f"{len(s.read_bytes)} tasks, {s.total / 2**20:.1f} MB, "
                f"{_ratio(s.bytes_ratio)}, {_ratio(s.records_ratio)}"
            )
        lines.append("")
    lines += [
        "| run | docs | wall s | neardup total s | candidates | verified | clusters | largest "
        "| precision | recall | F1 | ARI |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in runs:
        if r.error or r.measure is None:
            lines.append(f"| {r.corpus} {r.mode} | {r.docs:,} | {r.error} |" + " |" * 9)
            continue
        c, s = r.report.get("counts", {}), r.scores
        lines.append(
            f"| {r.corpus} {r.mode} | {r.docs:,} | {r.measure.wall:.1f} | {r.report['seconds']['total']:.1f} "
            f"| {c.get('candidate_pairs', 0):,} | {c.get('verified_pairs', 0):,} | {s['clusters']:,} "
            f"| {s['largest']:,} | {s['precision']:.4f} | {s['recall']:.4f} | {s['f1']:.4f} "
            f"| {s['ari']:.4f} |"
        )
    walls = {(r.corpus, r.mode): r.measure.wall for r in runs if r.measure and not r.error}
    for mode in ("wall", "tasks"):
        if ("skewed", mode) in walls and ("plain", mode) in walls:
            ratio = walls[("skewed", mode)] / walls[("plain", mode)]
            docs = (args.docs + skew_spec.docs) / args.docs
            lines += [
                "",
                f"Wall, skewed / plain ({mode} runs): {ratio:.2f} ({docs:.2f} times the documents).",
            ]
    for r in runs:
        if len(r.repeats) > 1:
            lines += ["", f"{r.corpus} {r.mode} runs (wall s): " + ", ".join(f"{w:.1f}" for w in r.repeats)]
    for r in runs:
        if r.report and r.mode == "wall":
            secs = {k: v for k, v in r.report["seconds"].items() if k != "total"}
            found = ", ".join(f"{k} {v:.1f}" for k, v in r.detection.items()) or "none"
            lines += [
                "",
                f"{r.corpus} seconds per stage: " + ", ".join(f"{k} {v:.1f}" for k, v in secs.items()),
                f"(of which the jobs looking for large keys: {found})",
            ]
    env = machine()
    lines += [
        "",
        "Machine: " + "; ".join(f"{k} {v}" for k, v in env.items()),
        f"Load average at the end: {' / '.join(f'{x:.2f}' for x in os.getloadavg())} (a shared machine).",
        "Command: `" + " ".join(["python", "-m", "bench", "skew", *sys.argv[1:]]) + "`",
        "",
    ]
    return "\n".join(lines)


def _fastest(runs: list[Run]) -> list[Run]:
    """One run per (corpus, mode): the fastest that succeeded (else the first), with the
    walls of all in its `repeats`."""
    best: dict[tuple[str, str], Run] = {}
    walls: dict[tuple[str, str], list[float]] = {}
    for r in runs:
        key = (r.corpus, r.mode)
        if r.measure and not r.error:
            walls.setdefault(key, []).append(r.measure.wall)
        if key not in best or (
            not r.error and r.measure and (best[key].error or r.measure.wall < _wall(best[key]))
        ):
            best[key] = r
    for key, r in best.items():
        r.repeats = sorted(walls.get(key, []))
    return list(best.values())


def _wall(run: Run) -> float:
    return run.measure.wall if run.measure else float("inf")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--docs", type=int, default=100_000, help="documents of the base corpus")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--copies", type=int, help="copies of the notice (default: docs / 10)")
    p.add_argument("--clusters", type=int, help="planted clusters (default: docs / 1000)")
    p.add_argument("--cluster-size", type=int, default=100)
    p.add_argument("--partitions", type=int, default=200, help="shuffle partitions of the tasks runs")
    p.add_argument("--runs", default="skewed,plain", help="corpora: skewed, plain (the base alone)")
    p.add_argument("--modes", default="tasks,wall", help="tasks (event log), wall (neardup's settings)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--driver-memory", default="4g")
    p.add_argument("--threshold", type=float, default=0.8)
    p.add_argument("--truth-sample", type=int, default=4000)
    p.add_argument("--timeout", type=float, default=3600)
    p.add_argument("--repeat", type=int, default=1, help="wall runs of each corpus; the fastest is shown")
    p.add_argument("--cache", default="/tmp/neardup-bench")
    p.add_argument("--out", default=str(BENCH / "results" / "skew.md"))
    p.add_argument("--append", action="store_true", help="add to --out instead of replacing it")
    p.add_argument("--label", default="neardup", help="the section's title, e.g. before or after")
    p.add_argument("--neardup-conf", action="append", default=[], metavar="K=V")
    p.add_argument("--neardup-set", action="append", default=[], metavar="K=V")
    args = p.parse_args()
    cache = Path(args.cache)
    base = CorpusSpec(num_docs=args.docs, seed=args.seed)
    spec = SkewSpec(
        copies=args.docs // 10 if args.copies is None else args.copies,
        clusters=args.docs // 1000 if args.clusters is None else args.clusters,
        cluster_size=args.cluster_size,
        seed=args.seed,
    )
    t0 = time.perf_counter()
    plain, _ = ensure_corpus(base, cache, num_shards=args.workers)
    skewed = skewed_corpus(base, spec, cache)
    print(f"corpora {plain.path}, {skewed} in {time.perf_counter() - t0:.1f} s", flush=True)
    t0 = time.perf_counter()
    base_truth, _ = cached_truth(plain, args.threshold, args.truth_sample)
    truth = cached_skewed_truth(skewed, args.threshold, args.truth_sample, base_truth)
    print(
        f"truth in {time.perf_counter() - t0:.1f} s: {truth.duplicate_clusters:,} clusters, largest "
        f"{truth.largest:,}, skew copies' Jaccard to their base >= {truth.min_jaccard_to_base:.4f}",
        flush=True,
    )
    runs: list[Run] = []
    slug = "".join(c if c.isalnum() else "-" for c in args.label)
    for mode in args.modes.split(","):
        # Wall runs alternate corpora, --repeat times, and keep each corpus's fastest: the
        # least disturbed by the other work on a shared machine.
        for _ in range(args.repeat if mode == "wall" else 1):
            for name in args.runs.split(","):
                path, labels = (skewed, truth.labels) if name == "skewed" else (plain.path, base_truth.labels)
                run = Run(name, mode, args.docs + (spec.docs if name == "skewed" else 0))
                print(f"running {name} ({mode}) ...", end=" ", flush=True)
                run_neardup(run, path, labels, cache / "skew" / "runs" / slug / f"{name}-{mode}", args)
                m = run.measure
                print(
                    run.error or f"{m.wall:.1f} s, F1 {run.scores['f1']:.4f}" if m else run.error, flush=True
                )
                runs.append(run)
    runs = _fastest(runs)
    text = render(runs, args, spec, truth)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if args.append and out.exists():
        text = out.read_text().rstrip("\n") + "\n\n" + text
    out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
