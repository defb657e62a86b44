#!/usr/bin/env python3
"""Incremental dedup benchmark: an index of about a million documents, a new batch of --batch
checked against it, the index's size on disk, and what was read from the indexed texts.

    .venv/bin/python -m bench index [--docs 1100000] [--batch 100000] [--repeat 1]

1. Generates (or reuses, under --cache) one corpus of docs + batch documents with
   neardup_testkit.synth (the e2e benchmark's generator and cache: ~2 KB documents, 30 % in
   planted clusters). Its rows are shuffled, so planted clusters straddle the split: the
   first --docs rows are the corpus to index, the last --batch rows the new batch, which
   holds near-duplicates of indexed documents.
2. `neardup dedup` of the first part (about 91 % is kept: 1,100,000 documents give an index
   of about a million), then `neardup index build` of its kept/ (the index's size on disk
   against the band keys' raw size: 8 bytes a band and 8 an id per document).
3. `neardup dedup` of the batch alone, and `neardup dedup --against` the index, each in its
   own process on local[2] (--repeat N: alternately, the fastest of each kept). Their wall
   times and the ratio.
4. From the --against run's Spark event log (SQL metrics of its physical plans): the rows
   read from the indexed texts' files, and how many of them the semi-join on the candidate
   ids let through, against the indexed documents among the candidates (report.json).
Writes the results to --out (bench/results/index.md) with the command, commit and machine.
"""

from __future__ import annotations

import sys
from pathlib import Path

# The corpus generator lives in testkit/, which the wheel does not ship.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "testkit"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import argparse
import json
import os
import shutil
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from e2e import PYTHON, Measure, machine, run_measured
from eventlog import app_log, events
from neardup.runtime.memory import human
from neardup_testkit.synth import CorpusSpec
from neardup_testkit.truth import ensure_corpus

BENCH = Path(__file__).resolve().parent


def split(corpus: Path, root: Path, docs: int, batch: int, shards: int) -> tuple[Path, Path]:
    """The first `docs` rows (in `shards` files) and the last `batch` rows, cached."""
    indexed, new = root / f"indexed-{docs}", root / f"batch-{batch}"
    if indexed.exists() and new.exists():
        return indexed, new
    table = pq.read_table(corpus)
    for path, part, n in ((indexed, table.slice(0, docs), shards), (new, table.slice(docs, batch), 2)):
        tmp = path.with_name(path.name + f".tmp{os.getpid()}")
        tmp.mkdir(parents=True)
        bounds = np.linspace(0, len(part), n + 1).astype(np.int64)
        for i in range(n):
            pq.write_table(
                part.slice(int(bounds[i]), int(bounds[i + 1] - bounds[i])), tmp / f"{i:05d}.parquet"
            )
        shutil.rmtree(path, ignore_errors=True)
        tmp.rename(path)
    return indexed, new


def neardup(args: argparse.Namespace, *words: str, log: Path, conf: tuple[str, ...] = ()) -> Measure:
    cmd = [
        PYTHON,
        "-m",
        "neardup",
        *words,
        "--master",
        "local[2]",
        "--conf",
        f"spark.driver.memory={args.driver_memory}",
        *(x for kv in conf for x in ("--conf", kv)),
    ]
    m = run_measured(cmd, log, args.timeout)
    if m.returncode != 0:
        sys.exit(f"{' '.join(words[:2])} failed ({m.returncode}); see {log}:\n{log.read_text()[-3000:]}")
    return m


def disk_bytes(path: Path) -> tuple[int, int]:
    """(Parquet and manifest bytes, every file's bytes: Hadoop's local .crc files too)."""
    data = every = 0
    for f in path.rglob("*"):
        if f.is_file():
            size = f.stat().st_size
            every += size
            if not f.name.startswith("."):
                data += size
    return data, every


@dataclass
class ScanFigures:
    scans: int  # scan nodes over the files
    rows_scanned: int  # their "number of output rows"
    files_bytes: int  # their "size of files read"
    rows_kept: int  # rows out of the left-semi joins right above them


