#!/usr/bin/env python3
"""Memory benchmark: what neardup holds per stage on heavy-tailed text, and the heap it needs.

    .venv/bin/python -m bench memory [--driver-memory 1g]          # profile
    .venv/bin/python -m bench memory --sweep [--largest 1,10,50]   # smallest heap

Profile: runs neardup in local[2] on the heavy-tailed corpus (neardup_testkit.synth.heavy_tailed_specs:
median 10 KB, 1 % of 1-5 MB, one of 50 MB, ~1 GB), with Spark's event log and its stage
executor metrics on, and prints per neardup stage the peaks Spark recorded: JVM heap in use
(garbage included: what the collector let accumulate, not what the stage needed), execution
and storage memory, and the Python workers' resident memory (process-tree metrics).

Sweep: on a smaller corpus (the heavy-tailed body of --sweep-docs documents plus one
document of each --largest size in MB), finds by bisection the smallest spark.driver.memory
(64 MiB steps) with which the run completes, for each batch size in --batches, and fits
heap = a + b x largest document + c x batch, the rule the README states.
"""

from __future__ import annotations

import sys
from pathlib import Path

# The corpus generator and the references live in testkit/, which the wheel does not ship.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "testkit"))

import argparse
import dataclasses
import hashlib
import json
import os
import shutil
import subprocess
import time
from collections import defaultdict
from typing import Any

import numpy as np

from eventlog import OUTSIDE, app_log, events, job_stages
from neardup.runtime.memory import MiB, human
from neardup_testkit import synth

BENCH = Path(__file__).resolve().parent
PYTHON = sys.executable
METRICS = {
    "JVMHeapMemory": "JVM heap used",
    "OnHeapExecutionMemory": "execution",
    "OnHeapStorageMemory": "storage",
    "ProcessTreePythonRSSMemory": "Python workers RSS",
    "ProcessTreeJVMRSSMemory": "JVM RSS",
}


def _cached(cache: Path, name: str, specs: list[synth.CorpusSpec]) -> Path:
    source = Path(synth.__file__).read_bytes()
    key = hashlib.sha256(repr(specs).encode() + source + np.__version__.encode()).hexdigest()[:12]
    path = cache / f"{name}-{key}.parquet"
    if not path.exists():
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        path.parent.mkdir(parents=True, exist_ok=True)
        synth.write_parquet_bounded(specs, tmp)
        tmp.rename(path)
    return path


def _run(
    corpus: Path, out: Path, heap: str, extra: list[str], timeout: float
) -> subprocess.CompletedProcess[str]:
    cmd = [
        PYTHON,
        "-m",
        "neardup",
        "dedup",
        "--input",
        str(corpus),
        "--output",
        str(out),
        "--overwrite",
        "--master",
        "local[2]",
        "--conf",
        f"spark.driver.memory={heap}",
        *extra,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)


def stage_peaks(event_log: Path) -> dict[str, dict[str, int]]:
    """neardup stage -> metric -> peak, from SparkListenerStageExecutorMetrics events, with
    Spark stages mapped to neardup stages through their jobs' descriptions."""
    stage_of: dict[int, str] = {}
    peaks: dict[str, dict[str, int]] = defaultdict(dict)
    pending: list[dict[str, Any]] = []
    for event in events(event_log):
        kind = event.get("Event")
        if kind == "SparkListenerJobStart":
            name, ids = job_stages(event)
            for sid in ids:
                stage_of[sid] = name
        elif kind == "SparkListenerStageExecutorMetrics":
            pending.append(event)
    for event in pending:
        name = stage_of.get(int(event["Stage ID"]), OUTSIDE)
        for metric, value in (event.get("Executor Metrics") or {}).items():
            if metric in METRICS:
                peaks[name][metric] = max(peaks[name].get(metric, 0), int(value))
    return dict(peaks)


def profile(args: argparse.Namespace) -> str:
    specs = synth.heavy_tailed_specs(body_docs=args.body_docs, seed=11)
    t0 = time.perf_counter()
    corpus = _cached(Path(args.cache), "heavy", specs)
    print(f"corpus {corpus} ({human(corpus.stat().st_size)} on disk) in {time.perf_counter() - t0:.1f} s")
    logs = Path(args.cache) / "eventlog"
    logs.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(logs)
    logs.mkdir()
    extra = [
        "--conf", "spark.eventLog.enabled=true",
        "--conf", f"spark.eventLog.dir={logs}",
        "--conf", "spark.eventLog.logStageExecutorMetrics=true",
        "--conf", "spark.eventLog.compress=false",
        "--conf", "spark.executor.processTreeMetrics.enabled=true",
        "--conf", "spark.executor.metrics.pollingInterval=100ms",
        "--conf", "spark.executor.heartbeatInterval=1s",
    ]  # fmt: skip
    t0 = time.perf_counter()
    proc = _run(corpus, Path(args.cache) / "out-profile", args.driver_memory, extra, args.timeout)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"neardup failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    peaks = stage_peaks(app_log(logs))
    report = json.loads((Path(args.cache) / "out-profile" / "report.json").read_text())
    order = [s for s in report["seconds"] if s != "total"]
    lines = [
        f"## Memory profile: heavy-tailed corpus, local[2], spark.driver.memory={args.driver_memory}",
        "",
        f"- command: `python -m bench memory --driver-memory {args.driver_memory}`",
        f"- corpus: {report['counts']['input']:,} documents, "
        f"`synth.heavy_tailed_specs(body_docs={args.body_docs}, seed=11)`, "
        f"{human(corpus.stat().st_size)} of Parquet",
        f"- wall {wall:.1f} s; batches: {json.dumps(report.get('memory'))}",
        "",
        "| stage | seconds | " + " | ".join(METRICS.values()) + " |",
        "|---|---:|" + "---:|" * len(METRICS),
    ]
    for stage in [*order, *(s for s in peaks if s not in order)]:
        p = peaks.get(stage, {})
        secs = report["seconds"].get(stage)
        cells = [human(p[m]) if m in p else "" for m in METRICS]
        lines.append(f"| {stage} | {secs if secs is not None else ''} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "JVM heap used includes garbage the collector had not yet reclaimed: the parallel collector",
        "lets the heap fill before it collects, so this peak tracks the heap size, not the need.",
        "The heap a run needs is measured by `--sweep` instead.",
    ]
    return "\n".join(lines)


