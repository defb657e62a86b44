#!/usr/bin/env python3
"""Scale benchmark: neardup at 100,000, 1,000,000 and 10,000,000 documents, measured from
Spark's own task metrics, and a cost model for a billion documents.

    python -m bench scale [--docs 100000,1000000,10000000] [--out bench/results/scale.md]
                                   [--nodes 10,50] [--cores 16] [--efficiency 0.6]
    python -m bench scale --render [--reread]  # the reports again from scale.json
                                                        # (and the event logs left in --cache)

For each size: the `synth` corpus of e2e.py (the same generator and cache, so 10,000,000
documents are ten times the 1,000,000 of the same distribution), made without the shard
copies the peers read; then `neardup dedup` with its defaults in local[--workers],
spark.driver.memory=--driver-memory, in its own process, with Spark's event log on. Every
run and every corpus generation holds the lock file --lock (`flock`), so that no two
benchmarks on the shared machine overlap; the time spent waiting for it is reported.
A run's kept/ and clusters/ are deleted once read (report.json and the event log stay);
before a run the free space must be 2.6 times the corpus (kept/ about as large as the
input, the shuffle files and staging the rest), or it stops saying so.

From the event log, per neardup stage (the job group of its Spark jobs) and in total: task
seconds (executor run time: a task's wall time in its slot, the Python worker's work
included, since the task thread waits on it), JVM CPU seconds (executorCpuTime: the task
threads only, not the Python workers), GC, shuffle bytes and records written and read,
input and output bytes, memory and disk bytes spilled, the largest task's peak execution
memory, tasks, failed tasks and stage attempts after the first (retries); and from the
stage executor metrics (in local mode the driver is the executor) the peaks of the JVM heap
in use, of the JVM's and the Python workers' resident memory. From report.json, each
stage's wall seconds and counts; from the process tree, wall and CPU seconds (Python
workers included) and peak RSS. Where a truth e2e.py computed is cached beside the corpus,
the clusters are scored against it (never computed here: at 10,000,000 documents it
would not fit).

Figures go to --json (every size measured so far, with its command, the commit of the
neardup measured and the machine; a run of one size replaces that size's entry), then
--out (the tables per size) and --readme-out (the README's text: the 10,000,000-document
figure and the projection to a billion documents on --nodes x --cores).
"""

from __future__ import annotations

import sys
from pathlib import Path

# The corpus generator lives in testkit/, which the wheel does not ship.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "testkit"))

import argparse
import contextlib
import fcntl
import json
import math
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np

import neardup
from e2e import CORPORA, machine, neardup_command, output_labels, run_measured, truth_path
from eventlog import OUTSIDE, app_log, events, job_stages, shuffle_read_bytes, spark_properties, stage_starts
from neardup.harness import BROADCAST_ROWS
from neardup_testkit.synth import CorpusSpec
from neardup_testkit.truth import Truth, ensure_corpus, score

BENCH = Path(__file__).resolve().parent
MB = 2**20
BILLION = 1_000_000_000
# The free space a run needs, as a multiple of its corpus's bytes (see the docstring).
DISK_FACTOR = 2.6
# Spark settings that make the event log hold what is read here; none changes the plan.
EVENT_LOG_CONF = [
    "spark.eventLog.enabled=true",
    "spark.eventLog.compress=false",
    "spark.eventLog.logStageExecutorMetrics=true",
    "spark.executor.processTreeMetrics.enabled=true",
    "spark.executor.metrics.pollingInterval=500ms",
]
STARTUP = "start-up"  # the time before a run's first Spark job
# The Spark settings of a run that its figures depend on, recorded from its event log.
SPARK_CONF_SHOWN = (
    "spark.master",
    "spark.driver.memory",
    "spark.sql.shuffle.partitions",
    "spark.sql.files.maxPartitionBytes",
    "spark.sql.adaptive.enabled",
    "spark.sql.adaptive.coalescePartitions.enabled",
    "spark.sql.autoBroadcastJoinThreshold",
)
# StageFigures field <- the executor metric whose peak it holds.
EXECUTOR_METRICS = [
    ("jvm_heap", "JVMHeapMemory"),
    ("execution_memory", "OnHeapExecutionMemory"),
    ("storage_memory", "OnHeapStorageMemory"),
    ("jvm_offheap", "JVMOffHeapMemory"),
    ("direct_pool", "DirectPoolMemory"),
    ("jvm_rss", "ProcessTreeJVMRSSMemory"),
    ("python_rss", "ProcessTreePythonRSSMemory"),
]


# --------------------------------------------------------------------------- the event log


@dataclass
class StageFigures:
    """One neardup stage's Spark work (or the run's, summed), from task-end events."""

    spark_stages: int = 0
    tasks: int = 0
    failed_tasks: int = 0
    retried_stages: int = 0  # stage attempts after the first
    run_s: float = 0.0  # executor run time: task wall seconds in their slots
    cpu_s: float = 0.0  # executor CPU time: the task threads' CPU (not the Python workers')
    gc_s: float = 0.0
    input_bytes: int = 0
    output_bytes: int = 0
    shuffle_write_bytes: int = 0
    shuffle_write_records: int = 0
    shuffle_read_bytes: int = 0
    shuffle_read_records: int = 0
    memory_spilled: int = 0
    disk_spilled: int = 0
    peak_execution: int = 0  # max over tasks of peakExecutionMemory
    largest_task_read: int = 0  # max over tasks of shuffle bytes read
    largest_stage_read: int = 0  # max over its Spark stages of the shuffle bytes read
    # Peaks of the stage executor metrics (in local mode the driver's JVM): the heap in use, its
    # execution and storage pools, the JVM's memory outside the heap (metaspace, code) and its
    # NIO direct buffers, the JVM's and the Python workers' resident memory.
    jvm_heap: int = 0
    execution_memory: int = 0
    storage_memory: int = 0
    jvm_offheap: int = 0
    direct_pool: int = 0
    jvm_rss: int = 0
    python_rss: int = 0

    def add(self, other: StageFigures) -> None:
        for f in fields(self):
            a, b = getattr(self, f.name), getattr(other, f.name)
            setattr(self, f.name, max(a, b) if f.name in _PEAKS else a + b)


# The fields that are maxima (the rest are sums) when stages are added up.
_PEAKS = {"peak_execution", "largest_task_read", "largest_stage_read", *(k for k, _ in EXECUTOR_METRICS)}