def texts_read(log_dir: Path, location: str) -> ScanFigures:
    """Sum SQL metrics over the physical plans (initial and adaptive) of every query: the
    scan nodes whose location is under `location`, and the left-semi joins above them.
    Each metric is an accumulator; counted once, whatever plan versions repeat it."""
    plans: list[dict[str, Any]] = []
    totals: dict[int, int] = defaultdict(int)
    for e in events(app_log(log_dir)):
        kind = e.get("Event", "")
        if kind.endswith("SQLExecutionStart") or kind.endswith("SQLAdaptiveExecutionUpdate"):
            plans.append(e["sparkPlanInfo"])
        elif kind == "SparkListenerTaskEnd":
            for acc in (e.get("Task Info") or {}).get("Accumulables", []):
                if isinstance(acc.get("Update"), int | str) and str(acc.get("Update")).lstrip("-").isdigit():
                    totals[int(acc["ID"])] += int(acc["Update"])
        elif kind.endswith("DriverAccumUpdates"):
            for acc_id, value in e.get("accumUpdates", []):
                totals[int(acc_id)] += int(value)
    scans: dict[int, tuple[int, int]] = {}  # output-rows accumulator -> (rows, file bytes)
    kept: dict[int, int] = {}

    def metric(node: dict[str, Any], name: str) -> int | None:
        return next((int(m["accumulatorId"]) for m in node.get("metrics", []) if m["name"] == name), None)

    def walk(node: dict[str, Any], semi_above: list[dict[str, Any]]) -> None:
        name = node.get("nodeName", "")
        if name.startswith("Scan ") and location in json.dumps(node.get("metadata", {})):
            rows, size = metric(node, "number of output rows"), metric(node, "size of files read")
            if rows is not None:
                scans[rows] = (totals.get(rows, 0), totals.get(size, 0) if size is not None else 0)
            for join in semi_above[-1:]:
                acc = metric(join, "number of output rows")
                if acc is not None:
                    kept[acc] = totals.get(acc, 0)
        is_semi = "Join" in name and "LeftSemi" in node.get("simpleString", "")
        for child in node.get("children", []):
            walk(child, [*semi_above, node] if is_semi else semi_above)

    for plan in plans:
        walk(plan, [])
    return ScanFigures(
        len(scans), sum(r for r, _ in scans.values()), sum(b for _, b in scans.values()), sum(kept.values())
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--docs", type=int, default=1_100_000, help="documents deduplicated, then indexed")
    p.add_argument("--batch", type=int, default=100_000, help="documents in the new batch")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cache", default="/tmp/neardup-bench", help="corpora and outputs (never committed)")
    p.add_argument("--driver-memory", default="4g")
    p.add_argument("--shards", type=int, default=16, help="files of the indexed corpus")
    p.add_argument("--repeat", type=int, default=1, help="runs of each dedup; the fastest is shown")
    p.add_argument("--timeout", type=float, default=3600)
    p.add_argument("--out", default=str(BENCH / "results" / "index.md"))
    args = p.parse_args()
    env = machine()
    spec = CorpusSpec(num_docs=args.docs + args.batch, seed=args.seed)
    t0 = time.perf_counter()
    corpus, reused = ensure_corpus(spec, Path(args.cache), num_shards=2)
    base = corpus.path.parent
    indexed, batch = split(corpus.path, base, args.docs, args.batch, args.shards)
    print(
        f"corpus {base} ({'reused' if reused else 'generated'}, {time.perf_counter() - t0:.1f} s)", flush=True
    )
    work = base / "index-bench"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    index = work / "index"

    first = neardup(
        args, "dedup", "--input", str(indexed), "--output", str(work / "first"), log=work / "first.log"
    )
    kept = work / "first" / "kept"
    built = neardup(
        args, "index", "build", "--input", str(kept), "--index", str(index), log=work / "build.log"
    )
    manifest = json.loads(sorted((index / "_manifest").glob("v*.json"))[-1].read_text())
    n_indexed, bands = manifest["segments"][0]["documents"], manifest["params"]["lsh.bands"]
    raw_keys, raw_ids = n_indexed * bands * 8, n_indexed * 8
    data, every = disk_bytes(index)
    parts = {part: disk_bytes(next((index / "segments").iterdir()) / part)[0] for part in ("keys", "docs")}
    print(
        f"index built in {built.wall:.1f} s: {human(data)} ({data / (raw_keys + raw_ids):.4f} x raw)",
        flush=True,
    )

    # Both with the event log on (the same overhead); the fastest --against run's is read below.
    runs: dict[str, list[Measure]] = {"alone": [], "against": []}
    for k in range(args.repeat):
        for name, extra in (("alone", ()), ("against", ("--against", str(index)))):
            logs = work / f"eventlog-{name}-{k}"
            logs.mkdir()
            events = (
                "spark.eventLog.enabled=true",
                f"spark.eventLog.dir={logs}",
                "spark.eventLog.compress=false",
            )
            words = ("dedup", "--input", str(batch), "--output", str(work / f"{name}-{k}"), *extra)
            runs[name].append(neardup(args, *words, log=work / f"{name}-{k}.log", conf=events))
        print(
            f"batch alone {runs['alone'][-1].wall:.1f} s, against {runs['against'][-1].wall:.1f} s",
            flush=True,
        )
    alone, against = runs["alone"], runs["against"]
    ka, kb = (min(range(args.repeat), key=lambda k: ms[k].wall) for ms in (alone, against))
    a, b = alone[ka], against[kb]
    report = json.loads((work / f"against-{kb}" / "report.json").read_text())
    alone_report = json.loads((work / f"alone-{ka}" / "report.json").read_text())
    texts = texts_read(work / f"eventlog-against-{kb}", str(kept))
    keys = texts_read(work / f"eventlog-against-{kb}", str(index / "segments"))
    c = report["counts"]
    raw = raw_keys + raw_ids
    command = f"python -m bench index --docs {args.docs} --batch {args.batch} --repeat {args.repeat}"
    per_doc = {k: v / n_indexed for k, v in {**parts, "data": data, "every": every}.items()}
    lines = [
        f"## Incremental dedup: a batch of {args.batch:,} against an index of {n_indexed:,} documents",
        "",
        f"- command: `{command}`",
        f"- corpus: `CorpusSpec(num_docs={spec.num_docs}, seed={args.seed})` (synth: ~2 KB documents, "
        f"30 % in planted clusters), rows shuffled; the first {args.docs:,} deduplicated "
        f"({first.wall:.1f} s) and their kept/ indexed, the last {args.batch:,} the batch",
        f"- local[2], spark.driver.memory={args.driver_memory}; each command in its own process; "
        f"{args.repeat} run(s) of each dedup, the fastest shown",
        "",
        "### The index on disk",
        "",
        "| | bytes | per document |",
        "|---|---:|---:|",
        f"| band keys' raw size ({bands} bands x 8 bytes) | {raw_keys:,} | {raw_keys / n_indexed:.1f} |",
        f"| ids' raw size (8 bytes) | {raw_ids:,} | 8.0 |",
        f"| **raw total** | **{raw:,}** | {raw / n_indexed:.1f} |",
        f"| keys/ (Parquet: band key, document number) | {parts['keys']:,} | {per_doc['keys']:.2f} |",
        f"| docs/ (Parquet: document number, id) | {parts['docs']:,} | {per_doc['docs']:.2f} |",
        f"| **index on disk** (+ manifest) | **{data:,}** | {per_doc['data']:.2f} |",
        f"| with Hadoop's local .crc files | {every:,} | {per_doc['every']:.2f} |",
        "",
        f"On disk / raw: **{data / raw:.4f}** ({every / raw:.4f} with the local file system's checksum "
        f"files, which HDFS and object stores do not have). `index build`: {built.wall:.1f} s.",
        "",
        "### The batch alone and against the index",
        "",
        "| run | wall s | CPU s | peak MB | kept | removed | matched the index |",
        "|---|---:|---:|---:|---:|---:|---:|",
        f"| `dedup` (batch alone) | {a.wall:.1f} | {a.cpu:.1f} | {a.peak_mb:,.0f} | "
        f"{alone_report['counts']['kept']:,} | "
        f"{alone_report['counts']['near_duplicates'] + alone_report['counts']['exact_duplicates']:,} | - |",
        f"| `dedup --against` | {b.wall:.1f} | {b.cpu:.1f} | {b.peak_mb:,.0f} | {c['kept']:,} | "
        f"{c['near_duplicates'] + c['exact_duplicates']:,} | {c['matched_index']:,} |",
        "",
        f"Against the index / alone: **{b.wall / a.wall:.2f}x** wall, {b.cpu / a.cpu:.2f}x CPU. "
        f"All runs: alone {', '.join(f'{m.wall:.1f}' for m in alone)} s; against "
        f"{', '.join(f'{m.wall:.1f}' for m in against)} s.",
        "",
        "Seconds per stage (`--against` run / alone):",
        "",
        "| stage | against | alone |",
        "|---|---:|---:|",
        *(f"| {s} | {v} | {alone_report['seconds'].get(s, '-')} |" for s, v in report["seconds"].items()),
        "",
        "### What was read from the index",
        "",
        f"- band rows scanned: {keys.rows_scanned:,} in {keys.scans} scan(s) of keys/ and docs/ "
        f"({n_indexed * bands:,} band rows and {n_indexed:,} document rows in the index)",
        f"- candidate pairs between batch and index: {report['index']['candidate_pairs']:,}, with "
        f"{report['index']['candidate_documents']:,} indexed documents",
        f"- indexed texts' files: {texts.scans} scan(s), {texts.rows_scanned:,} rows decoded "
        f"(the id and text columns of {human(texts.files_bytes)} of files); "
        f"**{texts.rows_kept:,} rows** left the scans through the left-semi join on the candidate ids "
        f"(= {report['index']['candidate_documents']:,} candidate documents x the scans), "
        "and only those were shuffled, normalized and shingled",
        "",
        f"Machine: {env['cpu']}, {env['memory']}; {env['os']}; Python {env['python']}, "
        f"Spark {env['spark (pyspark)']}; neardup {env['neardup']}; {env['date']}; "
        f"load average before {os.getloadavg()[0]:.1f}.",
    ]
    text = "\n".join(lines)
    Path(args.out).write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