@dataclasses.dataclass
class Point:
    largest_mb: int
    batch_mb: int
    heap_mb: int | None


def _smallest_heap(corpus: Path, batch_mb: int, args: argparse.Namespace) -> int | None:
    lo, hi = args.min_heap_mb, args.max_heap_mb  # lo may fail, hi must pass
    work = Path(args.cache) / "out-sweep"
    if _run(corpus, work, f"{hi}m", ["--set", f"memory.batch_size={batch_mb}m"], args.timeout).returncode:
        return None
    while hi - lo > 64:
        mid = (lo + hi) // 2 // 64 * 64
        if mid <= lo:
            break
        ok = _run(corpus, work, f"{mid}m", ["--set", f"memory.batch_size={batch_mb}m"], args.timeout)
        verdict = "ok" if ok.returncode == 0 else "fails"
        print(f"  {corpus.stem}, batch {batch_mb} MB, heap {mid} MB: {verdict}", flush=True)
        if ok.returncode == 0:
            hi = mid
        else:
            lo = mid
    return hi


def sweep(args: argparse.Namespace) -> str:
    points: list[Point] = []
    for largest in [int(x) for x in args.largest.split(",")]:
        body = synth.heavy_tailed_specs(body_docs=args.sweep_docs, seed=5)[0]
        one = dataclasses.replace(
            synth.heavy_tailed_specs(body_docs=1, seed=6)[2],
            mean_chars=largest * MiB,
            min_chars=largest * MiB,
            max_chars=largest * MiB,
        )
        corpus = _cached(Path(args.cache), f"sweep-{largest}mb", [body, one])
        for batch in [int(x) for x in args.batches.split(",")]:
            heap = _smallest_heap(corpus, batch, args)
            print(f"largest document {largest} MB, batch {batch} MB: smallest heap {heap} MB", flush=True)
            points.append(Point(largest, batch, heap))
    ok = [p for p in points if p.heap_mb is not None]
    lines = [
        "## Smallest heap that completes, local[2] (two task slots share it)",
        "",
        f"- command: `python -m bench memory --sweep --largest {args.largest} --batches {args.batches}`",
        f"- corpus: {args.sweep_docs:,} heavy-tailed body documents (median 10 KB) "
        "plus one document of the size shown",
        "",
        "| largest document MB | batch MB | smallest spark.driver.memory MB |",
        "|---:|---:|---:|",
        *(f"| {p.largest_mb} | {p.batch_mb} | {p.heap_mb or f'over {args.max_heap_mb}'} |" for p in points),
    ]
    if len(ok) >= 3:
        design = np.array([[1.0, p.largest_mb, p.batch_mb] for p in ok])
        target = np.array([float(p.heap_mb or 0) for p in ok])
        coef, *_ = np.linalg.lstsq(design, target, rcond=None)
        worst = float(np.max(np.abs(design @ coef - target)))
        lines += [
            "",
            f"Least-squares fit: heap MB = {coef[0]:.0f} + {coef[1]:.2f} x largest document MB "
            f"+ {coef[2]:.2f} x batch MB (largest residual {worst:.0f} MB; bisection step 64 MB).",
        ]
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cache", default="/tmp/neardup-bench/memory")
    p.add_argument("--driver-memory", default="1g")
    p.add_argument("--body-docs", type=int, default=22_000)
    p.add_argument("--sweep", action="store_true")
    p.add_argument("--sweep-docs", type=int, default=4_000)
    p.add_argument("--largest", default="1,10,50,100", help="MB, comma-separated")
    p.add_argument("--batches", default="2,8,16", help="MB, comma-separated")
    p.add_argument("--min-heap-mb", type=int, default=512)
    p.add_argument("--max-heap-mb", type=int, default=4096)
    p.add_argument("--timeout", type=float, default=1800)
    p.add_argument(
        "--out", help="Markdown file (default: bench/results/memory-profile.md or memory-sweep.md)"
    )
    args = p.parse_args()
    text = sweep(args) if args.sweep else profile(args)
    text += "\n\n" + _provenance()
    out = Path(args.out or BENCH / "results" / f"memory-{'sweep' if args.sweep else 'profile'}.md")
    out.write_text(text + "\n")
    print(text)


def _provenance() -> str:
    commit = subprocess.run(
        ["git", "-C", str(BENCH), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    import platform

    return (
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, "
        f"{human(os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES'))}; "
        f"Python {platform.python_version()}; "
        f"commit {commit or '?'} (plus uncommitted changes, if any); {time.strftime('%Y-%m-%d')}."
    )


if __name__ == "__main__":
    main()
