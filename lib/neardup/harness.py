"""The run harness every command stands on: paths, session settings, the read, the memory
plan, the broadcast bound, the stage log, the report's envelope and atomic publication.

A command (commands/dedup.py, decontaminate.py; index.py on `job_stages`) is a list of stages on it:

    with claimed_output(spark, cfg, input_path, output) as claim:   # checked, leased
        with opened_run(spark, cfg, input_path, claim) as r:
            inp = r.stage("read", input_path, read_stage)
            ...                  # the command's own stages, each taking values, returning values
        report = envelope(r, started, inp, "dedup", counts, sections)
        publish(r.fs, r.paths, report, files)

The output is claimed first (runtime/outputs.py: its path resolved and apart from the
input, ours to replace, its lease held until publication). Everything is written under a
staging directory beside the output (`<output>.neardup-staging`) and moved into place
only after the command's own checks pass; `_SUCCESS` is written last. A crash at any
point leaves the previous output (or none) and a staging directory, never output that
looks complete. Stage results kept under `_work/` are reused by a rerun with the same
fingerprint (runtime/workdir.py).

The context holds what every command has (session, config, paths, work directory, stage
log, cached frames) and nothing of one command's: a command's state goes from stage to
stage as values. `neardup index`, which commits into an index instead of publishing an
output, runs its stages on `job_stages` alone.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

from pyspark import InheritableThread, StorageLevel
from pyspark.broadcast import Broadcast
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from neardup import __version__
from neardup.config import Config
from neardup.kernels.signatures import SignParams
from neardup.runtime import outputs, pydaemon
from neardup.runtime.fs import FileSystem, from_uri
from neardup.runtime.jobgroups import JobGroups
from neardup.runtime.memory import BatchSizes, human, slot_share
from neardup.runtime.session import DAEMON_MODULE, archive_report, heap_and_slots, local_cores
from neardup.runtime.sizing import (
    InputProfile,
    batch_settings,
    measured_profile,
    parquet_profile,
    plan_batches,
    writer_options,
)
from neardup.runtime.stagelog import StageLog
from neardup.runtime.workdir import WorkDir, input_fingerprint
from neardup.stages.parquet_schemas import check_parquet_files
from neardup.stages.read import (
    CORRUPT,
    Input,
    RowCheck,
    check_columns,
    check_rows,
    documents,
    exact_json_lines,
    malformed_records,
    read_input,
)
from neardup.stages.sign import sign_params
from neardup.stages.warmup import warm_up

log = logging.getLogger("neardup")

T = TypeVar("T")
Counts = dict[str, Any]

# Up to this many rows are broadcast to the tasks that join against them; past it a
# shuffle join is cheaper than shipping the frame to every task. Every broadcast-or-
# shuffle decision of the job is `broadcastable(bound)`, with `bound` an upper bound on
# the rows of the frame that would be broadcast.
BROADCAST_ROWS = 2_000_000


def broadcastable(bound: int) -> bool:
    return bound <= BROADCAST_ROWS


@dataclass(frozen=True)
class Result:
    output: str
    report: dict[str, Any]


@dataclass(frozen=True)
class Paths:
    output: str
    staging: str

    @property
    def work(self) -> str:
        return f"{self.staging}/_work"

    def staged(self, name: str) -> str:
        return f"{self.staging}/{name}"

    def final(self, name: str) -> str:
        return f"{self.output}/{name}"


@dataclass
class Stages:
    """A command's stages: the stage log (each stage's Spark jobs in a job group), the
    session settings entered along the way and the frames cached (released at the end).
    What `neardup index`, which publishes into an index rather than an output, stands on."""

    spark: SparkSession
    stages: StageLog
    run_id: str
    settings: contextlib.ExitStack = field(default_factory=contextlib.ExitStack, kw_only=True)
    cached: list[DataFrame] = field(default_factory=list, kw_only=True)

    def stage(self, name: str, about: str, fn: Callable[..., tuple[T, Counts]], *args: Any) -> T:
        """Run one stage, `fn(self, *args)`: time it, log and keep its counts, return its
        result. `about` is its size as known when it starts, for its Spark jobs'
        description."""
        with self.stages.stage(name, about) as counts:
            result, found = fn(self, *args)
            counts.update(found)
        return result

    def keep(self, df: DataFrame, level: StorageLevel = StorageLevel.MEMORY_AND_DISK) -> DataFrame:
        self.cached.append(df.persist(level))
        return self.cached[-1]

    def share(self, payload: bytes) -> Broadcast[bytes]:
        """`payload` broadcast to the tasks, destroyed when the command ends."""
        shared = self.spark.sparkContext.broadcast(payload)
        self.settings.callback(_destroy, shared)
        return shared

    def release(self, df: DataFrame) -> None:
        """Unpersist a kept frame once its last reader is done (its memory or disk goes back
        to the stages after). A frame built on it and kept since stays cached."""
        df.unpersist()
        self.cached = [c for c in self.cached if c is not df]

    def close(self) -> None:
        self.settings.close()
        for df in self.cached:
            # After a JVM death this fails too; the original error is the one to report.
            with contextlib.suppress(Exception):
                df.unpersist()


def _destroy(shared: Broadcast[bytes]) -> None:
    with contextlib.suppress(Exception):  # after a JVM death there is nothing left to free
        shared.destroy()


@contextlib.contextmanager
def job_stages(spark: SparkSession) -> Iterator[Stages]:
    """Stages whose Spark jobs form a group per stage, described with the stage's name and
    size (Spark UI, REST API, event log, the memory benchmark)."""
    run_id = uuid.uuid4().hex
    groups = JobGroups(spark.sparkContext, run_id)
    run = Stages(spark, StageLog(groups.start), run_id)
    try:
        yield run
    finally:
        run.close()
        groups.close()


@dataclass
class RunContext(Stages):
    """One run's context: its stages, config, paths and work directory (a command that
    writes an output directory: dedup, decontaminate)."""

    cfg: Config
    input_path: str
    paths: Paths
    fs: FileSystem
    work: WorkDir
    warm: threading.Thread | None = field(default=None, kw_only=True)  # the Python warm-up, if one runs

    def warmed(self) -> None:
        """Wait for the Python warm-up (_warm_python), if one runs."""
        if self.warm is not None:
            self.warm.join()

    def close(self) -> None:
        self.warmed()
        super().close()


@dataclass(frozen=True)
class Claim:
    """An output checked (runtime/outputs.py: paths resolved and apart from what the run
    reads, ours to replace) whose lease this run holds."""

    paths: Paths
    fs: FileSystem


@contextlib.contextmanager
def claimed_output(
    spark: SparkSession,
    cfg: Config,
    input_path: str,
    output: str,
    apart: Mapping[str, str] | None = None,
) -> Iterator[Claim]:
    """The output's paths, checked, with the lease on the output held until the block ends
    (the run and its publication). `apart`: other paths the run reads (a reference, an
    index; name -> path) that must not overlap the output either. Nothing is deleted or
    written (but the lease) before every check has passed."""
    fs = FileSystem.for_path(spark, output)
    out = outputs.resolve(spark, output)
    others = [] if cfg.input.format == "table" else [("input", input_path)]
    others += list((apart or {}).items())
    outputs.check_apart(spark, output, out, others)
    # The lease before the output is looked at: a run that holds it may be publishing.
    with outputs.output_lease(fs, out, output):
        outputs.check_output(fs, out, output, cfg.output.overwrite)
        yield Claim(Paths(output=out, staging=out + outputs.STAGING_SUFFIX), fs)


@contextlib.contextmanager
def opened_run(spark: SparkSession, cfg: Config, input_path: str, claim: Claim) -> Iterator[RunContext]:
    """Clear what a failed run left in the claimed output's staging folder (but its
    finished stages), mark the folder as ours, and yield the run's context; its cached
    frames and session settings are released at the end."""
    paths, fs = claim.paths, claim.fs
    fs.check_writable(paths.staging)  # a read-only or full output folder: exit 5 before any job
    # The marker first: a run stopped anywhere after this leaves a folder known as ours.
    fs.write_bytes(paths.staged(outputs.STAGING_MARKER), b"")
    for name in fs.list_names(paths.staging):
        if name not in ("_work", outputs.STAGING_MARKER):
            fs.delete(paths.staged(name))
    fs.delete(f"{paths.work}/checkpoints")
    fs.mkdirs(paths.work)
    spark.sparkContext.setCheckpointDir(f"{paths.work}/checkpoints")
    with job_stages(spark) as run:
        r = RunContext(
            run.spark, run.stages, run.run_id, cfg, input_path, paths, fs, WorkDir(spark, fs, paths.work)
        )
        try:
            yield r
        finally:
            r.close()


# --- the read -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Opened:
    """The input as read and checked, and its sizes (what every command starts from)."""

    inp: Input
    check: RowCheck
    files: list[str]
    profile: InputProfile | None

    @property
    def source(self) -> DataFrame:
        """The input rows with an id, every column as read (malformed lines left out)."""
        df = self.inp.df
        return df.filter(F.col(CORRUPT).isNull()).drop(CORRUPT) if CORRUPT in df.columns else df


def open_input(spark: SparkSession, cfg: Config, input_path: str) -> Opened:
    """Read the input and check its columns and rows; profile its bytes per row."""
    inp = read_input(spark, input_path, cfg)
    check_columns(inp, cfg)
    files = sorted(from_uri(f) for f in inp.df.inputFiles()) if inp.format != "table" else []
    if inp.format == "parquet":
        # Before the rows: a file with another schema would fail or be read as nulls there.
        check_parquet_files(spark, input_path, files, (cfg.input.id_col, cfg.input.text_col))
    row_check = check_rows(inp, cfg, measure_text=inp.format != "parquet")
    if row_check.recount:
        log.warning(
            "input %s: the rows of Spark's JSON reader do not match the non-blank lines one to "
            "one, or may hold a value it turned into a string; reading it again line by line",
            input_path,
        )
        inp = exact_json_lines(spark, inp)
        check_columns(inp, cfg)
        row_check = check_rows(inp, cfg, measure_text=True)
    profile: InputProfile | None
    if inp.format == "parquet":
        profile = parquet_profile(spark, files, cfg.input.text_col)
    else:
        profile = measured_profile(row_check.rows, row_check.text_bytes or 0, row_check.largest_text or 0)
    return Opened(inp, row_check, files, profile)


@dataclass(frozen=True)
class ReadResult:
    source: DataFrame  # the input rows with an id, every column as read
    docs: DataFrame  # (_id, _text, _rank)
    rows: int  # every input row, malformed lines included
    batches: BatchSizes
    params: SignParams
    # What the input is, for the fingerprints of results kept under _work/: its files
    # (name, size, modification time) or its table's name.
    files: list[tuple[str, int, int]]
    table: str | None
    malformed: DataFrame | None = None  # (_file, _line, _raw) with input.malformed: reject
    malformed_rows: int = 0


def read_stage(r: RunContext) -> tuple[ReadResult, Counts]:
    """Read and check the input, size the batches from it."""
    _warm_python(r)
    opened = open_input(r.spark, r.cfg, r.input_path)
    inp, row_check = opened.inp, opened.check
    batches = plan_memory(r.spark, r.cfg, opened.profile)
    r.settings.enter_context(batch_settings(r.spark, batches, r.cfg.spark))
    r.work.writer_options = writer_options(batches, None)
    malformed = None
    if CORRUPT in inp.df.columns and row_check.malformed:
        malformed = r.keep(malformed_records(r.spark, inp))
    table = r.input_path if inp.format == "table" else None
    rows = row_check.rows + row_check.malformed
    source = opened.source
    read = ReadResult(
        source,
        documents(source, r.cfg),
        rows,
        batches,
        sign_params(r.cfg),
        input_fingerprint(r.spark, opened.files),
        table,
        malformed,
        row_check.malformed,
    )
    counts = {"input": rows, "malformed": row_check.malformed} if row_check.malformed else {"input": rows}
    return read, counts


def _warm_python(r: RunContext) -> None:
    """Local mode: start a Python worker per task slot (one, with neardup's daemon: below)
    and load the kernels in each (`warm_up`), in a thread of the read stage's job group,
    while the input is read. Signing waits for it (`RunContext.warmed`), so its tasks take
    those workers instead of starting others: with a warm-up of W seconds and a read of R,
    signing starts after max(R, W) where it would otherwise start after R and spend about W
    starting its workers. (On a cluster warm workers on one executor would help no one.)

    Where the workers fork from neardup's daemon (runtime/pydaemon.py), which loads the
    kernels before it forks any, one task is enough: it starts the daemon, and every worker
    forked after it has the kernels; the other slots read the input meanwhile (a task per
    slot held both cores of a 1M run for the daemon's start, 1.8 s, while the ids' check
    waited)."""
    if not str(r.spark.sparkContext.master).startswith("local"):
        return
    params, method = sign_params(r.cfg), r.cfg.verify.method
    if r.spark.sparkContext.getConf().get(DAEMON_MODULE) == pydaemon.MODULE:
        tasks = 1
    else:
        # The master's task slots (a user's spark.default.parallelism would not be slots).
        tasks = local_cores(str(r.spark.sparkContext.master))

    def collect() -> None:
        # A failure here (a worker that cannot import the kernels) is the signing stage's
        # to report, with its own error handling. The job is built here too: pickling its
        # function takes the driver half a second that the input's reading then has.
        with contextlib.suppress(Exception):
            warm_up(r.spark, params, method == "signature", method, tasks).collect()

    r.warm = InheritableThread(target=collect, daemon=True)
    r.warm.start()


def plan_memory(spark: SparkSession, cfg: Config, profile: InputProfile | None) -> BatchSizes:
    """Batch sizes from the input's bytes per row and the heap; logs both."""
    sizes = plan_batches(spark, profile, cfg.batch_bytes)
    heap, slots, where = heap_and_slots(spark)
    log.info(
        "memory: %s heap %s for %d task slot(s); %s; %s",
        where,
        human(heap),
        slots,
        profile.describe() if profile else "input sizes unknown",
        sizes.describe(),
    )
    share = slot_share(heap, slots)
    if profile is not None and profile.largest_chunk and profile.largest_chunk > share // 2:
        log.warning(
            "the input's largest Parquet row group holds %s of compressed text, which the reader "
            "keeps in memory whole, against %s of heap per task slot: if the run fails for memory, "
            "give it more or rewrite the input with smaller row groups",
            human(profile.largest_chunk),
            human(share),
        )
    return sizes


# --- the report and publication -------------------------------------------------------------


def counted(found: Mapping[str, Any], keys: Sequence[str], elsewhere: Iterable[str] = ()) -> Counts:
    """report.json's counts: `keys` first, in order (null where no stage counted it, as in
    a resumed run), then every other count a stage made and no section of the report shows
    (`elsewhere`): a stage's new count is never dropped."""
    shown = {key: found.get(key) for key in keys}
    skip = set(keys) | set(elsewhere)
    shown.update({key: value for key, value in found.items() if key not in skip})
    return shown


def envelope(
    r: RunContext,
    started: float,
    inp: ReadResult,
    command: str,
    counts: Counts,
    sections: Mapping[str, Any],
) -> dict[str, Any]:
    """report.json: what every command's has (version, run, paths, config, counts, seconds,
    memory, Spark, resumed stages) around the command's own `sections`."""
    return {
        "neardup_version": __version__,
        "command": command,
        "run_id": r.run_id,
        "input": r.input_path,
        "output": r.paths.output,
        "config": r.cfg.to_dict(),
        "counts": counts,
        **sections,
        "seconds": {**r.stages.seconds, "total": round(time.time() - started, 3)},
        "memory": asdict(inp.batches),
        "spark": spark_report(r.spark),
        "resumed_stages": r.work.resumed,
    }


def spark_report(spark: SparkSession) -> dict[str, Any]:
    """The session's master and the settings that shape its shuffles, as the run had them."""
    partitions = str(spark.conf.get("spark.sql.shuffle.partitions"))
    return {
        "version": spark.version,
        "master": spark.sparkContext.master,
        # A number, or as given where it is not one (Databricks takes "auto").
        "shuffle_partitions": int(partitions) if partitions.isdigit() else partitions,
        "adaptive": str(spark.conf.get("spark.sql.adaptive.enabled")).lower() == "true",
        # A local JVM neardup launched: the class archive (runtime/class_archive.py).
        "class_archive": archive_report(),
    }


def publish(fs: FileSystem, paths: Paths, report: dict[str, Any], files: dict[str, bytes]) -> None:
    """Write report.json and `files` (report.html) into staging, move the checked staging
    directory into place; _SUCCESS last."""
    fs.delete(paths.work)
    fs.write_bytes(paths.staged("report.json"), (json.dumps(report, indent=2, default=str) + "\n").encode())
    for name, data in files.items():
        fs.write_bytes(paths.staged(name), data)
    # Staging is known as ours by its report.json from here (runtime/outputs.py).
    fs.delete(paths.staged(outputs.STAGING_MARKER))
    fs.delete(paths.output)
    fs.rename(paths.staging, paths.output)
    fs.write_bytes(paths.final("_SUCCESS"), b"")
