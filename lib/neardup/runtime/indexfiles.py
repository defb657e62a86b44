"""The index's own files against its manifest: what is recorded when a segment is written,
and what is checked before the index is used (`dedup --against`, `index add`).

Recording lists the new segment's data files (one listing through Hadoop's FileSystem, so
every scheme) and takes each one's row count from its Parquet footer: one Spark job that
selects no column of them, so the reader counts each row group from the footer and reads no
data page, in parallel on the executors (on an object store a footer costs two ranged reads,
which the driver would otherwise make one file after another).

Checking is one listing of segments/ and no read: every file the manifest lists must be
there with its size, and a listed segment must hold no data file the manifest does not list
(Spark reads a segment's folders whole, so such a file would be read as the index). What
lies outside the listed segments (the segment of an add that crashed or lost the race for
its commit) is not damage: the next writer's garbage collection deletes it.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import unquote

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from neardup.errors import IndexDamagedError
from neardup.runtime.fs import FileSystem, Listed
from neardup.runtime.indexstore import DOCS, KEYS, SIGNATURES, IndexFile, IndexStore, Manifest, Segment

_FILE = "_file"
_PARTS = (KEYS, DOCS, SIGNATURES)


def relative(path: str, root: str) -> str | None:
    """`path` under the folder `root` (both as a file system names them, with `file:/`,
    `file:///` or `scheme://host/` forms compared alike), or None if it is not under it."""
    p, r = _plain(path), _plain(root).rstrip("/") + "/"
    return p[len(r) :] if p.startswith(r) else None


def same_path(a: str, b: str) -> bool:
    return _plain(a) == _plain(b)


def _plain(path: str) -> str:
    return "file:/" + path[len("file:") :].lstrip("/") if path.startswith("file:") else path


def is_data(rel: str) -> bool:
    """A file Spark reads as data: in keys/, docs/ or signatures/, and no part of its path
    hidden (`_SUCCESS`, `_temporary/`, `.crc` files start with _ or .)."""
    parts = rel.split("/")
    return parts[0] in _PARTS and not any(p.startswith(("_", ".")) for p in parts)


def data_files(listing: Iterable[Listed], where: str) -> dict[str, Listed]:
    """The data files of `listing` under the folder `where`, by their path under it."""
    out = {}
    for f in listing:
        rel = relative(f.path, where)
        if rel is not None and is_data(rel):
            out[rel] = f
    return out


def record(spark: SparkSession, fs: FileSystem, where: str) -> tuple[IndexFile, ...]:
    """The data files of the segment just written at `where`: path, size and footer rows."""
    found = data_files(fs.list_files(where), where)
    rows = footer_rows(spark, [f"{where}/{part}" for part in parts_of(found)])
    counted = {rel: n for path, n in rows.items() if (rel := relative(path, where)) is not None}
    # A file absent from the counts holds no row (the one Spark writes for an empty output).
    return tuple(IndexFile(rel, found[rel].size, counted.get(rel, 0)) for rel in sorted(found))


def parts_of(found: Iterable[str]) -> list[str]:
    """The parts (keys, docs, signatures) that hold at least one of the data files `found`
    (paths under a segment): Spark cannot read a folder without one."""
    return sorted({rel.split("/", 1)[0] for rel in found})


def footer_rows(spark: SparkSession, folders: list[str]) -> dict[str, int]:
    """Rows of every Parquet data file under `folders` (each read alone: their schemas differ),
    by its path as the file system names it, from the footers alone; one Spark job. A file
    with no row is absent."""
    if not folders:
        return {}
    frames = [
        spark.read.option("recursiveFileLookup", "true").parquet(f).select(F.input_file_name().alias(_FILE))
        for f in folders
    ]
    files: DataFrame = frames[0]
    for df in frames[1:]:
        files = files.unionByName(df)
    # Spark names files by their URI (percent-encoded); the file system by its path.
    return {unquote(str(r[_FILE])): int(r["count"]) for r in files.groupBy(_FILE).count().collect()}


def by_segment(rows: dict[str, int], store: IndexStore, manifest: Manifest) -> dict[tuple[str, str], int]:
    """Counts by file path -> by (segment, path under it), for the manifest's segments."""
    out = {}
    for path, n in rows.items():
        for seg in manifest.segments:
            rel = relative(path, store.segment_dir(seg.name))
            if rel is not None:
                out[(seg.name, rel)] = n
                break
    return out


def check_listing(store: IndexStore, manifest: Manifest) -> list[str]:
    """Refuse (IndexDamagedError, one line naming the file) an index whose files are not
    those its manifest lists; returns the segments that could not be checked (written by
    a neardup whose manifests list no files)."""
    unchecked = [s.name for s in manifest.segments if s.files is None]
    listed = [s for s in manifest.segments if s.files is not None]
    if not listed:
        return unchecked
    root = f"{store.path}/segments"
    listing = store.fs.list_files(root) if store.fs.is_dir(root) else []
    for seg in listed:
        problem = segment_problem(seg, data_files(listing, store.segment_dir(seg.name)))
        if problem is not None:
            raise IndexDamagedError(damaged(store.shown, seg, problem))
    return unchecked


def segment_problem(seg: Segment, found: dict[str, Listed]) -> str | None:
    """What differs between a segment's recorded files and `found` (its data files now, by
    path under the segment), or None."""
    assert seg.files is not None
    for f in seg.files:
        now = found.get(f.path)
        if now is None:
            return f"its file {f.path} is missing"
        if now.size != f.size:
            return f"its file {f.path} has {now.size:,} bytes, the manifest says {f.size:,}"
    recorded = {f.path for f in seg.files}
    extra = sorted(p for p in found if p not in recorded)
    if extra:
        return f"it holds {extra[0]}, which the manifest does not list"
    return None


def count_problem(seg: Segment, rows: dict[str, int], bands: int, signatures: bool) -> str | None:
    """`rows`: the segment's rows by part (keys, docs, signatures) -> what disagrees with its
    document count (docs/ and signatures/ a row each, keys/ a row per band), or None."""
    wanted = {DOCS: seg.documents, KEYS: seg.documents * bands}
    if signatures:
        wanted[SIGNATURES] = seg.documents
    for part, n in wanted.items():
        if rows.get(part, 0) != n:
            return f"its {part}/ holds {rows.get(part, 0):,} rows for {seg.documents:,} documents" + (
                f" x {bands} bands" if part == KEYS else ""
            )
    return None


def damaged(shown: str, seg: Segment, problem: str) -> str:
    """The one line for a damaged segment: what is wrong, and what to do."""
    return (
        f"index {shown} is damaged: segment {seg.name}: {problem} (neardup index verify {shown} "
        "checks every file; neardup index build --overwrite rebuilds the index)"
    )
