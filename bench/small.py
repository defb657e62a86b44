#!/usr/bin/env python3
"""Small runs: what a run of the README's sample costs beyond starting Spark at all.

    .venv/bin/python jobs/benchmark.py small [--repeat 5] [--out bench/results/small-runs.md]

Each repetition runs, one after the other in fresh processes, (1) a bare local
SparkSession start plus a count (`spark.range(1000).count()`, then stop: what any
PySpark program pays) and (2) the README's first command on the sample
(`neardup dedup --input data/sample/corpus.jsonl.gz --output OUT --overwrite`), and
takes the wall time of each process. The machine is shared and noisy, so the figure is
the ratio of the two within the same run: the median sample wall over the median bare
start, with each repetition's own ratio beside it.

Then one more in-process run of the sample (`local[2]`) counts the Spark jobs and
stages of each neardup stage (its job group, runtime/jobgroups.py) with the status
tracker: each job and each shuffle stage has a fixed cost, which is what a small run
is made of.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
SAMPLE = ROOT / "data" / "sample" / "corpus.jsonl.gz"
PYTHON = sys.executable
README_RUN = ("dedup", "--input", str(SAMPLE), "--output")  # the README's first command, + OUT

BARE = (
    "from pyspark.sql import SparkSession\n"
    "spark = SparkSession.builder.master('local[*]').appName('bare').getOrCreate()\n"
    "assert spark.range(1000).count() == 1000\n"
    "spark.stop()\n"
)


def _env() -> dict[str, str]:
    # Workers run this interpreter; neardup's own lib/ first, as in a source checkout.
    path = os.pathsep.join([str(ROOT / "lib"), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return {**os.environ, "PYSPARK_PYTHON": PYTHON, "PYTHONPATH": path}


def timed(cmd: list[str], log: Path) -> float:
    """Wall seconds of one process, start to exit; its output goes to `log`."""
    with open(log, "wb") as out:
        start = time.perf_counter()
        proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, env=_env(), check=False)
        wall = time.perf_counter() - start
    if proc.returncode != 0:
        tail = log.read_text(errors="replace")[-2000:]
        raise SystemExit(f"small: {' '.join(cmd[:4])} ... exited {proc.returncode}:\n{tail}")
    return wall


def count_jobs(output: str) -> dict[str, Any]:
    """In this process: one run of the sample in local[2]; Spark jobs, stages and seconds per
    neardup stage, from the status tracker and report.json."""
    from neardup import config, pipeline
    from neardup.runtime.jobgroups import group_id
    from neardup.runtime.session import start

    cfg = config.load(sets=["output.overwrite=true"])
    spark = start("local[2]", cfg.spark, quiet_jvm=True).spark
    result = pipeline.run(spark, cfg, str(SAMPLE), output)
    tracker = spark.sparkContext.statusTracker()
    stages: dict[str, Any] = {}
    for name, seconds in result.report["seconds"].items():
        if name == "total":
            continue
        jobs = tracker.getJobIdsForGroup(group_id(result.report["run_id"], name))
        infos = [info for info in (tracker.getJobInfo(j) for j in jobs) if info is not None]
        stages[name] = {
            "jobs": len(jobs),
            "stages": sum(len(info.stageIds) for info in infos),
            "seconds": seconds,
        }
    spark.stop()
    return {"stages": stages, "total": result.report["seconds"]["total"]}


def _median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def render(walls: list[tuple[float, float]], jobs: dict[str, Any], stage_secs: list[dict[str, float]]) -> str:
    from e2e import machine  # the same machine description as the other benchmarks

    bare = [b for b, _ in walls]
    run = [s for _, s in walls]
    ratio = _median(run) / _median(bare)
    lines = [
        "# Small runs: the sample against a bare Spark start",
        "",
        "- command: `" + " ".join(["python", "jobs/benchmark.py", "small", *sys.argv[1:]]) + "`",
        "- sample: `neardup dedup --input data/sample/corpus.jsonl.gz --output OUT --overwrite` "
        "(3,000 documents, local[*])",
        "- bare: a Python process that starts a local[*] SparkSession, counts `spark.range(1000)` and stops",
        f"- **median sample wall / median bare start: {ratio:.2f}** "
        f"({_median(run):.1f} s / {_median(bare):.1f} s over {len(walls)} repetitions)",
        "",
        "| repetition | bare start s | sample s | ratio |",
        "|---:|---:|---:|---:|",
        *(f"| {i + 1} | {b:.1f} | {s:.1f} | {s / b:.2f} |" for i, (b, s) in enumerate(walls)),
        f"| median | {_median(bare):.1f} | {_median(run):.1f} | {_median([s / b for b, s in walls]):.2f} |",
        "",
        "Seconds per neardup stage in the sample runs (report.json, median over the repetitions):",
        "",
    ]
    names = list(stage_secs[0]) if stage_secs else []
    lines += [
        "| " + " | ".join(names) + " |",
        "|" + "---:|" * len(names),
        "| " + " | ".join(f"{_median([s.get(n, 0.0) for s in stage_secs]):.1f}" for n in names) + " |",
        "",
        "Spark jobs and stages per neardup stage (one more run of the sample, in process, local[2]):",
        "",
        "| stage | jobs | stages | seconds |",
        "|---|---:|---:|---:|",
    ]
    per = jobs["stages"]
    lines += [f"| {n} | {v['jobs']} | {v['stages']} | {v['seconds']:.1f} |" for n, v in per.items()]
    lines += [
        f"| total | {sum(v['jobs'] for v in per.values())} | {sum(v['stages'] for v in per.values())} "
        f"| {jobs['total']:.1f} |",
        "",
        "## Machine",
        "",
        *[f"- {k}: {v}" for k, v in machine().items()],
        f"- load average (1/5/15 min) at end: {' / '.join(f'{x:.2f}' for x in os.getloadavg())} "
        "(other work shares this machine: compare the ratio, not the seconds)",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=5, help="repetitions of (bare start, sample run)")
    p.add_argument("--out", default=str(BENCH / "results" / "small-runs.md"))
    p.add_argument("--count-jobs", metavar="OUTPUT", help=argparse.SUPPRESS)  # the in-process run
    args = p.parse_args()
    if args.count_jobs:
        print(json.dumps(count_jobs(args.count_jobs)))
        return
    if args.repeat < 1:
        raise SystemExit("small: --repeat must be at least 1")
    work = Path(tempfile.mkdtemp(prefix="neardup-small-"))
    try:
        walls: list[tuple[float, float]] = []
        stage_secs: list[dict[str, float]] = []
        out = work / "out"
        for i in range(args.repeat):
            bare = timed([PYTHON, "-c", BARE], work / "bare.log")
            cmd = [PYTHON, "-m", "neardup", *README_RUN, str(out), "--overwrite"]
            run = timed(cmd, work / "sample.log")
            walls.append((bare, run))
            report = json.loads((out / "report.json").read_text())
            stage_secs.append({k: float(v) for k, v in report["seconds"].items()})
            print(
                f"repetition {i + 1}: bare {bare:.1f} s, sample {run:.1f} s, ratio {run / bare:.2f}",
                flush=True,
            )
        counted = subprocess.run(
            [PYTHON, __file__, "--count-jobs", str(work / "counted")],
            capture_output=True,
            text=True,
            env=_env(),
            check=False,
        )
        if counted.returncode != 0:
            raise SystemExit(f"small: the counting run failed:\n{counted.stderr[-2000:]}")
        jobs = json.loads(counted.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    text = render(walls, jobs, stage_secs)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)
    print()
    print(text)


if __name__ == "__main__":
    main()
