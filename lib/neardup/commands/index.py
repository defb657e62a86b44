"""`neardup index build|add`: a deduplicated corpus's band keys into a persistent index.

    read -> sign (the dedup job's own pass: normalize, hash, MinHash, band keys)
         -> write (one new segment, invisible until committed) -> commit (one rename)

`build` makes version 1 (with --overwrite, the next version of an existing index, listing
only the new segment: readers see the old index or the new one, never a mix). `add` appends
a segment to the current version; the batch's ids must be new and of the index's id type,
and its parameters the index's, and the index's files those its manifest lists (checked
before anything is read, runtime/indexfiles.py). The manifest lists the new segment's files,
recorded after the write. A crash before the commit leaves the index as it was; the next
writer deletes the unlisted segment (runtime/indexstore.py); a write or commit that fails
with an error, a lost commit race among them, deletes its own. Texts are not copied: the
manifest records where they are, for exact verification to read back the candidates'.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass, replace

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from neardup import columns as C
from neardup.config import Config
from neardup.errors import IndexDamagedError, InvariantError, UsageError
from neardup.harness import Counts, Opened, Stages, broadcastable, job_stages, open_input, plan_memory
from neardup.runtime import outputs
from neardup.runtime.fs import FileSystem
from neardup.runtime.indexfiles import count_problem, damaged, record
from neardup.runtime.indexstore import (
    DOCS,
    KEYS,
    SEGMENTS,
    SIGNATURES,
    IndexFile,
    IndexStore,
    Manifest,
    Segment,
    Texts,
    check_compatible,
    check_id_type,
    index_params,
    probe_keys,
)
from neardup.runtime.interrupts import held as held_interrupts
from neardup.runtime.jobgroups import count
from neardup.runtime.memory import BatchSizes, human
from neardup.runtime.sizing import batch_settings, writer_options
from neardup.runtime.workdir import input_fingerprint
from neardup.stages.against import checked_files, index_docs, index_read_errors, refuse_indexed_ids
from neardup.stages.index_segment import number_documents, write_segment
from neardup.stages.read import documents
from neardup.stages.sign import sign_documents, sign_params

log = logging.getLogger("neardup")


@dataclass(frozen=True)
class IndexResult:
    path: str
    manifest: Manifest
    segment: Segment
    sizes: dict[str, int]  # bytes on disk: keys, docs, signatures (the whole index)
    seconds: float

    @property
    def raw_key_bytes(self) -> int:
        """The band keys' raw size: 8 bytes per band per document, plus 8 per id."""
        bands = int(self.manifest.params["lsh.bands"])
        return self.manifest.documents * (8 * bands + 8)


def build(spark: SparkSession, cfg: Config, input_path: str, index_path: str, overwrite: bool) -> IndexResult:
    """A new index of `input_path`'s documents (a deduplicated corpus) at `index_path`."""
    store = IndexStore(spark, index_path)
    where = _claim(spark, cfg, input_path, store)
    with outputs.index_lease(store.fs, where, index_path):
        current = store.current()
        if current is not None and not overwrite:
            raise UsageError(
                f"index {index_path} already exists; neardup index add appends to it, --overwrite replaces it"
            )
        return _append(spark, cfg, input_path, store, current, replace_all=True)


def add(spark: SparkSession, cfg: Config, input_path: str, index_path: str) -> IndexResult:
    """Append `input_path`'s documents (a batch's kept/) to the index at `index_path`."""
    store = IndexStore(spark, index_path)
    where = _claim(spark, cfg, input_path, store)
    store.require()  # before the lease, which would make the folder
    with outputs.index_lease(store.fs, where, index_path):
        current = store.require()
        check_compatible(current, sign_params(cfg), index_path)
        checked_files(store, current)  # before anything is read: one listing
        with index_read_errors(store, current):
            current = with_files_recorded(spark, store, current, cfg.bands)
            return _append(spark, cfg, input_path, store, current, replace_all=False)


def _claim(spark: SparkSession, cfg: Config, input_path: str, store: IndexStore) -> str:
    """The index's resolved path, once it is known to be apart from the input (the texts
    must stay as indexed: an index among them would change their listing) and to hold
    nothing but an index (runtime/outputs.py). Nothing is written."""
    if cfg.input.format == "table":
        raise UsageError(
            "an index records the files its texts are in, and a catalog table has none: "
            "write the table to Parquet and index that"
        )
    where = outputs.resolve(spark, store.shown)
    source = outputs.resolve(spark, input_path)
    if outputs.inside(source, where) or outputs.inside(where, source):
        raise UsageError(f"index {store.shown} and input {input_path} must not be inside one another")
    outputs.check_index(store.fs, where, store.shown)
    return where


