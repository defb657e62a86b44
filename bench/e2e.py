#!/usr/bin/env python3
"""End-to-end benchmark: neardup and its peers on generated corpora, scored against exact truth.

    .venv/bin/python bench/e2e.py --docs 100000 [--corpus synth,realistic]
                                  [--tools neardup,rensa,rensa-mp,datasketch,datatrove,mllib,floor]
                                  [--out bench/results/latest.md]

1. Generates each deterministic corpus (--corpus, see CORPORA) with planted near-duplicate
   clusters (neardup_testkit.synth: lognormal lengths, Zipfian vocabulary, planted Jaccard
   0.3..1.0) under --cache (default /tmp/neardup-bench), reused by later runs with the same
   spec, and measures its lengths (bytes and words per document).
2. Computes the exact ground truth: pairs with word-5-gram Jaccard >= the threshold
   (normalized: NFKC, lowercase, whitespace collapsed) and their connected components
   (neardup_testkit/truth.py says why brute force within planted clusters is exact, and checks it).
3. Runs every tool in its own process with the same parameters (word 5-grams, 128
   permutations, threshold 0.8, the bands x rows neardup's configuration derives); wall
   time, CPU time and peak memory are measured over each process tree (the JVM and worker
   processes included).
4. Scores each tool's clusters: pairwise precision/recall/F1 and the adjusted Rand index.
5. Prints one table per corpus, with neardup's ratio to the fastest peer, and writes them
   as Markdown to --out with the machine description.

Tool groups: neardup = neardup (its defaults), the other signing method (neardup-classic or
neardup-oph), neardup-signature (signature verification); datasketch = datasketch,
datasketch-verify; rensa = rensa, rensa-verify; rensa-mp = rensa-mp, rensa-mp-verify (the
same in a process pool); datatrove; mllib; floor = spark-copy, not a peer but the floor of
any Spark job that writes kept/: a session started, the corpus read and written back as
Parquet (the summary line sets it against the fastest peer). Any single name works too; GROUP-only runs a
group's first member alone (neardup-only: neardup with its defaults).
The machine may be shared: compare tools through ratios taken in the same run, and CPU
seconds as well as wall seconds.
"""

from __future__ import annotations

import sys
from pathlib import Path

# The corpus generator and the references live in testkit/, which the wheel does not ship.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "testkit"))

import argparse
import dataclasses
import datetime as dt
import json
import os
import platform
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

import numpy as np
import psutil
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from neardup import config as neardup_config
from neardup_testkit.string_ids import with_string_ids
from neardup_testkit.synth import CorpusSpec
from neardup_testkit.truth import Corpus, Truth, ensure_corpus, ground_truth, labels_from_ids, score

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
PYTHON = sys.executable


def _default_method() -> str:
    """neardup's default minhash.method, so the group adds the other method, not a copy of the default."""
    try:
        from neardup.config import default_layer

        return str(default_layer()["minhash"]["method"])
    except (ImportError, KeyError, TypeError):
        return "classic"


GROUPS = {
    "neardup": [
        "neardup",
        "neardup-classic" if _default_method() == "oph" else "neardup-oph",
        "neardup-signature",
    ],
    "datasketch": ["datasketch", "datasketch-verify"],
    "rensa": ["rensa", "rensa-verify"],
    "rensa-mp": ["rensa-mp", "rensa-mp-verify"],
    "datatrove": ["datatrove"],
    "mllib": ["mllib"],
    # Not a peer: Spark's own floor for this corpus (start, read, write it back), below which
    # no Spark job that writes kept/ can go. The summary sets it against the fastest peer.
    "floor": ["spark-copy"],
}
FLOOR = "spark-copy"
NEARDUP_VARIANTS = {
    "neardup": [],  # the defaults, whatever they are (the notes column says)
    "neardup-classic": ["minhash.method=classic"],  # --set values
    "neardup-oph": ["minhash.method=oph"],
    "neardup-exact": ["verify.method=exact"],  # with the default signing method
    "neardup-signature": ["verify.method=signature"],
}
SAMPLE_SECONDS = 0.2