def stage_figures(event_log: Path) -> dict[str, StageFigures]:
    """neardup stage -> its figures, in the order the stages first ran."""
    owner: dict[int, str] = {}
    figures: dict[str, StageFigures] = {}
    stage_read: dict[int, int] = {}
    seen: set[int] = set()

    def of(sid: int) -> StageFigures:
        return figures.setdefault(owner.get(sid, OUTSIDE), StageFigures())

    for event in events(event_log):
        kind = event.get("Event")
        if kind == "SparkListenerJobStart":
            name, ids = job_stages(event)
            for sid in ids:
                owner.setdefault(sid, name)
        elif kind == "SparkListenerStageSubmitted":
            info = event["Stage Info"]
            sid = int(info["Stage ID"])
            if int(info.get("Stage Attempt ID", 0)) > 0:
                of(sid).retried_stages += 1
            elif sid not in seen:
                seen.add(sid)
                of(sid).spark_stages += 1
        elif kind == "SparkListenerTaskEnd":
            sid = int(event["Stage ID"])
            f = of(sid)
            f.tasks += 1
            if (event.get("Task End Reason") or {}).get("Reason") != "Success":
                f.failed_tasks += 1
            m = event.get("Task Metrics") or {}
            read = m.get("Shuffle Read Metrics") or {}
            write = m.get("Shuffle Write Metrics") or {}
            f.run_s += int(m.get("Executor Run Time", 0)) / 1e3
            f.cpu_s += int(m.get("Executor CPU Time", 0)) / 1e9
            f.gc_s += int(m.get("JVM GC Time", 0)) / 1e3
            f.input_bytes += int((m.get("Input Metrics") or {}).get("Bytes Read", 0))
            f.output_bytes += int((m.get("Output Metrics") or {}).get("Bytes Written", 0))
            f.shuffle_write_bytes += int(write.get("Shuffle Bytes Written", 0))
            f.shuffle_write_records += int(write.get("Shuffle Records Written", 0))
            nbytes = shuffle_read_bytes(read)
            f.shuffle_read_bytes += nbytes
            f.shuffle_read_records += int(read.get("Total Records Read", 0))
            f.memory_spilled += int(m.get("Memory Bytes Spilled", 0))
            f.disk_spilled += int(m.get("Disk Bytes Spilled", 0))
            f.peak_execution = max(f.peak_execution, int(m.get("Peak Execution Memory", 0)))
            f.largest_task_read = max(f.largest_task_read, nbytes)
            stage_read[sid] = stage_read.get(sid, 0) + nbytes
        elif kind == "SparkListenerStageExecutorMetrics":
            f = of(int(event["Stage ID"]))
            peaks = event.get("Executor Metrics") or {}
            for key, metric in EXECUTOR_METRICS:
                setattr(f, key, max(getattr(f, key), int(peaks.get(metric, 0))))
    for sid, nbytes in stage_read.items():
        f = of(sid)
        f.largest_stage_read = max(f.largest_stage_read, nbytes)
    return figures


def cpu_by_stage(samples: list[tuple[float, float]], starts: dict[str, float]) -> dict[str, float]:
    """The process tree's CPU seconds from each stage's start to the next's (the last: to the
    end of the run), and STARTUP before the first stage (JVM and interpreter start, imports)."""
    if len(samples) < 2 or not starts:
        return {}
    times, cpu = (np.array(x) for x in zip(*samples, strict=True))
    bounds = [float(times[0]), *starts.values(), float(times[-1])]
    spent = np.diff(np.interp(bounds, times, cpu))
    return {name: float(x) for name, x in zip([STARTUP, *starts], spent, strict=True)}


def total(figures: dict[str, StageFigures]) -> StageFigures:
    out = StageFigures()
    for f in figures.values():
        out.add(f)
    return out


# --------------------------------------------------------------------------- runs


@dataclass
class SizeRun:
    docs: int
    corpus: str = ""
    corpus_bytes: int = 0
    command: str = ""  # what reproduces this entry
    neardup: str = ""  # the package measured: its directory and commit
    driver_memory: str = ""
    machine: dict[str, str] = field(default_factory=dict)
    load_start: list[float] = field(default_factory=list)
    load_end: list[float] = field(default_factory=list)
    lock_wait_s: float = 0.0
    measure: dict[str, Any] = field(default_factory=dict)  # e2e.Measure as a dict
    report: dict[str, Any] = field(default_factory=dict)  # report.json without config and bands
    stages: dict[str, dict[str, Any]] = field(default_factory=dict)  # StageFigures as dicts
    # Process-tree CPU seconds (Python workers and driver included) between one neardup stage's
    # first Spark job and the next's; STARTUP before the first.
    stage_cpu: dict[str, float] = field(default_factory=dict)
    disk_peak_bytes: int = 0  # the most disk the run took at once (free space before - least free)
    spark_conf: dict[str, str] = field(default_factory=dict)  # SPARK_CONF_SHOWN, as the run had them
    local_peak_bytes: int = 0  # the most under spark.local.dir at once (shuffle, spill, disk blocks)
    scores: dict[str, float] = field(default_factory=dict)
    scored: str = ""  # against what, or why not
    error: str = ""
    # The runs of this size it replaced, in brief: on a shared machine a run disturbed by other
    # work is rerun, and the figures it replaced stay on record.
    earlier: list[dict[str, Any]] = field(default_factory=list)

    def brief(self) -> dict[str, Any]:
        return {
            "date": self.machine.get("date", ""),
            "wall": self.measure.get("wall"),
            "cpu": self.measure.get("cpu"),
            "load_start": self.load_start,
            "load_end": self.load_end,
            "neardup": self.neardup,
            "error": self.error,
        }

    def figures(self) -> dict[str, StageFigures]:
        return {k: StageFigures(**v) for k, v in self.stages.items()}

    def wall(self) -> float:
        return float(self.measure.get("wall", 0.0))


class DiskWatch:
    """Disk taken during a run, polled every second in a thread. `peak`: the most of the file
    system taken at once (Spark's scratch, neardup's staging and outputs; other work on the
    machine included). `local_peak`: the most under Spark's local directory (shuffle files,
    spills, blocks cached on disk): what each node of a cluster needs for its share."""

    def __init__(self, where: Path, local_dir: Path) -> None:
        self.where, self.local_dir, self.peak, self.local_peak = where, local_dir, 0, 0
        self._start = shutil.disk_usage(where).free
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self._stop.wait(1.0):
            self.peak = max(self.peak, self._start - shutil.disk_usage(self.where).free)
            self.local_peak = max(self.local_peak, _tree_bytes(self.local_dir))

    def __enter__(self) -> DiskWatch:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


def _tree_bytes(root: Path) -> int:
    total = 0
    for dirpath, _, files in os.walk(root):
        for name in files:
            with contextlib.suppress(OSError):  # a shuffle file removed while we look
                total += os.stat(os.path.join(dirpath, name)).st_size
    return total