def _append(
    spark: SparkSession,
    cfg: Config,
    input_path: str,
    store: IndexStore,
    base: Manifest | None,
    replace_all: bool,
) -> IndexResult:
    """The stage list: read -> sign -> write (a new segment) -> commit."""
    started = time.time()
    source = FileSystem.for_path(spark, input_path).qualify(input_path.rstrip("/"))
    store.fs.check_writable(f"{store.path}/{SEGMENTS}")  # read-only or full: exit 5 before any job
    appended = base if base is not None and not replace_all else None
    signatures = appended.signatures if appended is not None else cfg.verify.method == "signature"
    with job_stages(spark) as run:
        read = run.stage("read", input_path, _read, cfg, input_path, store, appended)
        signed = run.stage("sign", count(read.opened.check.rows, "documents"), _sign, cfg, read, signatures)
        version = (base.version if base is not None else 0) + 1
        name = store.new_segment(version)
        indexed = count(signed.indexed, "documents")
        try:
            files = run.stage("write", indexed, _write, cfg, store, name, signed, signatures)
            segment = _segment(spark, cfg, source, read, signed, name, files)
            new = _manifest(cfg, base, replace_all, version, read.id_type, signatures, segment)
            with held_interrupts():  # exit 130 means nothing was published
                run.stage("commit", f"version {version}", _commit, store, new)
        except Exception:
            # A failed write or a lost commit deletes its own segment (a crash leaves it
            # to the next writer's garbage collection); a committed one is kept.
            store.discard(name)
            raise
    segment = new.segments[-1]
    sizes = store.sizes(new)
    result = IndexResult(store.path, new, segment, sizes, round(time.time() - started, 3))
    log.info(
        "index: %s documents in %d segment(s), %s on disk (band keys' raw size %s)",
        f"{new.documents:,}",
        len(new.segments),
        human(sum(sizes.values())),
        human(result.raw_key_bytes),
    )
    return result


def _segment(
    spark: SparkSession,
    cfg: Config,
    source: str,
    read: _Read,
    signed: _Signed,
    name: str,
    files: tuple[IndexFile, ...],
) -> Segment:
    """The new segment as the manifest lists it: its files, and where its texts are."""
    texts = Texts(
        path=source,
        format=read.opened.inp.format,
        id_col=cfg.input.id_col,
        text_col=cfg.input.text_col,
        files=tuple(input_fingerprint(spark, read.opened.files)),
        csv_header=cfg.input.csv_header,
    )
    return Segment(name, signed.indexed, read.rows, texts, files)


@dataclass(frozen=True)
class _Read:
    opened: Opened
    rows: int  # every input row, malformed lines included
    id_type: str


def _read(
    run: Stages, cfg: Config, input_path: str, store: IndexStore, appended: Manifest | None
) -> tuple[_Read, Counts]:
    """Read and check the input; appending, its ids must be of the index's type and new to it."""
    opened = open_input(run.spark, cfg, input_path)
    rows = opened.check.rows + opened.check.malformed
    id_type = next(f.dataType for f in opened.source.schema.fields if f.name == cfg.input.id_col)
    if appended is not None:
        check_id_type(appended, id_type.simpleString(), store.shown, f"input {input_path}")
        ids = opened.source.select(F.col(cfg.input.id_col).alias(C.DOC_ID))
        theirs = index_docs(run.spark, store, appended)
        refuse_indexed_ids(theirs, ids, broadcastable(opened.check.rows), input_path, store.shown)
    return _Read(opened, rows, id_type.simpleString()), {"input": rows}


@dataclass(frozen=True)
class _Signed:
    numbered: DataFrame  # number_documents' rows, kept
    batches: BatchSizes
    indexed: int


def _sign(run: Stages, cfg: Config, read: _Read, signatures: bool) -> tuple[_Signed, Counts]:
    batches = plan_memory(run.spark, cfg, read.opened.profile)
    run.settings.enter_context(batch_settings(run.spark, batches, cfg.spark))
    signed = sign_documents(documents(read.opened.source, cfg), sign_params(cfg), keep_signatures=signatures)
    numbered = run.keep(number_documents(signed, signatures))
    indexed = numbered.count()
    return _Signed(numbered, batches, indexed), {"indexed": indexed, "skipped": read.rows - indexed}