# The corpora --corpus names. `synth` is the one every earlier result used; `realistic` has
# the length distribution and word lengths of held-out web text: 2.35 KB on average with a
# heavy tail (lognormal, sigma 1: median ~1.4 KB, 1 % above ~15 KB, the longest ~100 KB
# per million documents) and ~5.9 bytes per word, separator included, as in English,
# where `synth` has 4.0 (so at 2.0 KB it has ~500 words per document, 2.35 KB of English
# ~400). Same planted duplicate structure; CorpusSpec fields other than these stay default.
CORPORA: dict[str, dict[str, Any]] = {
    "synth": {"mean_chars": 2000},
    "realistic": {
        "mean_chars": 2330,  # before clipping; the shortest are clipped up to 200: ~2.35 KB after
        "length_sigma": 1.0,
        "max_chars": 1_000_000,
        "vocab_size": 200_000,  # with the flatter Zipf law: the English mean word length
        "zipf_exponent": 0.8,
    },
}


# --------------------------------------------------------------------------- measuring


@dataclass
class Measure:
    wall: float = 0.0
    cpu: float = 0.0  # user + system seconds over the whole process tree
    peak_mb: float = 0.0  # largest sum of RSS over the tree at one sample
    driver_mb: float = 0.0  # largest RSS of the process started (the tool's driver program)
    jvm_mb: float = 0.0  # largest RSS of a JVM in the tree (Spark's driver in local mode)
    returncode: int | None = None
    timed_out: bool = False


def run_measured(
    cmd: list[str],
    log: Path,
    timeout: float,
    env: dict[str, str] | None = None,
    cpu_samples: list[tuple[float, float]] | None = None,
) -> Measure:
    """Run cmd in its own session; sample its process tree until it exits (or time out).

    CPU: the larger of (a) the sum over every process seen of its last sampled user+system
    time and (b) what wait4 reports for the child and the descendants it reaped. (a)
    misses up to one sample period of short-lived processes, (b) misses processes nobody
    waited for (the JVM); together they are within a fraction of a second.
    Memory: the sum of RSS over the tree, so pages shared between forked workers count
    once per process, as `ps` shows them. `cpu_samples`, if given, receives (epoch seconds,
    the tree's CPU seconds so far) at every sample: how the CPU time falls over the run.
    """
    m = Measure()
    last_cpu: dict[tuple[int, float], float] = {}
    with open(log, "wb") as out:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=env)
        root = psutil.Process(proc.pid)
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                m.wall = time.perf_counter() - start
                m.returncode = os.waitstatus_to_exitcode(status)
                proc.returncode = m.returncode  # reaped here: keep Popen from waiting again
                m.cpu = max(sum(last_cpu.values()), usage.ru_utime + usage.ru_stime)
                break
            rss = 0
            try:
                tree = [root, *root.children(recursive=True)]
            except psutil.Error:
                tree = []
            for p in tree:
                try:
                    with p.oneshot():
                        t = p.cpu_times()
                        last_cpu[(p.pid, p.create_time())] = t.user + t.system
                        one = p.memory_info().rss
                        rss += one
                        if p.pid == root.pid:
                            m.driver_mb = max(m.driver_mb, one / 2**20)
                        elif p.name() == "java":
                            m.jvm_mb = max(m.jvm_mb, one / 2**20)
                except psutil.Error:
                    continue
            m.peak_mb = max(m.peak_mb, rss / 2**20)
            if cpu_samples is not None:
                cpu_samples.append((time.time(), sum(last_cpu.values())))
            if time.perf_counter() - start > timeout and not m.timed_out:
                m.timed_out = True
                os.killpg(proc.pid, signal.SIGKILL)  # the session we started: the tool and its children
            time.sleep(SAMPLE_SECONDS)
    return m


# --------------------------------------------------------------------------- results


@dataclass
class Row:
    tool: str
    docs: int
    measure: Measure | None = None
    scores: dict[str, float] = field(default_factory=dict)
    clusters: int | None = None
    largest: int | None = None
    stages: dict[str, float] = field(default_factory=dict)
    counts: dict[str, Any] = field(default_factory=dict)
    notes: str = ""
    error: str | None = None
    repeats: list[Measure] = field(default_factory=list)  # every run of this tool, best first


def _wall(row: Row) -> float:
    return row.measure.wall if row.measure else float("inf")


def _tail(log: Path, lines: int = 3) -> str:
    try:
        text = log.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    useful = [t for t in text if t.strip()]
    return " | ".join(useful[-lines:])[-400:]


def _run_row(row: Row, cmd: list[str], work: Path, timeout: float) -> bool:
    """Run a tool's process, measured; on a time-out or failure record why on the row."""
    row.measure = run_measured(cmd, work / "log.txt", timeout)
    if row.measure.timed_out:
        row.error = f"timed out after {timeout:.0f} s (bounded by --timeout)"
        return False
    if row.measure.returncode != 0:
        row.error = f"exit {row.measure.returncode}: {_tail(work / 'log.txt')}"
        return False
    return True


