#!/usr/bin/env python3
"""Small runs: what a run of the README's sample costs beyond starting Spark at all.

    .venv/bin/python -m bench small [--repeat 5] [--before OTHER/lib]
                                             [--out bench/results/small-runs.md]

Each repetition runs, one after the other in fresh processes, (1) a bare local
SparkSession start plus a count (`spark.range(1000).count()`, then stop: what any
PySpark program pays), (2) the floor of any Spark job that writes the sample's kept
corpus (the same start, the sample read and written back as Parquet, nothing
deduplicated) and (3) the README's first command on the sample
(`neardup dedup --input data/sample/corpus.jsonl.gz --output OUT --overwrite`), and
takes the wall and CPU seconds of each process tree (e2e.run_measured). The machine is
shared and noisy, so the figure is the ratio within the same run: the median sample
wall over the median bare start, with each repetition's own ratio beside it.
`--before` runs a second neardup tree (its lib/, e.g. an export of main) in the same
repetitions, just before this one, for a before/after comparison under the same load.

Then one more in-process run of the sample (`local[2]`) per tree counts the Spark jobs
and stages of each neardup stage (its job group, runtime/jobgroups.py) with the status
tracker: each job and each shuffle stage has a fixed cost, which is what a small run
is made of.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from e2e import Measure, machine, run_measured  # the other benchmarks' measuring and machine

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
SAMPLE = ROOT / "data" / "sample" / "corpus.jsonl.gz"
PYTHON = sys.executable
TIMEOUT = 1800  # seconds a process may take before it is killed (a loaded machine is slow)
README_RUN = ("dedup", "--input", str(SAMPLE), "--output")  # the README's first command, + OUT

BARE = (
    "import sys\n"
    "from pyspark.sql import SparkSession\n"
    "builder = SparkSession.builder.master('local[*]').appName('bare')\n"
    "if len(sys.argv) > 1:  # a class archive to map, or no start at all (see ARCHIVE_NOTE)\n"
    "    mapped = f'-XX:SharedArchiveFile={sys.argv[1]} -Xshare:on'\n"
    "    builder = builder.config('spark.driver.extraJavaOptions', mapped)\n"
    "spark = builder.getOrCreate()\n"
    "assert spark.range(1000).count() == 1000\n"
    "spark.stop()\n"
)
# The floor of any Spark job that writes the sample's kept corpus: the bare start, plus the
# sample read (gzipped JSON lines) and written back as Parquet. Nothing is deduplicated.
FLOOR = (
    "import sys\n"
    "from pyspark.sql import SparkSession\n"
    "spark = SparkSession.builder.master('local[*]').appName('floor').getOrCreate()\n"
    "spark.read.json(sys.argv[1]).write.mode('overwrite').parquet(sys.argv[2])\n"
    "spark.stop()\n"
)


ARCHIVE_NOTE = (
    "- bare, archive: the bare start with its JVM mapping the class archive neardup built "
    "(runtime/class_archive.py): what a bare start would take if it kept one too"
)
BUILDER = "neardup.runtime.class_archive"


def prepare(work: Path) -> Path | None:
    """One untimed run of the sample, then a wait for the class archive it may have set
    building (a first run on this machine does), so that the repetitions measure runs that
    find it, as every run after the first does. The archive's path (report.json's), or
    None (none built)."""
    out = work / "prepare"
    timed([PYTHON, "-m", "neardup", *README_RUN, str(out), "--overwrite"], work / "prepare.log", ROOT / "lib")
    for _ in range(600):
        if not any(BUILDER in _cmdline(p) for p in Path("/proc").iterdir() if p.name.isdigit()):
            break
        time.sleep(1.0)
    given = json.loads((out / "report.json").read_text())["spark"].get("class_archive")
    return Path(given["path"]) if given is not None and Path(given["path"]).is_file() else None


def _cmdline(proc: Path) -> str:
    try:
        return (proc / "cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""


def _env(lib: Path) -> dict[str, str]:
    # Workers run this interpreter; the neardup of `lib` first, as in a source checkout.
    path = os.pathsep.join([str(lib), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return {**os.environ, "PYSPARK_PYTHON": PYTHON, "PYTHONPATH": path}


def timed(cmd: list[str], log: Path, lib: Path) -> Measure:
    """Wall and CPU seconds of one process tree (the JVM and Python workers included), start
    to exit; its output goes to `log`."""
    m = run_measured(cmd, log, TIMEOUT, _env(lib))
    if m.returncode != 0:
        tail = log.read_text(errors="replace")[-2000:]
        raise SystemExit(f"small: {' '.join(cmd[:4])} ... exited {m.returncode}:\n{tail}")
    return m


def count_jobs(output: str) -> dict[str, Any]:
    """In this process: one run of the sample in local[2]; Spark jobs, stages and seconds per
    neardup stage, from the status tracker and report.json."""
    from neardup import config
    from neardup.commands import dedup
    from neardup.runtime.jobgroups import group_id
    from neardup.runtime.session import small_local_input, start

    cfg = config.load(sets=["output.overwrite=true"])
    # The session the command line starts for this input (its small-input settings).
    small = small_local_input(str(SAMPLE))
    spark = start("local[2]", cfg.spark, quiet_jvm=True, small_input=small).spark
    result = dedup.run(spark, cfg, str(SAMPLE), output)
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


@dataclass
class Tree:
    """A neardup source tree measured: its label, its lib/, and what was measured of it."""

    label: str
    lib: Path
    runs: list[Measure] = field(default_factory=list)  # the sample, per repetition
    stage_secs: list[dict[str, float]] = field(default_factory=list)  # report.json's, per repetition
    jobs: dict[str, Any] = field(default_factory=dict)  # count_jobs of one more run


def _ratio(runs: list[Measure], bare: list[Measure], what: str) -> float:
    """Median of the runs over median of the bare starts, of wall or CPU seconds."""
    return _median([getattr(m, what) for m in runs]) / _median([getattr(m, what) for m in bare])


def _documents(path: Path) -> int:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return sum(1 for _ in f)


def render(bare: list[Measure], archived: list[Measure], floor: list[Measure], trees: list[Tree]) -> str:
    walls = [m.wall for m in bare]
    with_archive = _median([m.wall for m in archived])
    against_archived = [
        f"- {t.label}: median sample wall / median bare-with-archive wall = "
        f"{_ratio(t.runs, archived, 'wall'):.2f} (bare with the archive: {with_archive:.1f} s)"
        for t in trees
        if archived
    ]
    lines = [
        "# Small runs: the sample against a bare Spark start",
        "",
        "- command: `" + " ".join(["python", "-m", "bench", "small", *sys.argv[1:]]) + "`",
        "- sample: `neardup dedup --input data/sample/corpus.jsonl.gz --output OUT --overwrite` "
        f"({_documents(SAMPLE):,} documents, local[*])",
        "- bare: a Python process that starts a local[*] SparkSession, counts `spark.range(1000)` and stops",
        "- floor: the same start, then the sample read and written back as Parquet (what any Spark job "
        "that writes a kept corpus pays), then stop",
        f"- **floor: median floor wall / median bare wall = {_ratio(floor, bare, 'wall'):.2f}** "
        f"(CPU: {_ratio(floor, bare, 'cpu'):.2f})",
        "- wall: the process from start to exit; CPU: user + system seconds over its process tree "
        "(the JVM and the Python workers included)",
        *(
            f"- **{t.label}: median sample wall / median bare wall = {_ratio(t.runs, bare, 'wall'):.2f}** "
            f"(CPU: {_ratio(t.runs, bare, 'cpu'):.2f}; neardup from {t.lib})"
            for t in trees
        ),
        *([ARCHIVE_NOTE, *against_archived] if archived else ["- no class archive was built: none used"]),
        "",
        "| repetition | bare wall s | bare CPU s | floor wall s | "
        + " | ".join(f"{t.label} wall s | CPU s | wall ratio" for t in trees)
        + " |",
        "|---:|---:|---:|---:|" + "---:|---:|---:|" * len(trees),
    ]
    for i, b in enumerate(bare):
        cells = [f"{t.runs[i].wall:.1f} | {t.runs[i].cpu:.1f} | {t.runs[i].wall / b.wall:.2f}" for t in trees]
        head = f"| {i + 1} | {b.wall:.1f} | {b.cpu:.1f} | {floor[i].wall:.1f} | "
        lines.append(head + " | ".join(cells) + " |")
    medians = [
        f"{_median([m.wall for m in t.runs]):.1f} | {_median([m.cpu for m in t.runs]):.1f} | "
        f"{_median([m.wall / w for m, w in zip(t.runs, walls, strict=True)]):.2f}"
        for t in trees
    ]
    lines.append(
        f"| median | {_median(walls):.1f} | {_median([m.cpu for m in bare]):.1f} | "
        f"{_median([m.wall for m in floor]):.1f} | " + " | ".join(medians) + " |"
    )
    for t in trees:
        names = list(t.stage_secs[0])
        per = t.jobs["stages"]
        lines += [
            "",
            f"## {t.label}",
            "",
            "Seconds per neardup stage in the sample runs (report.json, median over the repetitions):",
            "",
            "| " + " | ".join(names) + " |",
            "|" + "---:|" * len(names),
            "| " + " | ".join(f"{_median([s.get(n, 0.0) for s in t.stage_secs]):.1f}" for n in names) + " |",
            "",
            "Spark jobs and stages per neardup stage (one more run of the sample, in process, local[2]):",
            "",
            "| stage | jobs | stages | seconds |",
            "|---|---:|---:|---:|",
            *(f"| {n} | {v['jobs']} | {v['stages']} | {v['seconds']:.1f} |" for n, v in per.items()),
            f"| total | {sum(v['jobs'] for v in per.values())} | {sum(v['stages'] for v in per.values())} "
            f"| {t.jobs['total']:.1f} |",
        ]
    lines += [
        "",
        "## Machine",
        "",
        *[f"- {k}: {v}" for k, v in machine().items()],
        f"- load average (1/5/15 min) at end: {' / '.join(f'{x:.2f}' for x in os.getloadavg())} "
        "(other work shares this machine: compare the ratios, not the seconds)",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=5, help="repetitions of (bare start, sample run)")
    p.add_argument("--out", default=str(BENCH / "results" / "small-runs.md"))
    p.add_argument(
        "--before",
        metavar="LIB",
        help="the lib/ of another neardup tree (e.g. an export of main), run in the same repetitions",
    )
    p.add_argument("--count-jobs", metavar="OUTPUT", help=argparse.SUPPRESS)  # the in-process run
    args = p.parse_args()
    if args.count_jobs:
        print(json.dumps(count_jobs(args.count_jobs)))
        return
    if args.repeat < 1:
        raise SystemExit("small: --repeat must be at least 1")
    trees = [Tree("this tree", ROOT / "lib")]
    if args.before:
        trees.insert(0, Tree("before", Path(args.before).resolve()))
    work = Path(tempfile.mkdtemp(prefix="neardup-small-"))
    try:
        bare: list[Measure] = []
        archived: list[Measure] = []
        floor: list[Measure] = []
        out = work / "out"
        archive = prepare(work)
        for i in range(args.repeat):
            bare.append(timed([PYTHON, "-c", BARE], work / "bare.log", ROOT / "lib"))
            if archive is not None:
                archived.append(timed([PYTHON, "-c", BARE, str(archive)], work / "bare.log", ROOT / "lib"))
            copy = [PYTHON, "-c", FLOOR, str(SAMPLE), str(work / "floor")]
            floor.append(timed(copy, work / "floor.log", ROOT / "lib"))
            for t in trees:
                cmd = [PYTHON, "-m", "neardup", *README_RUN, str(out), "--overwrite"]
                t.runs.append(timed(cmd, work / "sample.log", t.lib))
                report = json.loads((out / "report.json").read_text())
                t.stage_secs.append({k: float(v) for k, v in report["seconds"].items()})
            shown = ", ".join(
                f"{t.label} {t.runs[-1].wall:.1f} s ({t.runs[-1].wall / bare[-1].wall:.2f})" for t in trees
            )
            times = f"bare {bare[-1].wall:.1f} s, floor {floor[-1].wall:.1f} s"
            print(f"repetition {i + 1}: {times}, {shown}", flush=True)
        for t in trees:
            counted = subprocess.run(
                [PYTHON, __file__, "--count-jobs", str(work / "counted")],
                capture_output=True,
                text=True,
                env=_env(t.lib),
                check=False,
            )
            if counted.returncode != 0:
                raise SystemExit(f"small: the counting run failed:\n{counted.stderr[-2000:]}")
            t.jobs = json.loads(counted.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    text = render(bare, archived, floor, trees)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)
    print()
    print(text)


if __name__ == "__main__":
    main()