@contextlib.contextmanager
def locked(lock: Path) -> Iterator[float]:
    """Hold `lock` (flock, as `flock FILE command` does) while the body runs; yields the
    seconds spent waiting for it."""
    t0 = time.perf_counter()
    with open(lock, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield time.perf_counter() - t0
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def measured_package() -> str:
    """The neardup package this interpreter imports (PYTHONPATH decides), with its commit."""
    where = Path(neardup.__file__).resolve().parent

    def git(*words: str) -> str:
        return subprocess.run(
            ["git", "-C", str(where), *words], capture_output=True, text=True, check=False
        ).stdout.strip()

    commit, dirty = git("rev-parse", "--short", "HEAD"), git("status", "--porcelain", "--", ".")
    return f"{where} at commit {commit or '?'}{' (with uncommitted changes)' if dirty else ''}"


def _score(run: SizeRun, out: Path, corpus: Path, args: argparse.Namespace) -> None:
    saved = truth_path(corpus, args.threshold, args.truth_sample)
    if not saved.exists():
        run.scored = "not scored: no cached exact truth for this corpus (e2e.py computes it; not done here)"
        return
    z = np.load(saved)
    truth = Truth(labels=z["labels"], **json.loads(str(z["meta"])))
    s = score(output_labels(out, corpus), truth.labels)
    run.scores = {"precision": s.precision, "recall": s.recall, "f1": s.f1, "ari": s.ari}
    run.scored = f"scored against e2e.py's cached exact truth ({saved.name}: {truth.true_pairs:,} true pairs)"


def run_size(docs: int, args: argparse.Namespace) -> SizeRun:
    """One size, corpus and run, holding the benchmark lock throughout (a lock taken twice
    lets another benchmark in between)."""
    run = SizeRun(docs, neardup=measured_package(), driver_memory=args.driver_memory)
    run.command = " ".join(["python", "-m", "bench", "scale", *sys.argv[1:]])
    print(f"{docs:,}: waiting for the lock {args.lock} ...", flush=True)
    with locked(args.lock) as waited:
        run.lock_wait_s = waited
        return _run_size(run, args)


def _run_size(run: SizeRun, args: argparse.Namespace) -> SizeRun:
    run.machine = machine()
    spec = CorpusSpec(num_docs=run.docs, seed=args.seed, **CORPORA["synth"])
    t0 = time.perf_counter()
    corpus, reused = ensure_corpus(spec, Path(args.cache), num_shards=0)
    print(
        f"{run.docs:,}: corpus {corpus.path} ({'reused' if reused else 'generated'} in "
        f"{time.perf_counter() - t0:.0f} s, after {run.lock_wait_s:.0f} s waiting for the lock)",
        flush=True,
    )
    run.corpus, run.corpus_bytes = str(corpus.path), corpus.path.stat().st_size
    work = work_of(corpus.path)
    # The previous run's files (deleted below) count as free: the check comes first, so that a
    # run refused for space leaves the previous one's event log.
    free = shutil.disk_usage(corpus.path.parent).free + (_tree_bytes(work) if work.exists() else 0)
    need = DISK_FACTOR * run.corpus_bytes
    if free < need:
        run.error = (
            f"{NOT_RUN}: {free / 2**30:.1f} GB free under {work.parent}, {need / 2**30:.1f} GB needed "
            f"({DISK_FACTOR} x the {run.corpus_bytes / 2**30:.1f} GB corpus: its kept/ output and "
            "shuffle files)"
        )
        print(run.error, flush=True)
        return run
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    logs, out, local = work / "eventlog", work / "out", work / "spark-local"
    logs.mkdir()
    local.mkdir()
    conf = [
        f"spark.driver.memory={args.driver_memory}",
        *EVENT_LOG_CONF,
        f"spark.eventLog.dir={logs}",
        f"spark.local.dir={local}",  # Spark's scratch where its size can be watched (same disk)
    ]
    cmd = neardup_command(corpus.path, out, args.workers, conf)
    print(f"{run.docs:,}: running neardup ...", end=" ", flush=True)
    run.machine = machine()  # its date: when the run started
    run.load_start = list(os.getloadavg())
    samples: list[tuple[float, float]] = []
    with DiskWatch(work, local) as disk:
        m = run_measured(cmd, work / "log.txt", args.timeout, cpu_samples=samples)
    run.disk_peak_bytes, run.local_peak_bytes = disk.peak, disk.local_peak
    run.load_end = list(os.getloadavg())
    run.measure = asdict(m)
    if m.timed_out or m.returncode != 0:
        tail = (work / "log.txt").read_text(errors="replace").strip().splitlines()[-3:]
        run.error = f"exit {m.returncode}{' (timed out)' if m.timed_out else ''}: {' | '.join(tail)}"[-500:]
        print(run.error, flush=True)
    else:
        report = json.loads((out / "report.json").read_text())
        run.report = {k: v for k, v in report.items() if k not in ("config", "bands")}
        shutil.copy(out / "report.json", work / "report.json")
        _score(run, out, corpus.path, args)
        print(f"{m.wall:.1f} s wall, {m.cpu:.1f} s CPU; {run.scored}", flush=True)
    if any(logs.iterdir()):  # a failed run's log too: its failed tasks and retries
        try:
            read_event_log(run, logs)
            run.stage_cpu = cpu_by_stage(samples, stage_starts(app_log(logs)))
        except (ValueError, json.JSONDecodeError) as e:  # a log cut short by a crash
            run.error = run.error or f"event log unreadable: {e}"
    shutil.rmtree(out, ignore_errors=True)  # kept/ and clusters/: about the corpus's size again
    shutil.rmtree(local, ignore_errors=True)  # what a crashed JVM leaves of its scratch
    return run


# --------------------------------------------------------------------------- figures


def _per_doc_us(seconds: float | None, run: SizeRun) -> str:
    return "" if seconds is None else f"{seconds / run.docs * 1e6:,.1f}"


def _f1(x: float | None) -> str:
    return "" if x is None else f"{x:.1f}"


def _loads(loads: list[float]) -> str:
    return " / ".join(f"{x:.2f}" for x in loads)


def _mb(n: float) -> str:
    return f"{n / MB:,.1f}"


# Sizes: MB, GB and TB are 2^20, 2^30 and 2^40 bytes throughout, as Spark's UI shows them.
def _gb(n: float) -> str:
    return f"{n / 2**30:,.1f}" if n >= 2**30 else f"{n / 2**30:,.2f}"


def _order(run: SizeRun) -> list[str]:
    """report.json's stage order, then any stage only the event log knows."""
    timed = [s for s in run.report.get("seconds", {}) if s != "total"]
    return [*timed, *(s for s in run.stages if s not in timed)]


def _disk(run: SizeRun) -> list[str]:
    if not run.disk_peak_bytes:
        return []
    return [
        f"- disk: at most {_gb(run.disk_peak_bytes)} GB taken at once "
        f"({run.disk_peak_bytes / run.corpus_bytes:.2f}x the corpus; outputs, staging and Spark's scratch), "
        f"of which Spark's local directory (shuffle files, spills, blocks on disk) at most "
        f"{_gb(run.local_peak_bytes)} GB"
    ]


def _earlier(run: SizeRun) -> list[str]:
    """The other runs of this size, in brief (a line, or none): runs this one replaced, or
    runs kept apart (at another commit)."""
    if not run.earlier:
        return []

    def brief(e: dict[str, Any]) -> str:
        commit = e["neardup"].split(" at ")[-1]
        if e["error"].startswith(NOT_RUN):
            # A run that did not start (refused for disk space) has no figures: its reason alone.
            return f"{e['date']}: {e['error']} (neardup {commit})"
        what = f"failed: {e['error'][:80]}" if e["error"] else f"wall {e['wall']:.1f} s, CPU {e['cpu']:.1f} s"
        loads = f"load at start {_loads(e['load_start'])}, at end {_loads(e['load_end'])}"
        return f"{e['date']}: {what}, {loads}, neardup {commit}"

    parts = [brief(e) for e in run.earlier]
    return ["- other runs of this size, not in the tables: " + "; ".join(parts)]


def render_size(run: SizeRun) -> list[str]:
    lines = [f"## {run.docs:,} documents", ""]
    if run.error:
        return [*lines, f"Failed: {run.error}", ""]
    m, figs, secs = run.measure, run.figures(), run.report.get("seconds", {})
    tot = total(figs)
    lines += [
        f"- corpus: `{run.corpus}` ({_gb(run.corpus_bytes)} GB of Parquet, "
        f"{run.corpus_bytes / run.docs:,.0f} bytes a document); command: `{run.command}`; "
        f"neardup measured: {run.neardup}",
        f"- {run.machine.get('date', '')}; load average (1/5/15 min) at start "
        f"{_loads(run.load_start)}, at end {_loads(run.load_end)}; "
        f"waited {run.lock_wait_s:.0f} s for the benchmark lock",
        f"- wall {m['wall']:.1f} s ({run.docs / m['wall']:,.0f} documents/s), "
        f"process-tree CPU {m['cpu']:.1f} s "
        f"({m['cpu'] / m['wall']:.2f} cores busy); peak RSS: process tree {m['peak_mb']:,.0f} MB, "
        f"Python driver {m['driver_mb']:,.0f} MB, JVM {m['jvm_mb']:,.0f} MB; "
        f"JVM heap in use at most {_mb(tot.jvm_heap)} MB (stage executor metrics)",
        "- counts: "
        + ", ".join(f"{k} {v:,}" for k, v in run.report.get("counts", {}).items() if isinstance(v, int)),
        f"- components: {json.dumps(run.report.get('components'))}; guard rounds "
        f"{run.report.get('guard', {}).get('rounds')}; batches: {json.dumps(run.report.get('memory'))}",
        f"- {run.scored}"
        + (
            f": precision {run.scores['precision']:.4f}, recall {run.scores['recall']:.4f}, "
            f"F1 {run.scores['f1']:.4f}, ARI {run.scores['ari']:.4f}"
            if run.scores
            else ""
        ),
        *_earlier(run),
        *_disk(run),
        *(
            ["- Spark settings: " + ", ".join(f"{k}={v}" for k, v in run.spark_conf.items())]
            if run.spark_conf
            else []
        ),
        "",
        "| stage | wall s | CPU s | Spark stages | tasks | task s | JVM CPU s | GC s | input MB "
        "| shuffle write MB | shuffle read MB | records read | spill mem MB | spill disk MB | peak exec MB "
        "| largest task read MB | failed tasks | retried stages |",
        "|---|" + "---:|" * 17,
    ]
    names = [*([STARTUP] if STARTUP in run.stage_cpu else []), *_order(run)]
    rows = [(name, figs.get(name, StageFigures()), secs.get(name), run.stage_cpu.get(name)) for name in names]
    rows.append(("**total**", tot, secs.get("total"), m["cpu"]))
    for name, f, s, c in rows:
        lines.append(
            f"| {name} | {_f1(s)} | {_f1(c)} | {f.spark_stages} | {f.tasks:,} | {f.run_s:.1f} "
            f"| {f.cpu_s:.1f} | {f.gc_s:.1f} | {_mb(f.input_bytes)} | {_mb(f.shuffle_write_bytes)} "
            f"| {_mb(f.shuffle_read_bytes)} | {f.shuffle_read_records:,} | {_mb(f.memory_spilled)} "
            f"| {_mb(f.disk_spilled)} | {_mb(f.peak_execution)} | {_mb(f.largest_task_read)} "
            f"| {f.failed_tasks} | {f.retried_stages} |"
        )
    lines += [
        "",
        "Memory, peaks per stage (MB; stage executor metrics: in local mode the driver's JVM runs the "
        "tasks):",
        "",
        "| stage | JVM heap in use | execution | storage | JVM outside the heap | NIO direct buffers "
        "| JVM RSS | Python workers' RSS |",
        "|---|" + "---:|" * 7,
    ]
    for name, f, _, _ in rows:
        if f.jvm_rss or f.jvm_heap:
            lines.append(
                f"| {name} | {_mb(f.jvm_heap)} | {_mb(f.execution_memory)} | {_mb(f.storage_memory)} "
                f"| {_mb(f.jvm_offheap)} | {_mb(f.direct_pool)} | {_mb(f.jvm_rss)} | {_mb(f.python_rss)} |"
            )
    lines += [
        "",
        f"Per document: {tot.run_s / run.docs * 1e6:,.1f} us of task time, "
        f"{m['cpu'] / run.docs * 1e6:,.1f} us of process-tree CPU "
        f"({tot.cpu_s / run.docs * 1e6:,.1f} us of it in JVM task threads), "
        f"{tot.shuffle_write_bytes / run.docs:,.0f} shuffle bytes written and "
        f"{tot.shuffle_read_bytes / run.docs:,.0f} read, "
        f"{tot.memory_spilled / run.docs:,.1f} bytes spilled from memory "
        f"({tot.disk_spilled / run.docs:,.1f} on disk).",
        "",
    ]
    return lines


def _per_doc_table(runs: list[SizeRun], title: str, value: Any, unit: str) -> list[str]:
    names = list(dict.fromkeys(n for r in runs for n in _order(r)))
    lines = [
        f"{title} ({unit}):",
        "",
        "| stage | " + " | ".join(f"{r.docs:,}" for r in runs) + " |",
        "|---|" + "---:|" * len(runs),
    ]
    for name in [*names, "total"]:
        cells = []
        for r in runs:
            figs = r.figures()
            f = total(figs) if name == "total" else figs.get(name)
            cells.append("" if f is None else value(r, name, f))
        lines.append(f"| {'**total**' if name == 'total' else name} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def render_growth(runs: list[SizeRun]) -> list[str]:
    """How each figure per document changes with size: what grows faster than linearly."""
    ok = [r for r in runs if not r.error]
    if len(ok) < 2:
        return []
    lines = ["## Per document, by size", ""]
    lines += _per_doc_table(
        ok, "Task time per document", lambda r, _, f: f"{f.run_s / r.docs * 1e6:,.1f}", "us"
    )
    if all(r.stage_cpu for r in ok):
        lines += _per_doc_table(
            ok,
            "Process-tree CPU per document (from the stage's start to the next's; total: the whole run)",
            lambda r, name, _: _per_doc_us(r.measure["cpu"] if name == "total" else r.stage_cpu.get(name), r),
            "us",
        )
    lines += _per_doc_table(
        ok,
        "Shuffle bytes written per document",
        lambda r, _, f: f"{f.shuffle_write_bytes / r.docs:,.1f}",
        "bytes",
    )
    lines += _per_doc_table(
        ok,
        "Spilled from memory per document",
        lambda r, _, f: f"{f.memory_spilled / r.docs:,.1f}",
        "bytes",
    )
    return [*lines, *_growth_table(ok), ""]


def _growth_table(ok: list[SizeRun]) -> list[str]:
    """Counts, time and shuffle per document, and the rounds of the iterative stages, by size."""

    def row(what: str, cells: Iterator[str]) -> str:
        return f"| {what} | " + " | ".join(cells) + " |"

    lines = [row("per document", (f"{r.docs:,}" for r in ok)), "|---|" + "---:|" * len(ok)]
    for key in ("exact_duplicates", "candidate_pairs", "verified_pairs", "near_duplicates"):
        lines.append(row(key, (f"{r.report['counts'].get(key, 0) / r.docs:.4f}" for r in ok)))
    return [
        *lines,
        row("task us", (f"{total(r.figures()).run_s / r.docs * 1e6:,.1f}" for r in ok)),
        row("process-tree CPU us", (f"{r.measure['cpu'] / r.docs * 1e6:,.1f}" for r in ok)),
        row("wall us (local[2])", (f"{r.wall() / r.docs * 1e6:,.1f}" for r in ok)),
        row("shuffle bytes written", (f"{total(r.figures()).shuffle_write_bytes / r.docs:,.0f}" for r in ok)),
        row("components iterations", (str(r.report.get("components", {}).get("iterations")) for r in ok)),
        row("guard rounds", (str(r.report.get("guard", {}).get("rounds")) for r in ok)),
    ]


def _ratio_line(runs: dict[int, SizeRun], goal: float) -> str:
    small, large = runs.get(1_000_000), runs.get(10_000_000)
    if not small or not large or small.error or large.error:
        return ""
    ratio = large.wall() / small.wall()
    verdict = f"{'within' if ratio <= goal else 'over'} the goal of {goal}"
    cores = int(large.machine.get("cpu", "0").split()[0] or 0)
    if cores and max(small.load_start[0], large.load_start[0]) > cores:
        verdict = (
            f"against the goal of {goal}, not a verdict: a run began with more work on the machine "
            f"than its {cores} cores"
        )
    return (
        f"Wall time, 10,000,000 / 1,000,000 documents: {large.wall():.1f} s / {small.wall():.1f} s = "
        f"**{ratio:.2f}** ({verdict}); the process tree's CPU time "
        f"{large.measure['cpu']:.1f} s / {small.measure['cpu']:.1f} s = "
        f"{large.measure['cpu'] / small.measure['cpu']:.2f}. The machine is shared: load average "
        f"(1 min) at the start of the runs {small.load_start[0]:.2f} (1,000,000) and "
        f"{large.load_start[0]:.2f} (10,000,000) on {large.machine.get('cpu', '?').split(',')[0]}; "
        "CPU time is less disturbed by other work than wall time."
    )


def _memory_line(runs: dict[int, SizeRun]) -> str:
    small, large = runs.get(1_000_000), runs.get(10_000_000)
    if not small or not large or small.error or large.error:
        return ""
    sm, lm = small.measure, large.measure
    st, lt = total(small.figures()), total(large.figures())

    def change(a: float, b: float) -> str:
        return f"{a:,.0f} -> {b:,.0f} MB ({b / a:.2f}x)" if a else f"{a:,.0f} -> {b:,.0f} MB"

    return (
        f"Driver memory, 1,000,000 -> 10,000,000 documents: the Python driver's RSS "
        f"{change(sm['driver_mb'], lm['driver_mb'])}; the JVM (in local mode the Spark driver also runs "
        f"the tasks) with spark.driver.memory={large.driver_memory}: its heap in use at most "
        f"{change(st.jvm_heap / MB, lt.jvm_heap / MB)} (within the heap's bound; garbage not yet "
        f"collected included), its RSS {change(sm['jvm_mb'], lm['jvm_mb'])}, which adds to the heap the "
        f"NIO direct buffers ({change(st.direct_pool / MB, lt.direct_pool / MB)}), metaspace and code "
        f"({change(st.jvm_offheap / MB, lt.jvm_offheap / MB)}), threads and native allocations."
    )


def _faults_line(runs: list[SizeRun]) -> str:
    parts = []
    for r in runs:
        if r.error:
            parts.append(f"{r.docs:,}: failed ({r.error[:80]})")
            continue
        t = total(r.figures())
        parts.append(
            f"{r.docs:,}: {t.failed_tasks} failed tasks, {t.retried_stages} stage retries, "
            f"{_mb(t.memory_spilled)} MB spilled from memory ({_mb(t.disk_spilled)} MB on disk)"
        )
    return "Failures and spill: " + "; ".join(parts) + "."


def render_results(runs: list[SizeRun], goal: float) -> str:
    by_docs = {r.docs: r for r in runs}
    lines = [
        "# Scale: 100,000 to 10,000,000 documents, from Spark's own metrics",
        "",
        "Each size is `neardup dedup` with its defaults in local[2], spark.driver.memory=4g, on the "
        "`synth` corpus of e2e.py (lognormal lengths around 2 KB, 30 % of documents in planted "
        "clusters), with Spark's event log on; the figures per stage are summed from its task-end "
        "events, by the job group of each Spark job (`python -m bench scale`, bench/scale.py). "
        "`task s` is executor run time: the seconds tasks held a slot, the Python workers' work "
        "included; `JVM CPU s` is executorCpuTime, the task threads' CPU only (a task thread waits "
        "while its Python worker signs or verifies). `wall s` is report.json's; stages also run work "
        "on the driver (planning, collects, components on the driver), which no task metric counts. "
        "`CPU s` is the process tree's CPU time (Python workers, JVM, driver) from the stage's first "
        "Spark job to the next stage's, sampled every 0.2 s (blank where a run did not record it). "
        "`peak exec MB` is the largest task's peak execution memory; the memory table under each "
        "size holds the stage executor metrics' peaks (the JVM heap in use includes garbage not yet "
        "collected).",
        "",
    ]
    for line in (_ratio_line(by_docs, goal), _memory_line(by_docs), _faults_line(runs)):
        if line:
            lines += [line, ""]
    for r in runs:
        lines += render_size(r)
    lines += render_growth(runs)
    env = next((r.machine for r in reversed(runs) if r.machine), {})
    # e2e.machine()'s `neardup` is the tree the benchmark scripts ran from; each size above
    # names the neardup it measured.
    shown = {("bench/ scripts" if k == "neardup" else k): v for k, v in env.items()}
    lines += ["## Machine", "", *(f"- {k}: {v}" for k, v in shown.items()), ""]
    return "\n".join(lines)


# --------------------------------------------------------------------------- the billion


@dataclass
class Projection:
    nodes: int
    cores: int
    wall_s: float  # from task time
    wall_cpu_s: float  # from process-tree CPU time
    shuffle_bytes: float
    partitions: int
    input_tasks: int
    executor_mb: int
    overhead_mb: int
    local_disk_per_node: float  # bytes of Spark scratch (shuffle, spill) a node holds at once


def project(run: SizeRun, nodes: int, cores: int, args: argparse.Namespace) -> Projection:
    """A billion documents on nodes x cores, from one measured size (see render_readme)."""
    figs = run.figures()
    tot = total(figs)
    scale = BILLION / run.docs
    slots = nodes * cores
    wall = tot.run_s * scale / (slots * args.efficiency)
    wall_cpu = stages_cpu(run) * scale / (slots * args.efficiency)
    largest_read = max(f.largest_stage_read for f in figs.values()) * scale
    partitions = max(slots, math.ceil(largest_read / (args.shuffle_task_mb * MB)))
    partitions = math.ceil(partitions / slots) * slots  # whole waves
    input_tasks = math.ceil(run.corpus_bytes * scale / (args.max_partition_mb * MB))
    # The README's memory rule per slot (110 MB + 3 x largest document + batch) plus, for the
    # shuffles, the largest task's measured peak execution memory; Spark's 300 MB reserve on top.
    largest_doc = CorpusSpec(num_docs=1, **CORPORA["synth"]).max_chars * 4  # UTF-8 bytes, at most
    batch = int(run.report.get("memory", {}).get("batch_bytes", 16 * MB))
    slot = 110 * MB + 3 * largest_doc + batch + tot.peak_execution
    executor = 300 * MB + cores * slot
    # Outside the heap: each slot's Python worker and its share of the NIO direct buffers (as
    # measured over the run's slots), and the JVM's own non-heap memory (metaspace, code) once.
    per_slot = (tot.python_rss + tot.direct_pool) / max(args.workers, 1)
    overhead = per_slot * cores + tot.jvm_offheap
    return Projection(
        nodes,
        cores,
        wall,
        wall_cpu,
        tot.shuffle_write_bytes * scale,
        partitions,
        input_tasks,
        math.ceil(executor / MB / 1024) * 1024,
        math.ceil(overhead / MB / 1024) * 1024,
        run.local_peak_bytes * scale / nodes,
    )


def stages_cpu(run: SizeRun) -> float:
    """The process tree's CPU seconds during the stages: the run's, but for its start-up (a run
    that did not record its CPU by stage: the whole run's)."""
    if not run.stage_cpu:
        return float(run.measure.get("cpu", 0.0))
    return sum(v for k, v in run.stage_cpu.items() if k != STARTUP)


def _hours(s: float | None) -> str:
    if s is None:
        return "-"
    return f"{s / 3600:.1f} h" if s >= 3600 else f"{s / 60:.0f} min"


NOT_MEASURED = "not in the neardup measured"
NOT_RUN = "not run"  # how a run refused before it starts (disk space) begins its error


def _bounds(run: SizeRun) -> list[tuple[str, str, float, str]]:
    """Each BROADCAST_ROWS bound in the pipeline: the rows it counts per document at this size,
    and what happens past it."""
    c = run.report.get("counts", {})
    n = run.docs
    cand, ver, exact = c.get("candidate_pairs", 0), c.get("verified_pairs", 0), c.get("exact_duplicates", 0)
    dropped = c.get("input", n) - c.get("kept", n)
    return [
        ("verify", "verify: the ends of the candidate pairs (2 x candidates)", 2 * cand / n, "shuffle joins"),
        (
            "components",
            "components on the driver (verified edges)"
            + (
                ""
                if run.report.get("components", {}).get("backend") == "driver"
                else f" ({NOT_MEASURED}: its components ran "
                f"{run.report.get('components', {}).get('backend')}, distributed, at every size)"
            ),
            ver / n,
            "the distributed backend",
        ),
        (
            "survivors",
            "survivors and guard: component nodes (2 x verified edges)",
            2 * ver / n,
            "shuffle joins",
        ),
        (
            "write",
            "write, assign_members: 2 x verified edges + exact copies",
            (2 * ver + exact) / n,
            "sort-merge joins by kept id",
        ),
        ("write", "write: ids dropped from kept/ (input - kept)", dropped / n, "a shuffle anti-join"),
        ("exact", "exact: copies of exact groups", exact / n, "a shuffle anti-join"),
    ]


def render_readme(runs: list[SizeRun], args: argparse.Namespace) -> str:
    ok = [r for r in runs if not r.error and r.stages]
    if not ok:
        return "No successful run to project from.\n"
    by_docs = {r.docs: r for r in ok}
    base = max(ok, key=lambda r: r.docs)
    tot = total(base.figures())
    lines = [f"### {base.docs:,} documents", ""]
    for line in (_ratio_line(by_docs, args.goal), _memory_line(by_docs), _faults_line(ok)):
        if line:
            lines += [line, ""]
    for r in ok:
        for line in _earlier(r):
            lines += [f"{r.docs:,} documents, " + line.removeprefix("- "), ""]
    lines += [
        "| documents | wall s | documents/s | task s | shuffle written | spilled "
        "| peak RSS (tree / Python driver / JVM) |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in ok:
        t = total(r.figures())
        m = r.measure
        lines.append(
            f"| {r.docs:,} | {m['wall']:.1f} | {r.docs / m['wall']:,.0f} | {t.run_s:,.0f} "
            f"| {_gb(t.shuffle_write_bytes)} GB "
            f"| {_mb(t.memory_spilled)} MB ({_mb(t.disk_spilled)} MB on disk) "
            f"| {m['peak_mb']:,.0f} / {m['driver_mb']:,.0f} / {m['jvm_mb']:,.0f} MB |"
        )
    lines += [
        "",
        "(`bench/results/scale.md`, `python -m bench scale`: local[2], spark.driver.memory=4g, the "
        "`synth` corpus, neardup's defaults; per stage and per document there.)",
        "",
        "### A billion documents: the cost model",
        "",
        f"From the {base.docs:,}-document run's own metrics, per document, multiplied by 1,000,000,000 "
        f"({_per_doc_us(stages_cpu(base), base)} us of process-tree CPU "
        + ("during the stages" if base.stage_cpu else "over the whole run (not recorded by stage)")
        + f", {tot.run_s / base.docs * 1e6:,.1f} us of task time and "
        f"{tot.shuffle_write_bytes / base.docs:,.0f} shuffle bytes a document):",
        "",
        "| cluster | wall, from CPU | wall, from task time | shuffle written | spark.sql.shuffle.partitions "
        "| input tasks "
        f"(maxPartitionBytes {args.max_partition_mb} MB) | spark.executor.memory "
        "| spark.executor.memoryOverhead | Spark local disk per node |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for nodes in args.nodes:
        p = project(base, nodes, args.cores, args)
        lines.append(
            f"| {nodes} nodes x {args.cores} cores | {_hours(p.wall_cpu_s)} | {_hours(p.wall_s)} "
            f"| {p.shuffle_bytes / 2**40:,.1f} TB "
            f"| {p.partitions:,} | {p.input_tasks:,} | {p.executor_mb // 1024} GB "
            f"(spark.executor.cores={args.cores}) | {p.overhead_mb // 1024} GB "
            f"| {f'{p.local_disk_per_node / 2**30:,.0f} GB' if p.local_disk_per_node else '-'} |"
        )
    lines += [
        "",
        "Assumptions:",
        "",
        "- Wall, from CPU = the process tree's CPU seconds per document during the stages (Python workers, "
        "JVM and driver; the start-up left out) x 10^9 / (nodes x cores x efficiency): the work itself. "
        "Wall, from task time = executor run time per document (summed over every stage's tasks; a task's "
        "time in its slot, the Python worker's work included, and on a loaded machine its wait for a core) "
        f"x 10^9 / (nodes x cores x efficiency): an upper bound. Efficiency {args.efficiency} is the "
        f"assumed share of the slots kept busy (stage barriers, stragglers, the driver's own work); on this "
        f"machine the {base.docs:,}-document run's process tree used "
        f"{base.measure['cpu'] / (args.workers * base.wall()):.2f} of its {args.workers} cores "
        f"(CPU seconds over {args.workers} x wall), and its tasks held "
        f"{tot.run_s / (args.workers * base.wall()):.2f} of its slots. "
        f"A cluster core is taken to be as fast as one of this machine's ({base.machine.get('cpu', '?')}, "
        "shared with other work); network shuffle is taken to cost no more than local disk. Stages that "
        "change plan past a bound of the last table (a shuffle join for a broadcast, the components "
        "distributed rather than on the driver) are costed as measured, in their plan at this size.",
        "- Shuffle volume = shuffle bytes written per document x 10^9 (compressed, as Spark writes it; "
        "about as many are read back).",
        f"- spark.sql.shuffle.partitions: the largest shuffle of one Spark stage, scaled to 10^9, over "
        f"{args.shuffle_task_mb} MB a task, rounded up to whole waves of the cluster's slots.",
        f"- Input: Spark's default spark.sql.files.maxPartitionBytes of {args.max_partition_mb} MB over "
        f"{_gb(base.corpus_bytes * BILLION / base.docs / 1024)} TB of Parquet "
        f"({base.corpus_bytes / base.docs:,.0f} bytes a document); neardup sizes its batches in bytes, so "
        "the split size does not change a task's memory.",
        "- spark.executor.memory: the README's rule, 300 MB + cores x (110 MB + 3 x the largest document + "
        "the batch), with the largest `synth` document (20,000 characters, at most 80 KB of UTF-8) and the "
        f"batch of the run ({int(base.report.get('memory', {}).get('batch_bytes', 0)) // MB} MB), plus per "
        f"slot the largest task's peak execution memory measured ({_mb(tot.peak_execution)} MB, with tasks "
        f"reading up to {_mb(tot.largest_task_read)} MB of shuffle, "
        + (
            f"more than the {args.shuffle_task_mb} MB the partitions above give a task"
            if tot.largest_task_read >= args.shuffle_task_mb * MB
            else f"less than the {args.shuffle_task_mb} MB the partitions above give a task: a lower bound"
        )
        + "); rounded up to whole GB. Heavier-tailed text needs the rule with its own largest document.",
        "- Spark local disk per node: the most the run held at once under spark.local.dir (shuffle files, "
        "spills, blocks on disk), scaled to 10^9 and spread evenly over the nodes.",
        f"- spark.executor.memoryOverhead (outside the heap): per slot, the measured peaks over the run's "
        f"{args.workers} slots of the Python workers' resident memory ({_mb(tot.python_rss)} MB) and of the "
        f"JVM's NIO direct buffers ({_mb(tot.direct_pool)} MB), x cores; plus the JVM's non-heap memory "
        f"(metaspace, code: {_mb(tot.jvm_offheap)} MB); rounded up to whole GB.",
        "",
    ]
    lines += render_superlinear(ok)
    return "\n".join(lines)


# A figure per document that rises by more than this from one size to ten times it is listed
# as growing faster than linearly (the machine is shared: smaller changes are noise).
RISING = 1.10
MATERIAL = 0.02  # and only for a stage with at least this share of the run's figure


def _rising(ok: list[SizeRun]) -> list[str]:
    """The figures per document that rise from the second largest size to the largest."""
    if len(ok) < 2:
        return []
    a, b = ok[-2], ok[-1]
    fa, fb = a.figures(), b.figures()
    tb = total(fb)
    found = []
    for name in [n for n in _order(b) if n in fa]:
        x, y = fa[name].run_s / a.docs, fb[name].run_s / b.docs
        if x and y / x > RISING and fb[name].run_s > MATERIAL * tb.run_s:
            found.append(f"{name}'s task time x{y / x:.2f}")
        x, y = fa[name].shuffle_write_bytes / a.docs, fb[name].shuffle_write_bytes / b.docs
        if x and y / x > RISING and fb[name].shuffle_write_bytes > MATERIAL * tb.shuffle_write_bytes:
            found.append(f"{name}'s shuffle bytes x{y / x:.2f}")
        if a.stage_cpu and b.stage_cpu:
            x, y = a.stage_cpu.get(name, 0) / a.docs, b.stage_cpu.get(name, 0) / b.docs
            if x and y / x > RISING and y * b.docs > MATERIAL * stages_cpu(b):
                found.append(f"{name}'s CPU x{y / x:.2f}")
        x, y = fa[name].memory_spilled / a.docs, fb[name].memory_spilled / b.docs
        if y and (not x or y / x > RISING):
            found.append(
                f"{name}'s spill ({_mb(fa[name].memory_spilled)} -> {_mb(fb[name].memory_spilled)} MB)"
            )
    for key in ("candidate_pairs", "verified_pairs", "exact_duplicates"):
        x, y = a.report["counts"].get(key, 0) / a.docs, b.report["counts"].get(key, 0) / b.docs
        if x and y / x > RISING:
            found.append(f"{key} x{y / x:.2f}")
    head = f"Per document from {a.docs:,} to {b.docs:,} documents, rising by more than {RISING - 1:.0%}: "
    return [head + ("; ".join(found) if found else "nothing") + ".", ""]


def render_superlinear(ok: list[SizeRun]) -> list[str]:
    """What per document grows with size, and the BROADCAST_ROWS bounds' crossing points."""
    lines = [
        "Per document, by size (a figure that rises per document grows faster than linearly), "
        + " -> ".join(f"{r.docs:,}" for r in ok)
        + " documents:",
        "",
    ]
    lines += [
        *_growth_table(ok),
        "",
        *_rising(ok),
        f"The bounds of {BROADCAST_ROWS:,} rows (pipeline.BROADCAST_ROWS) below which a frame is broadcast "
        "or the components are labelled on the driver; each counts rows that grow with the corpus, so past "
        f"the size shown the step changes plan (measured rows per document at {ok[-1].docs:,}):",
        "",
        "| bound | rows per document | crossed at about | then |",
        "|---|---:|---:|---|",
    ]
    bounds = _bounds(ok[-1])
    for _, what, per_doc, then in bounds:
        at = f"{BROADCAST_ROWS / per_doc:,.0f} documents" if per_doc else "never"
        if per_doc and BROADCAST_ROWS / per_doc <= ok[-1].docs:
            at += " (crossed in the runs measured)"
        lines.append(f"| {what} | {per_doc:.4f} | {at} | {then} |")
    return [*lines, "", *_crossings(ok, bounds), *_spill(ok[-1])]


def _crossings(ok: list[SizeRun], bounds: list[tuple[str, str, float, str]]) -> list[str]:
    """What the bounds crossed in the runs did to their stages, and when the others cross."""
    last = ok[-1]
    # A bound the neardup measured does not have (see _bounds) neither crossed nor lies ahead.
    bounds = [b for b in bounds if NOT_MEASURED not in b[1]]
    crossed = [(stage, x) for stage, _, x, _ in bounds if x and BROADCAST_ROWS / x <= last.docs]
    ahead = sorted(BROADCAST_ROWS / x for _, _, x, _ in bounds if x and BROADCAST_ROWS / x > last.docs)
    lines = []
    if crossed and len(ok) >= 2:
        a, b = ok[-2], last
        fa, fb = a.figures(), b.figures()
        said = []
        for stage, x in crossed:
            if stage in fa and stage in fb and fa[stage].shuffle_write_bytes:
                ratio = (fb[stage].shuffle_write_bytes / b.docs) / (fa[stage].shuffle_write_bytes / a.docs)
                said.append(
                    f"{stage} (at about {BROADCAST_ROWS / x:,.0f} documents; its shuffle bytes per document "
                    f"x{ratio:.2f} and its task time per document "
                    f"x{(fb[stage].run_s / b.docs) / (fa[stage].run_s / a.docs):.2f} from {a.docs:,} to "
                    f"{b.docs:,})"
                )
        if said:
            lines += [
                "Crossed between the runs measured: " + "; ".join(said) + ". That is a step, not a trend: "
                "past its bound the stage shuffles what it broadcast before, and its figures per document at "
                f"{b.docs:,} are the ones a larger run pays.",
                "",
            ]
    if ahead:
        lines += [
            f"Not yet crossed at {last.docs:,} documents: the other bounds fall between {ahead[0]:,.0f} and "
            f"{ahead[-1]:,.0f} documents, so a billion-document run is past all of them; each turns a "
            "broadcast into a shuffle of its stage, a step like the one above that this projection, scaled "
            f"from {last.docs:,} documents, does not include (those stages took "
            f"{_share(last, {s for s, _, x, _ in bounds if x and BROADCAST_ROWS / x > last.docs})} of the "
            "run's task time there).",
            "",
        ]
    return lines


def _share(run: SizeRun, stages: set[str]) -> str:
    figs = run.figures()
    part = sum(f.run_s for name, f in figs.items() if name in stages)
    return f"{part / total(figs).run_s:.0%}"


def _spill(run: SizeRun) -> list[str]:
    """Where the largest run spilled, with the shuffle partitions it had."""
    spilled = [(n, f) for n, f in run.figures().items() if f.memory_spilled]
    if not spilled:
        return [f"Nothing spilled at {run.docs:,} documents.", ""]
    parts = ", ".join(
        f"{n} {_mb(f.memory_spilled)} MB from memory ({_mb(f.disk_spilled)} MB on disk; its largest task "
        f"read {_mb(f.largest_task_read)} MB of shuffle)"
        for n, f in spilled
    )
    return [
        f"Spill at {run.docs:,} documents: {parts}; with spark.sql.shuffle.partitions="
        f"{run.spark_conf.get('spark.sql.shuffle.partitions', '?')} (neardup's local setting) and "
        f"spark.driver.memory={run.driver_memory} for {run.spark_conf.get('spark.master', '?')}. Partitions "
        "sized as above give each task a fraction of that.",
        "",
    ]


# --------------------------------------------------------------------------- main


def work_of(corpus: Path) -> Path:
    """Where a corpus's run keeps its event log, report.json and, while it runs, its outputs."""
    return corpus.parent / "runs" / "scale"


def read_event_log(run: SizeRun, logs: Path) -> None:
    log = app_log(logs)
    run.stages = {k: asdict(v) for k, v in stage_figures(log).items()}
    props = spark_properties(log)
    run.spark_conf = {k: props[k] for k in SPARK_CONF_SHOWN if k in props}


def reread(runs: dict[int, SizeRun]) -> None:
    """Each run's figures per stage again from its event log, where it is still on disk."""
    for run in runs.values():
        logs = work_of(Path(run.corpus)) / "eventlog"
        if logs.is_dir() and any(logs.iterdir()):
            read_event_log(run, logs)
            print(f"{run.docs:,}: figures read again from {logs}", flush=True)


def save(runs: dict[int, SizeRun], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({str(k): asdict(v) for k, v in sorted(runs.items())}, indent=1) + "\n")


def load(path: Path) -> dict[int, SizeRun]:
    if not path.exists():
        return {}
    return {int(k): SizeRun(**v) for k, v in json.loads(path.read_text()).items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--docs", default="100000,1000000,10000000", help="corpus sizes, comma-separated")
    p.add_argument("--render", action="store_true", help="no run: the reports again from --json")
    p.add_argument(
        "--reread", action="store_true", help="with --render: each size's figures again from its event log"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=2, help="local[N]")
    p.add_argument("--driver-memory", default="4g")
    p.add_argument("--threshold", type=float, default=0.8, help="of the cached truth to score against")
    p.add_argument("--truth-sample", type=int, default=4000, help="of the cached truth to score against")
    p.add_argument("--timeout", type=float, default=3 * 3600)
    p.add_argument("--cache", default="/tmp/neardup-bench", help="corpora and outputs (never committed)")
    p.add_argument("--lock", type=Path, default=Path("/tmp/neardup-bench.lock"), help="held during every run")
    p.add_argument("--json", type=Path, default=BENCH / "results" / "scale.json")
    p.add_argument("--out", type=Path, default=BENCH / "results" / "scale.md")
    p.add_argument("--readme-out", type=Path, default=BENCH / "results" / "scale-readme.md")
    p.add_argument("--goal", type=float, default=10.5, help="wall(10M) / wall(1M) at most")
    p.add_argument("--nodes", default="10,50", help="cluster sizes to project to, comma-separated")
    p.add_argument("--cores", type=int, default=16, help="cores per node of the projection")
    p.add_argument("--efficiency", type=float, default=0.6, help="share of slots busy, in the projection")
    p.add_argument(
        "--shuffle-task-mb", type=int, default=192, help="shuffle read per task, in the projection"
    )
    p.add_argument("--max-partition-mb", type=int, default=128, help="input split, in the projection")
    args = p.parse_args()
    args.nodes = [int(x) for x in args.nodes.split(",")]
    runs = load(args.json)
    if not args.render:
        for docs in [int(x) for x in args.docs.split(",")]:
            new = run_size(docs, args)
            old = runs.get(docs)
            if old is not None and new.error.startswith(NOT_RUN) and not old.error:
                old.earlier.append(new.brief())  # a refused run leaves the figures it would replace
            else:
                new.earlier = [*old.earlier, old.brief()] if old is not None else []
                runs[docs] = new
            save(runs, args.json)
            write_reports(runs, args)
    elif args.reread:
        reread(runs)
        save(runs, args.json)
    write_reports(runs, args)
    print(args.out.read_text())


def write_reports(runs: dict[int, SizeRun], args: argparse.Namespace) -> None:
    ordered = [runs[k] for k in sorted(runs)]
    args.out.write_text(render_results(ordered, args.goal))
    args.readme_out.write_text(render_readme(ordered, args) + "\n")


if __name__ == "__main__":
    main()