def neardup_command(inp: Path, out: Path, workers: int, conf: list[str], *sets: list[str]) -> list[str]:
    """`neardup dedup` in local[workers], overwriting `out`, with Spark settings `conf` and
    each list of `sets` in turn (`--set K=V`, later lists win)."""
    flags = [x for kv in conf for x in ("--conf", kv)] + [x for s in sets for kv in s for x in ("--set", kv)]
    return [
        *(PYTHON, "-m", "neardup", "dedup", "--input", str(inp), "--output", str(out), "--overwrite"),
        *("--master", f"local[{workers}]", *flags),
    ]


def run_neardup(
    tool: str, corpus: Corpus, work: Path, args: argparse.Namespace
) -> tuple[Row, np.ndarray | None]:
    row = Row(tool, corpus.spec.num_docs)
    out = work / "out"
    cmd = neardup_command(
        corpus.path,
        out,
        args.workers,
        [f"spark.driver.memory={args.driver_memory}", *args.neardup_conf],
        [f"lsh.threshold={args.threshold}", f"minhash.num_perm={args.num_perm}"],
        NEARDUP_VARIANTS[tool],
        args.neardup_set,
    )
    if not _run_row(row, cmd, work, args.timeout):
        return row, None
    report = json.loads((out / "report.json").read_text())
    row.stages = {k: float(v) for k, v in report.get("seconds", {}).items()}
    row.counts = report.get("counts", {})
    cfg = report.get("config", {})
    row.notes = (
        f"{cfg.get('minhash', {}).get('method')} MinHash, verify={cfg.get('verify', {}).get('method')}, "
        f"LSH {report.get('bands', {}).get('bands')}x{report.get('bands', {}).get('rows')}, "
        f"components={report.get('components', {}).get('backend')}; local[{args.workers}]"
    )
    return row, output_labels(out, corpus.path)


def output_labels(out: Path, corpus: Path) -> np.ndarray:
    """Each corpus row's cluster in neardup's clusters/ under `out` (-1: in none), in the
    corpus's row order, as the truth's labels are. String ids (`--ids string`) are turned
    into the rows' numbers first."""
    clusters = pq.read_table(out / "clusters", columns=["id", "cluster_id"])
    corpus_ids = pq.read_table(corpus, columns=["id"]).column("id")
    if pa.types.is_string(corpus_ids.type):
        table = pa.table({"id": corpus_ids.combine_chunks()})
        rows = {
            c: pc.index_in(clusters.column(c), value_set=table.column("id")) for c in ("id", "cluster_id")
        }
        ids = rows["id"].to_numpy(zero_copy_only=False).astype(np.int64)
        cid = rows["cluster_id"].fill_null(-1).to_numpy().astype(np.int64)
        return labels_from_ids(np.arange(len(table), dtype=np.int64), ids, cid)
    cid = clusters.column("cluster_id").to_numpy(zero_copy_only=False)
    ids = clusters.column("id").to_numpy()
    return labels_from_ids(corpus_ids.to_numpy(), ids, np.nan_to_num(cid, nan=-1).astype(np.int64))


def run_peer(
    tool: str, corpus: Corpus, work: Path, args: argparse.Namespace
) -> tuple[Row, np.ndarray | None]:
    row = Row(tool, corpus.spec.num_docs)
    labels_path, info_path = work / "labels.npy", work / "info.json"
    cmd = [
        PYTHON,
        str(BENCH / "e2e_tools.py"),
        tool,
        "--corpus",
        str(corpus.path),
        "--shards",
        str(corpus.shards),
        "--work",
        str(work),
        "--labels",
        str(labels_path),
        "--info",
        str(info_path),
        "--bands",
        str(args.bands),
        "--rows",
        str(args.rows),
        "--num-perm",
        str(args.num_perm),
        "--threshold",
        str(args.threshold),
        "--workers",
        str(args.workers),
        "--mllib-tables",
        str(args.mllib_tables),
        "--driver-memory",
        args.driver_memory,
    ]
    if not _run_row(row, cmd, work, args.timeout):
        return row, None
    info = json.loads(info_path.read_text())
    row.stages = info.get("phases", {})
    row.notes = info.get("notes", "")
    row.counts = {k: v for k, v in info.items() if k.endswith("_pairs") and v is not None}
    return row, np.load(labels_path)


# --------------------------------------------------------------------------- report


