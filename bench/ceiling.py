#!/usr/bin/env python3
"""Memory ceilings: the largest corpus each tool finishes on this machine's memory.

    .venv/bin/python -m bench ceiling [--docs 200000,1000000]
                                      [--tools neardup-only,rensa-only,rensa-mp-only,datasketch-only]
                                      [--out bench/results/ceiling.md]

Runs every tool of e2e.py on the `synth` corpus at each size of --docs (the same runner,
parameters, corpus cache and ground truth as `python -m bench`), and takes each run's peak
resident memory over its whole process tree. A tool that fails at a size has its ceiling
measured there. Otherwise it is estimated from the growth per document between the two
largest sizes: the corpus at which the straight line through those two peaks reaches the
machine's memory (MemTotal). neardup's larger runs of `python -m bench scale` (the same
corpus generator, bench/results/scale.json) join its points, since its peak is the JVM heap
filling up to spark.driver.memory long before the corpus bounds it. A tool whose peak grows
by less than 1 KB a document between its two largest sizes holds no per-document state in
memory (it spills to disk): its ceiling is not its memory, and the table says so.
"""

from __future__ import annotations

import sys
from pathlib import Path

# The corpus generator lives in testkit/, which the wheel does not ship.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "testkit"))

import argparse
import json
import os

from e2e import CORPORA, cached_truth, expand_tools, machine, neardup_bands, run_tool
from neardup_testkit.synth import CorpusSpec
from neardup_testkit.truth import ensure_corpus

BENCH = Path(__file__).resolve().parent
FLAT_BYTES_PER_DOC = 1024  # below this growth a tool's memory does not bound its corpus


def memory_total_mb() -> float:
    """MemTotal of /proc/meminfo, in MB."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024 / 1e6
    raise SystemExit("ceiling: no MemTotal in /proc/meminfo")


def ceiling(points: list[tuple[int, float]], memory_mb: float) -> tuple[float | None, float | None]:
    """(docs, peak MB) at each size, smallest first -> (growth in bytes per document between
    the two largest sizes, the documents at which the line through them reaches
    `memory_mb`; None where the growth is below FLAT_BYTES_PER_DOC)."""
    if len(points) < 2:
        return None, None
    (n1, m1), (n2, m2) = points[-2], points[-1]
    per_doc = (m2 - m1) * 1e6 / (n2 - n1)
    if per_doc < FLAT_BYTES_PER_DOC:
        return per_doc, None
    return per_doc, n2 + (memory_mb - m2) * 1e6 / per_doc


def scale_points(above: int) -> dict[int, float]:
    """neardup's peaks (docs -> MB) from `python -m bench scale`'s runs larger than `above`."""
    path = BENCH / "results" / "scale.json"
    if not path.exists():
        return {}
    runs = json.loads(path.read_text())
    return {int(n): float(r["measure"]["peak_mb"]) for n, r in runs.items() if int(n) > above}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--docs", default="200000,1000000", help="corpus sizes, comma-separated, smallest first")
    p.add_argument("--tools", default="neardup-only,rensa-only,rensa-mp-only,datasketch-only")
    p.add_argument("--out", default=str(BENCH / "results" / "ceiling.md"))
    p.add_argument("--json", default=str(BENCH / "results" / "ceiling.json"), help="the peaks measured")
    p.add_argument("--render", action="store_true", help="no run: the table again from --json")
    p.add_argument("--cache", default="/tmp/neardup-bench")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    p.add_argument("--driver-memory", default="4g")
    p.add_argument("--timeout", type=float, default=1800)
    args = p.parse_args()
    sizes = sorted(int(x) for x in args.docs.split(","))
    tools = expand_tools(args.tools)
    # The e2e runner's settings, as `python -m bench` has them by default.
    args.seed, args.threshold, args.num_perm, args.repeat = 0, 0.8, 128, 1
    args.mllib_tables, args.mllib_max_docs, args.truth_sample = 16, 100_000, 4000
    args.neardup_conf, args.neardup_set = [], []
    args.bands, args.rows = neardup_bands(args)
    memory_mb = memory_total_mb()

    # tool -> [(docs, peak MB or None where it failed, the error)]
    got: dict[str, list[tuple[int, float | None, str]]] = {t: [] for t in tools}
    if args.render:
        got = {
            t: [(int(n), mb, err) for n, mb, err in v]
            for t, v in json.loads(Path(args.json).read_text()).items()
        }
    else:
        for n in sizes:
            args.docs = n
            spec = CorpusSpec(num_docs=n, seed=args.seed, **CORPORA["synth"])
            corpus, _ = ensure_corpus(spec, Path(args.cache), num_shards=args.workers)
            truth, _ = cached_truth(corpus, args.threshold, args.truth_sample)
            for tool in tools:
                if got[tool] and got[tool][-1][1] is None:
                    continue  # failed at a smaller size: its ceiling is measured
                print(f"{n:,} documents: ", end="")
                row = run_tool(tool, corpus, truth, args)
                ok = row.measure is not None and not row.error
                got[tool].append((n, row.measure.peak_mb if ok and row.measure else None, row.error or ""))
                Path(args.json).write_text(json.dumps(got, indent=1))

    lines = [
        "# Memory ceilings: the largest corpus each tool finishes",
        "",
        f"Command: `python -m bench ceiling --docs {','.join(map(str, sizes))} "
        f"--tools {args.tools}`; corpus `synth` (e2e.py), word 5-grams, 128 permutations, threshold 0.8.",
        f"Memory: {memory_mb:,.0f} MB (MemTotal). Peak: the largest sum of resident memory over the "
        "tool's process tree (its JVM and Python workers included), sampled every 0.2 s.",
        "",
        "| tool | " + " | ".join(f"peak MB at {n:,}" for n in sizes) + " | larger runs | growth per document "
        "| largest corpus on this machine |",
        "|---|" + "---:|" * (len(sizes) + 3),
    ]
    for tool, runs in got.items():
        cells = [f"{mb:,.0f}" if mb is not None else "failed" for _, mb, _ in runs]
        cells += ["-"] * (len(sizes) - len(cells))
        failed = next(((n, err) for n, mb, err in runs if mb is None), None)
        more = scale_points(sizes[-1]) if tool == "neardup" else {}
        larger = ", ".join(f"{mb:,.0f} at {n:,} (scale)" for n, mb in sorted(more.items())) or "-"
        if failed is not None:
            growth, largest = "-", f"fails at {failed[0]:,} ({failed[1]})"
        else:
            points = sorted({**{n: mb for n, mb, _ in runs if mb is not None}, **more}.items())
            per_doc, docs = ceiling(points, memory_mb)
            growth = f"{per_doc / 1e3:,.1f} KB" if per_doc is not None else "-"
            if docs is None:
                largest = "not bounded by its memory (flat)" if per_doc is not None else "-"
            else:
                largest = f"~{docs / 1e6:,.1f}M documents (estimated)"
        lines.append(f"| {tool} | " + " | ".join(cells) + f" | {larger} | {growth} | {largest} |")
    env = machine()
    lines += ["", "## Machine", "", *[f"- {k}: {v}" for k, v in env.items()]]
    text = "\n".join(lines) + "\n"
    Path(args.out).write_text(text)
    print()
    print(text)


if __name__ == "__main__":
    main()
