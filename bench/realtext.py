"""The over-merge guard on real text: the licences, copyright notices and package
descriptions already on this machine, with exact ground truth.

    python -m bench realtext [--threshold 0.8] [--out bench/results/realtext.md]

Documents (neardup_testkit.realtext): every /usr/share/doc/*/copyright, every LICENSE*,
LICENCE*, COPYING* and README* file, and every *.dist-info/METADATA (a package's
description, often its README) under /usr, /opt, /root and the running Python's
environment (sys.prefix: the test venv). Real text with real near-duplicates: the same
licence with another copyright line, one package's description across versions, Debian
copyright files that quote the same licences. tests/spark/test_realtext.py checks a
corpus of the same kind in CI.

Ground truth: neardup_testkit.reference (exact Jaccard of word 5-grams over all similar
pairs, plain Python): its clusters at the threshold are the labels. Recall at J >= 0.9 is
the share of the pairs at exact Jaccard 0.9 or more whose two documents end in one
cluster of clusters/: near-identical documents that a run must never split, whatever
their buckets hold (licence files sharing a bucket with long files that quote them). The
job runs with the guard on (the default) and off; `neardup evaluate` scores each output
against the labels, and without labels (every removed document scored against its kept
one). Which files a machine has varies: the corpus's size and digest are printed with the
figures.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "testkit"))

from neardup_testkit import realtext  # noqa: E402
from neardup_testkit.reference import reference_clusters, similar_pairs  # noqa: E402


def build(path: Path, roots: list[Path]) -> tuple[pa.Table, str]:
    texts, paths = realtext.read(realtext.collect(roots))
    table = pa.table({"id": pa.array(range(len(texts)), pa.int64()), "text": texts, "path": paths})
    pq.write_table(table, path)
    return table, realtext.digest(texts)


def pair_recall(out: Path, close: dict[tuple[int, int], float]) -> tuple[float, int]:
    """(the share of `close` pairs in one cluster of out/clusters/, how many split pairs have
    both documents kept)."""
    clusters = pq.read_table(out / "clusters", columns=["id", "cluster_id", "kept"]).to_pydict()
    cluster = dict(zip(clusters["id"], clusters["cluster_id"], strict=True))
    kept = dict(zip(clusters["id"], clusters["kept"], strict=True))
    split = [(a, b) for a, b in close if cluster[a] != cluster[b]]
    both = sum(1 for a, b in split if kept[a] and kept[b])
    return (1 - len(split) / len(close) if close else 1.0), both


def neardup(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    proc = subprocess.run([sys.executable, "-m", "neardup", *args], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        sys.exit(f"benchmark: neardup {' '.join(args)} failed:\n{proc.stderr[-3000:]}")
    return proc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threshold", type=float, default=0.8)
    ap.add_argument("--work", default="/tmp/neardup-realtext")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "realtext.md"))
    args = ap.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    roots = [Path("/usr"), Path("/opt"), Path("/root"), Path(sys.prefix)]
    table, digest = build(work / "corpus.parquet", [r for r in roots if r.is_dir()])
    ids, texts = table["id"].to_pylist(), table["text"].to_pylist()
    print(f"corpus: {len(ids):,} documents, {sum(map(len, texts)) / 1e6:.1f} M characters, digest {digest}")
    started = time.time()
    truth = reference_clusters(ids, texts, args.threshold)
    close = similar_pairs(ids, texts, 0.9)
    print(f"ground truth in {time.time() - started:.0f} s: {len(close):,} pairs at J >= 0.9")
    labels = work / "labels.parquet"
    pq.write_table(pa.table({"id": list(truth), "cluster": [str(c) for c in truth.values()]}), labels)

    rows = []
    for name, sets in (("on", []), ("off", ["--set", "guard.enabled=false"])):
        out = work / f"out-{name}"
        t0 = time.time()
        neardup(
            "dedup",
            "--input",
            str(work / "corpus.parquet"),
            "--output",
            str(out),
            "--overwrite",
            "--set",
            f"lsh.threshold={args.threshold}",
            *sets,
            "--quiet",
        )
        wall = time.time() - t0
        report = json.loads((out / "report.json").read_text())
        labeled = json.loads(
            neardup("evaluate", "--output", str(out), "--labels", str(labels), "--json").stdout
        )
        sampled = json.loads(
            neardup(
                "evaluate",
                "--output",
                str(out),
                "--sample",
                "1000000",
                "--min-similarity",
                f"{args.threshold - 0.1:g}",
                "--json",
            ).stdout
        )
        guard = report["guard"]
        labeled["recall_09"], split_both_kept = pair_recall(out, close)
        rows.append((name, wall, report, labeled, sampled, guard))
        print(
            f"guard {name}: removed {labeled['removed']:,}, removal precision (labels) "
            f"{labeled['removal_precision']:.4f}, J >= {args.threshold - 0.1:g} to kept "
            f"{sampled['removal_precision']:.4f}, F1 {labeled['f1']:.4f}, "
            f"ARI {labeled['adjusted_rand_index']:.4f}, recall at J >= 0.9 {labeled['recall_09']:.4f} "
            f"({split_both_kept:,} split pairs with both kept)"
        )

    lines = [
        f"## The over-merge guard on real text (threshold {args.threshold})",
        "",
        "- command: `python -m bench realtext`",
        f"- corpus: {len(ids):,} files of this machine (licences, copyright notices, package "
        f"descriptions), {sum(map(len, texts)) / 1e6:.1f} M characters, digest {digest}",
        "- labels: the brute-force reference's clusters (exact Jaccard of word 5-grams >= "
        f"{args.threshold}, connected)",
        "",
        "| guard | recall at J >= 0.9 | removed | removal precision (labels) | removed with J >= "
        f"{args.threshold - 0.1:g} to kept | J >= {args.threshold:g} | pair precision | pair recall "
        "| F1 | ARI | clusters split | re-homed | rounds | largest before / after | guard s | wall s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|",
    ]
    for name, wall, _report, lab, smp, g in rows:
        split = f"{g.get('clusters_split', 0):,}"
        largest = f"{g.get('largest_cluster_before', '-')} / {g.get('largest_cluster_after', '-')}"
        lines.append(
            f"| {name} | {lab['recall_09']:.4f} | {lab['removed']:,} | {lab['removal_precision']:.4f} "
            f"| {smp['removal_precision']:.4f} | {smp['at_or_above_threshold']:.4f} "
            f"| {lab['precision']:.4f} | {lab['recall']:.4f} | {lab['f1']:.4f} "
            f"| {lab['adjusted_rand_index']:.4f} | {split} | {g.get('documents_rehomed', 0):,} "
            f"| {g.get('rounds', 1)} | {largest} | {g.get('seconds', 0):.1f} | {wall:.1f} |"
        )
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT)
    lines += [
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores; Python {platform.python_version()}; "
        f"commit {commit.stdout.strip()}; {time.strftime('%Y-%m-%d')}.",
    ]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