def _cmd_out(cmd: list[str]) -> str:
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    return (r.stdout + r.stderr).strip().splitlines()[0] if (r.stdout + r.stderr).strip() else "?"


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def machine() -> dict[str, str]:
    model = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    commit = _cmd_out(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"])  # read-only
    return {
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": f"{os.cpu_count()} cores, {model}",
        "memory": f"{psutil.virtual_memory().total / 2**30:.1f} GiB",
        "os": platform.platform(),
        "python": platform.python_version(),
        "java": _cmd_out(["java", "-version"]),
        "spark (pyspark)": _version("pyspark"),
        "neardup": f"{_version('neardup')} (commit {commit}, working tree as found)",
        "peers": ", ".join(f"{n} {_version(n)}" for n in ("datasketch", "rensa", "datatrove")),
        "numpy / pyarrow / numba": f"{_version('numpy')} / {_version('pyarrow')} / {_version('numba')}",
        "python bytecode": bytecode(),
    }


def bytecode() -> str:
    """Whether the tools' Python processes import from cached bytecode. Without it (an
    installer that does not compile, such as uv by default, under PYTHONDONTWRITEBYTECODE=1)
    each process compiles every module it imports, 1.0-1.4 CPU-s for pyspark, pandas and
    numba (docs/performance.md, "Bytecode"): neardup's driver and workers' daemon pay it."""
    import importlib.util

    spec = importlib.util.find_spec("pyspark.sql.dataframe")
    origin = spec.origin if spec is not None else None
    cached = origin is not None and Path(importlib.util.cache_from_source(origin)).exists()
    if cached:
        return "cached (compiled at install or by an earlier import)"
    if os.environ.get("PYTHONDONTWRITEBYTECODE"):
        return (
            "COMPILED IN EVERY PROCESS (PYTHONDONTWRITEBYTECODE set, none cached): "
            "run python -m compileall on the venv"
        )
    return "written on first import"


def _f(x: float | None, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _summary(rows: list[Row]) -> str:
    """neardup's wall time against the fastest peer of the same run (the figure to quote)."""
    ok = [r for r in rows if r.measure and not r.error and r.scores]
    ref = next((r for r in ok if r.tool == "neardup"), None)
    peers = [r for r in ok if not r.tool.startswith("neardup") and r.tool != FLOOR]
    if ref is None or ref.measure is None or not peers:
        return ""
    fastest = min(peers, key=_wall)
    assert fastest.measure is not None
    line = (
        f"neardup / fastest peer ({fastest.tool}, F1 {fastest.scores['f1']:.4f}): wall "
        f"{ref.measure.wall / fastest.measure.wall:.2f}, CPU {ref.measure.cpu / fastest.measure.cpu:.2f} "
        f"(neardup F1 {ref.scores['f1']:.4f})."
    )
    floor = next((r for r in ok if r.tool == FLOOR and r.measure), None)
    if floor is not None and floor.measure is not None:
        share = floor.measure.wall / fastest.measure.wall
        line += (
            f" The Spark floor ({FLOOR}: a session started, the corpus read and written back, "
            f"nothing deduplicated) took {floor.measure.wall:.1f} s: {share:.2f}x the fastest peer, "
            f"and neardup took {ref.measure.wall / floor.measure.wall:.2f}x the floor."
        )
    return line


def render_corpus(
    rows: list[Row],
    name: str,
    spec: CorpusSpec,
    stats: dict[str, float],
    truth: Truth,
    args: argparse.Namespace,
) -> list[str]:
    """One corpus's table, notes and per-stage times (Markdown lines)."""
    ref = next((r for r in rows if r.tool == "neardup" and r.measure and not r.error), None)
    defaults = CorpusSpec(num_docs=spec.num_docs)
    fields = ", ".join(
        f"{k}={v!r}"
        for k, v in spec.__dict__.items()
        if k == "num_docs" or k == "seed" or v != getattr(defaults, k)
    )
    lines = [
        f"# neardup end-to-end benchmark: {spec.num_docs:,} documents, corpus `{name}`",
        "",
        f"Corpus: {stats['mean_bytes'] / 1000:.2f} KB per document on average (median "
        f"{stats['median_bytes'] / 1000:.2f} KB, 99th percentile {stats['p99_bytes'] / 1000:.1f} KB, "
        f"longest {stats['max_bytes'] / 1000:.0f} KB), {stats['words_per_doc']:.0f} words per document, "
        f"{stats['bytes_per_word']:.2f} bytes per word; `neardup_testkit.synth.CorpusSpec({fields})`, "
        f"other fields default (30 % of documents in planted clusters of 2-{spec.max_cluster_size}, "
        f"edited copies at Jaccard {spec.jaccard_range[0]}..{spec.jaccard_range[1]}).",
        "",
        "| tool | docs | wall s | docs/s | CPU s | CPU/wall | wall / neardup | CPU / neardup | peak MB "
        "| precision | recall | F1 | ARI | dup clusters | largest |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        m = r.measure
        if r.error or m is None:
            lines.append(
                f"| {r.tool} | {r.docs:,} | {_f(m.wall if m else None, 1)} | - | - | - | - | - | - "
                "| - | - | - | - | - | - |"
            )
            continue
        rel_wall = m.wall / ref.measure.wall if ref and ref.measure else None
        rel_cpu = m.cpu / ref.measure.cpu if ref and ref.measure and ref.measure.cpu else None
        sc = r.scores
        lines.append(
            f"| {r.tool} | {r.docs:,} | {m.wall:.1f} | {r.docs / m.wall:,.0f} | {m.cpu:.1f} "
            f"| {m.cpu / m.wall:.2f} | {_f(rel_wall, 2)} | {_f(rel_cpu, 2)} | {m.peak_mb:,.0f} "
            f"| {sc['precision']:.4f} | {sc['recall']:.4f} "
            f"| {sc['f1']:.4f} | {sc['ari']:.4f} | {r.clusters:,} | {r.largest} |"
        )
    summary = _summary(rows)
    if summary:
        lines += ["", summary]
    lines += id_stage_ratios(rows)
    lines += ["", "Notes per tool:", ""]
    for r in rows:
        text = r.error or r.notes
        if r.counts:
            text += "; " + ", ".join(f"{k} {v:,}" for k, v in r.counts.items() if isinstance(v, int))
        if len(r.repeats) > 1:
            text += "; runs (wall/CPU s): " + ", ".join(f"{m.wall:.1f}/{m.cpu:.1f}" for m in r.repeats)
        lines.append(f"- **{r.tool}**: {text}")
    for r in rows:
        if r.stages and r.measure and not r.error:
            timed = r.stages.get("total", sum(r.stages.values()))
            stages = {**r.stages, "outside timers": r.measure.wall - timed}
            lines += [
                "",
                f"{r.tool} seconds per stage (the tool's own timers; 'outside timers' = wall s minus their "
                "total: interpreter and JVM start, imports, publishing):",
                "",
                "| " + " | ".join(stages) + " |",
                "|" + "---:|" * len(stages),
                "| " + " | ".join(f"{v:.1f}" for v in stages.values()) + " |",
                "",
                f"{r.tool} peak memory: Python driver {r.measure.driver_mb:,.0f} MB, "
                f"JVM (Spark driver and, in local mode, its executor) {r.measure.jvm_mb:,.0f} MB, "
                f"whole process tree {r.measure.peak_mb:,.0f} MB.",
            ]
    lines += [
        "",
        f"Ground truth on `{name}`: {truth.similar_pairs:,} similar pairs, "
        f"{truth.duplicate_clusters:,} components of 2+ documents (largest {truth.largest}), "
        f"{truth.true_pairs:,} true pairs. Cross-cluster check (premise of the exact truth): "
        f"an exact all-pairs join at Jaccard >= 0.5 on {truth.sample_docs:,} sampled documents "
        f"found {truth.sample_within_pairs:,} pairs inside planted clusters and "
        f"{truth.sample_cross_pairs} across them (largest cross-cluster Jaccard among candidates "
        f"{truth.sample_max_cross_jaccard:.3f}).",
        "",
    ]
    return lines


def render_footer(args: argparse.Namespace, env: dict[str, str], extra: list[str]) -> list[str]:
    """Definitions, machine and command: shared by every corpus of the run."""
    return [
        "## Definitions",
        "",
        f"- Parameters, every tool: word 5-grams, {args.num_perm} permutations, threshold {args.threshold}, "
        f"LSH {args.bands} bands x {args.rows} rows "
        "(as neardup's configuration derives them) "
        f"except MLlib ({args.mllib_tables} tables of one hash each: MLlib has no AND side).",
        f"- Ground truth: a true pair is two documents in the same connected component of the graph of pairs "
        f"with exact word-5-gram Jaccard >= {args.threshold} (NFKC, lowercase, whitespace collapsed).",
        "- Predicted pair: two documents in the same predicted cluster. Precision = true predicted pairs / "
        "predicted pairs, recall = true predicted pairs / true pairs, F1 their harmonic mean; ARI = adjusted "
        "Rand index of the two clusterings (1 = identical, 0 = chance). With clusters this small against "
        "the corpus, chance agreement is ~0 and ARI is within 1e-4 of F1.",
        f"- wall s: the tool's process from start to exit (corpus read, JVM start and output written "
        f"included); docs/s = docs / wall s. CPU s: user+system over its process tree; CPU/wall = cores kept "
        f"busy. Peak MB: largest sum of RSS over its process tree, sampled every {SAMPLE_SECONDS} s. "
        "wall / neardup and CPU / neardup are ratios to the `neardup` row of the same corpus in this run.",
        "",
        "## Machine",
        "",
        *[f"- {k}: {v}" for k, v in env.items()],
        *extra,
        "",
        "Command: `" + " ".join(["python", "bench/e2e.py", *sys.argv[1:]]) + "`",
        "",
    ]


# --------------------------------------------------------------------------- main


def expand_tools(names: str) -> list[str]:
    known = {t for group in GROUPS.values() for t in group} | set(NEARDUP_VARIANTS)
    out: list[str] = []
    for name in (n.strip() for n in names.split(",") if n.strip()):
        if name.endswith("-only") and name.removesuffix("-only") in GROUPS:
            out.append(GROUPS[name.removesuffix("-only")][0])  # the group's first alone, without its variants
        elif name in GROUPS:
            out += GROUPS[name]
        elif name in known:
            out.append(name)
        else:
            names_ = sorted(known | set(GROUPS) | {f"{g}-only" for g in GROUPS})
            raise SystemExit(f"e2e: unknown tool {name!r}; known: {', '.join(names_)}")
    return list(dict.fromkeys(out))


def neardup_bands(args: argparse.Namespace) -> tuple[int, int]:
    """The bands x rows neardup derives for this threshold and num_perm (with --neardup-set),
    which every peer is given too."""
    sets = [f"lsh.threshold={args.threshold}", f"minhash.num_perm={args.num_perm}", *args.neardup_set]
    cfg = neardup_config.load(sets=sets)
    return cfg.bands, cfg.rows


def corpus_stats(corpus: Corpus) -> dict[str, float]:
    """Length statistics of the corpus's texts (cached beside it): what to compare with a
    user's corpus, since every peer's cost is per word."""
    path = corpus.path.parent / "stats.json"
    if path.exists():
        return {k: float(v) for k, v in json.loads(path.read_text()).items()}
    nbytes, nwords = [], []
    for batch in pq.ParquetFile(corpus.path).iter_batches(columns=["text"]):
        text = batch.column(0)
        nbytes.append(np.asarray(pc.binary_length(text)))
        nwords.append(np.asarray(pc.list_value_length(pc.utf8_split_whitespace(text))))
    b, w = np.concatenate(nbytes), np.concatenate(nwords)
    stats = {
        "mean_bytes": float(b.mean()),
        "median_bytes": float(np.median(b)),
        "p99_bytes": float(np.percentile(b, 99)),
        "max_bytes": float(b.max()),
        "words_per_doc": float(w.mean()),
        "bytes_per_word": float(b.sum() / w.sum()),
    }
    path.write_text(json.dumps(stats, indent=1) + "\n")
    return stats


def truth_path(corpus: Path, threshold: float, sample: int) -> Path:
    """Where a corpus file's ground truth is kept, beside it."""
    return corpus.parent / f"truth-t{threshold}-s{sample}.npz"


def cached_truth(corpus: Corpus, threshold: float, sample: int) -> tuple[Truth, str]:
    """The corpus's ground truth, computed once and kept beside it; and "reused" or "computed"."""
    saved = truth_path(corpus.path, threshold, sample)
    if saved.exists():
        z = np.load(saved)
        return Truth(labels=z["labels"], **json.loads(str(z["meta"]))), "reused"
    table = pq.read_table(corpus.path, columns=["text", "cluster"])
    # 64-bit offsets: the truth takes rows across chunks, which overflows 32-bit string
    # offsets past 2 GiB of text (a million `realistic` documents are 2.35 GB).
    table = table.set_column(0, "text", table.column("text").cast(pa.large_string()))
    truth = ground_truth(table, threshold, sample=sample)
    del table
    meta = {k: v for k, v in truth.__dict__.items() if k != "labels"}
    np.savez(saved, labels=truth.labels, meta=json.dumps(meta))
    return truth, "computed"


def run_tool(tool: str, corpus: Corpus, truth: Truth, args: argparse.Namespace) -> Row:
    """One tool on one corpus, best of --repeat runs, scored against the truth."""
    if tool == "mllib" and args.docs > args.mllib_max_docs:
        return Row(
            tool, args.docs, error=f"skipped: {args.docs:,} docs > --mllib-max-docs {args.mllib_max_docs:,}"
        )
    ids = ID_TYPES[corpus.path.name]
    label = tool if ids == "int" else f"{tool} ({ids} ids)"
    work = Path(args.cache) / corpus.key / "runs" / label.replace(" ", "-").replace("(", "").replace(")", "")
    runner = run_neardup if tool.startswith("neardup") else run_peer
    print(f"running {label} ...", end=" ", flush=True)
    best: tuple[Row, np.ndarray | None] | None = None
    runs: list[Measure] = []
    for _ in range(args.repeat):
        shutil.rmtree(work, ignore_errors=True)  # also neardup's staging (resumable work) inside
        work.mkdir(parents=True)
        row, labels = runner(tool, corpus, work, args)
        row.tool = label
        if row.measure:
            runs.append(row.measure)
        # Best of the repeats by wall time: the least disturbed by other work on the machine.
        if best is None or (not row.error and (best[0].error or _wall(row) < _wall(best[0]))):
            best = (row, labels)
        if row.error:
            break
    assert best is not None
    row, labels = best
    row.repeats = sorted(runs, key=lambda m: m.wall)
    if labels is not None:
        sc = score(labels, truth.labels)
        row.scores = {"precision": sc.precision, "recall": sc.recall, "f1": sc.f1, "ari": sc.ari}
        row.clusters, row.largest = sc.duplicate_clusters, sc.largest
    m = row.measure
    if row.error or m is None:
        print(row.error, flush=True)
    else:
        print(
            f"{m.wall:.1f} s wall, {m.cpu:.1f} s CPU, {m.peak_mb:,.0f} MB; "
            f"P {row.scores['precision']:.4f} R {row.scores['recall']:.4f} ARI {row.scores['ari']:.4f}",
            flush=True,
        )
    return row


# The corpus file of each id type: the generated one (int64 ids), and the same rows with
# string ids shaped like real ones (neardup_testkit/string_ids.py: URLs, hashes, paths).
ID_FILES = {"int": "corpus.parquet", "string": "corpus-string-ids.parquet"}
ID_TYPES = {v: k for k, v in ID_FILES.items()}


def with_ids(corpus: Corpus, ids: str) -> Corpus:
    """`corpus` with ids of type `ids`: the string ids' file made beside it once."""
    path = corpus.path.with_name(ID_FILES[ids])
    if not path.exists():
        tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
        pq.write_table(with_string_ids(pq.read_table(corpus.path)), tmp)
        tmp.rename(path)
    return dataclasses.replace(corpus, path=path)


def id_stage_ratios(rows: list[Row]) -> list[str]:
    """Markdown: each neardup tool's seconds per stage with string ids over int ids."""
    lines: list[str] = []
    # A tool run more than once (`--ids int,string,int,string`): its fastest of each stage.
    best: dict[str, dict[str, float]] = {}
    for r in rows:
        if r.stages and r.measure and not r.error:
            seen = best.setdefault(r.tool, {})
            for k, v in {**r.stages, "wall": r.measure.wall}.items():
                seen[k] = min(seen.get(k, v), v)
    for name, mine in best.items():
        base = best.get(name.split(" (")[0])
        if not name.startswith("neardup") or " (" not in name or base is None:
            continue
        stages = [k for k in base if k in mine and k != "wall"]
        ratio = [mine[k] / base[k] if base[k] > 0 else float("nan") for k in stages]
        wall = mine["wall"] / base["wall"]
        lines += [
            "",
            f"{name} / {name.split(' (')[0]}, seconds per stage, fastest of each (ratio; wall {wall:.2f}):",
            "",
            "| " + " | ".join(stages) + " |",
            "|" + "---:|" * len(stages),
            "| " + " | ".join(f"{v:.2f}" for v in ratio) + " |",
        ]
    return lines


def corpus_names(value: str) -> list[str]:
    names = [n.strip() for n in value.split(",") if n.strip()]
    unknown = [n for n in names if n not in CORPORA]
    if not names or unknown:
        raise SystemExit(f"e2e: unknown corpus {', '.join(unknown) or value!r}; known: {', '.join(CORPORA)}")
    return list(dict.fromkeys(names))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--docs", type=int, default=100_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--corpus",
        default="synth",
        help=f"corpora to run every tool on, one after the other, comma-separated: {', '.join(CORPORA)}",
    )
    p.add_argument("--mean-chars", type=int, default=None, help="override the corpora's mean document length")
    p.add_argument("--tools", default="neardup,datasketch,rensa,rensa-mp,datatrove,mllib,floor")
    p.add_argument("--out", default=str(BENCH / "results" / "latest.md"))
    p.add_argument(
        "--cache", default="/tmp/neardup-bench", help="corpora, truth and tool outputs (never committed)"
    )
    p.add_argument("--threshold", type=float, default=0.8)
    p.add_argument("--num-perm", type=int, default=128)
    p.add_argument("--workers", type=int, default=os.cpu_count() or 2, help="cores given to parallel tools")
    p.add_argument("--driver-memory", default="4g", help="Spark driver memory (neardup and MLlib alike)")
    p.add_argument("--mllib-tables", type=int, default=16)
    p.add_argument("--mllib-max-docs", type=int, default=100_000, help="skip MLlib above this corpus size")
    p.add_argument("--timeout", type=float, default=900, help="seconds per tool run before it is killed")
    p.add_argument("--truth-sample", type=int, default=4000, help="documents in the cross-cluster check")
    p.add_argument(
        "--neardup-conf",
        action="append",
        default=[],
        metavar="K=V",
        help="extra Spark setting for the neardup runs, e.g. spark.eventLog.enabled=true to profile",
    )
    p.add_argument(
        "--neardup-set",
        action="append",
        default=[],
        metavar="K=V",
        help="extra neardup config for its runs (after each variant's own), e.g. lsh.recall=0.99",
    )
    p.add_argument("--repeat", type=int, default=1, help="runs per tool; the table shows the fastest")
    p.add_argument(
        "--ids",
        default="int",
        help="id types, comma-separated: int (the corpus's int64 ids), string (the same rows with "
        "ids like URLs, hashes and paths); the neardup tools run on each, the peers on int ids",
    )
    args = p.parse_args()
    args.bands, args.rows = neardup_bands(args)
    tools = expand_tools(args.tools)
    names = corpus_names(args.corpus)
    id_types = [t.strip() for t in args.ids.split(",") if t.strip()]
    if not id_types or any(t not in ID_FILES for t in id_types):
        raise SystemExit(f"e2e: --ids takes {', '.join(ID_FILES)}, comma-separated; not {args.ids!r}")

    env = machine()
    load_before = os.getloadavg()
    out_path = Path(args.out)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    done: list[str] = []  # Markdown of the corpora finished
    for name in names:
        fields = {**CORPORA[name], **({"mean_chars": args.mean_chars} if args.mean_chars else {})}
        spec = CorpusSpec(num_docs=args.docs, seed=args.seed, **fields)
        t0 = time.perf_counter()
        corpus, reused = ensure_corpus(spec, Path(args.cache), num_shards=args.workers)
        print(
            f"corpus {name}: {corpus.path} ({'reused' if reused else 'generated'}, "
            f"{time.perf_counter() - t0:.1f} s)",
            flush=True,
        )
        stats = corpus_stats(corpus)
        t0 = time.perf_counter()
        truth, how = cached_truth(corpus, args.threshold, args.truth_sample)
        print(
            f"ground truth {how} in {time.perf_counter() - t0:.1f} s: {truth.similar_pairs:,} similar pairs, "
            f"{truth.true_pairs:,} true pairs; cross-cluster check: {truth.sample_cross_pairs} of "
            f"{truth.sample_within_pairs + truth.sample_cross_pairs} similar pairs "
            f"in a {truth.sample_docs}-doc sample",
            flush=True,
        )
        print(f"bands x rows = {args.bands} x {args.rows}; tools: {', '.join(tools)}", flush=True)
        rows: list[Row] = []
        for tool in tools:
            for ids in id_types if tool.startswith("neardup") else ["int"]:
                rows.append(run_tool(tool, with_ids(corpus, ids), truth, args))
            # Written after every tool: an interrupted run still leaves what it measured.
            extra = [f"- load average (1/5/15 min) at start: {' / '.join(f'{x:.2f}' for x in load_before)}"]
            section = render_corpus(rows, name, spec, stats, truth, args)
            out_path.write_text("\n".join([*done, *section, *render_footer(args, env, extra)]))
        done += render_corpus(rows, name, spec, stats, truth, args)

    extra = [
        f"- load average (1/5/15 min) at start: {' / '.join(f'{x:.2f}' for x in load_before)}, "
        f"at end: {' / '.join(f'{x:.2f}' for x in os.getloadavg())} (other work shares this machine)",
    ]
    text = "\n".join([*done, *render_footer(args, env, extra)])
    out_path.write_text(text)
    print()
    print(text)


if __name__ == "__main__":
    main()