def _write(
    run: Stages, cfg: Config, store: IndexStore, name: str, signed: _Signed, signatures: bool
) -> tuple[tuple[IndexFile, ...], Counts]:
    """The segment's files, read back and recorded (path, size, footer rows) for the manifest."""
    where = store.segment_dir(name)
    write_segment(signed.numbered, where, writer_options(signed.batches, None), signatures)
    _check_segment(run.spark, where, signed.indexed, cfg.bands)
    files = record(run.spark, store.fs, where)
    return files, {"files": len(files), "bytes": sum(f.size for f in files)}


def _manifest(
    cfg: Config,
    base: Manifest | None,
    replace_all: bool,
    version: int,
    id_type: str,
    signatures: bool,
    segment: Segment,
) -> Manifest:
    """The index's next manifest: a new index of one segment, or the segment appended."""
    if base is None or replace_all:
        params = sign_params(cfg)
        return Manifest(
            version=version,
            build_id=uuid.uuid4().hex,
            params=index_params(params),
            probe=probe_keys(params),
            id_type=id_type,
            signatures=signatures,
            segments=(segment,),
        )
    now = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    return replace(base, version=version, segments=(*base.segments, segment), created=now)


def with_files_recorded(spark: SparkSession, store: IndexStore, manifest: Manifest, bands: int) -> Manifest:
    """`manifest` with the files of its segments that list none (an older neardup's) recorded
    as they are now, once their footers' row counts agree with the segments' document counts
    (a missing file would not); the next version commits them."""
    if all(s.files is not None for s in manifest.segments):
        return manifest
    segments = []
    for seg in manifest.segments:
        if seg.files is None:
            files = record(spark, store.fs, store.segment_dir(seg.name))
            seg = replace(seg, files=files)
            rows = {part: sum(f.rows for f in files if f.part == part) for part in (KEYS, DOCS, SIGNATURES)}
            problem = count_problem(seg, rows, bands, manifest.signatures)
            if problem is not None:
                raise IndexDamagedError(damaged(store.shown, seg, problem))
        segments.append(seg)
    log.info("index %s: the files of segments an older neardup wrote are recorded", store.shown)
    return replace(manifest, segments=tuple(segments))


def _commit(run: Stages, store: IndexStore, manifest: Manifest) -> tuple[None, Counts]:
    """One rename makes the segment visible; then what no manifest lists is deleted."""
    store.commit(manifest)
    gone = store.collect_garbage(manifest)
    return None, {"version": manifest.version, "segments": len(manifest.segments), "removed": len(gone)}


def _check_segment(spark: SparkSession, where: str, indexed: int, bands: int) -> None:
    """Read back what was written: every indexed document once in docs/, `bands` rows each
    in keys/ (nothing lost between signing and the files the manifest will list)."""
    docs = spark.read.parquet(f"{where}/{DOCS}")
    keys = spark.read.parquet(f"{where}/{KEYS}")
    found = docs.agg(F.count(F.lit(1)).alias("n"), F.countDistinct(C.DOC_NO).alias("numbers")).first()
    assert found is not None
    n_keys = keys.count()
    problems = []
    if int(found["n"]) != indexed or int(found["numbers"]) != indexed:
        problems.append(f"docs/ holds {found['n']} rows ({found['numbers']} numbers) for {indexed} documents")
    if n_keys != indexed * bands:
        problems.append(f"keys/ holds {n_keys} rows for {indexed} documents x {bands} bands")
    if problems:
        raise InvariantError("index segment check failed: " + "; ".join(problems))


def summary(input_path: str, result: IndexResult) -> str:
    """The line `index build|add` prints: what was indexed, and the index's size against
    its band keys' raw size (8 bytes a band and 8 an id per document)."""
    m, seg = result.manifest, result.segment
    on_disk = human(sum(result.sizes.values()))
    return (
        f"neardup: indexed {seg.documents:,} of {seg.input_rows:,} rows of {input_path} in "
        f"{result.seconds:.1f} s ({seg.input_rows - seg.documents:,} had no text to sign). "
        f"Index {result.path}, version {m.version}: {m.documents:,} documents in {len(m.segments)} "
        f"segment(s), {on_disk} on disk; its band keys' raw size is {human(result.raw_key_bytes)}."
    )
