"""`neardup index verify`: read an index whole and say whether it is sound.

    listing (one, of segments/) -> footers (row counts, no data page) -> every file read
    whole (stages/index_read.py) -> row counts against the manifest's document counts

It checks what `dedup --against` and `index add` check before use (every listed file there
with its size, runtime/indexfiles.py) and what they cannot without reading everything: each
footer's row count, and every page of every file (a corrupt byte). One line on stdout for a
sound index; IndexDamagedError (one line, exit 4) names the first damage found.
"""

from __future__ import annotations

import time
from contextlib import AbstractContextManager
from dataclasses import dataclass

from pyspark.sql import SparkSession

from neardup.errors import IndexDamagedError, IndexRefusedError
from neardup.runtime.indexfiles import (
    by_segment,
    count_problem,
    damaged,
    data_files,
    footer_rows,
    parts_of,
    segment_problem,
)
from neardup.runtime.indexstore import DOCS, KEYS, SIGNATURES, IndexFile, IndexStore, Manifest
from neardup.runtime.memory import human
from neardup.stages.against import check_unchanged, index_read_errors
from neardup.stages.index_read import rows_read


@dataclass(frozen=True)
class Verified:
    """What `index verify` found in a sound index."""

    path: str
    manifest: Manifest
    files: int
    bytes: int
    rows: dict[str, int]  # by part: keys, docs, signatures
    unlisted: list[str]  # segments whose manifest (format 1) lists no files
    texts_changed: str | None  # why exact verification would refuse (an index with signatures)
    seconds: float


def verify(spark: SparkSession, index_path: str) -> Verified:
    """Read the index at `index_path` whole: every file its manifest lists, with its size
    (one listing), its footer's row count, and every row of it (every column decoded, each
    page's checksum verified), and the row counts against the segments' document counts.
    IndexDamagedError (exit 4) names the first damage found."""
    started = time.time()
    store = IndexStore(spark, index_path)
    manifest = store.require()
    bands = int(manifest.params["lsh.bands"])
    root = f"{store.path}/segments"
    listing = store.fs.list_files(root) if store.fs.is_dir(root) else []
    found = {s.name: data_files(listing, store.segment_dir(s.name)) for s in manifest.segments}
    for seg in manifest.segments:
        problem = segment_problem(seg, found[seg.name]) if seg.files is not None else None
        if problem is not None:
            raise IndexDamagedError(damaged(store.shown, seg, problem))
    parts = [f"{store.segment_dir(s.name)}/{p}" for s in manifest.segments for p in parts_of(found[s.name])]
    with _unreadable_is_damage(store, manifest):
        footers = by_segment(footer_rows(spark, parts), store, manifest)
    recorded: dict[str, tuple[IndexFile, ...]] = {}
    for seg in manifest.segments:
        listed = seg.files or tuple(
            IndexFile(p, f.size, footers.get((seg.name, p), 0)) for p, f in sorted(found[seg.name].items())
        )
        for f in listed:
            footer = footers.get((seg.name, f.path), 0)
            if footer != f.rows:
                problem = f"its file {f.path}'s footer says {footer:,} rows, the manifest {f.rows:,}"
                raise IndexDamagedError(damaged(store.shown, seg, problem))
        rows = {part: sum(f.rows for f in listed if f.part == part) for part in (KEYS, DOCS, SIGNATURES)}
        problem = count_problem(seg, rows, bands, manifest.signatures)
        if problem is not None:
            raise IndexDamagedError(damaged(store.shown, seg, problem))
        recorded[seg.name] = listed
    with _unreadable_is_damage(store, manifest):
        read = rows_read(spark, store, manifest, found)
    for seg in manifest.segments:
        for f in recorded[seg.name]:
            got = read.get((seg.name, f.path), 0)
            if got != f.rows:
                problem = f"its file {f.path} gave {got:,} rows when read, its footer says {f.rows:,}"
                raise IndexDamagedError(damaged(store.shown, seg, problem))
    texts_changed = None
    try:
        for seg in manifest.segments:
            check_unchanged(store, seg.texts, store.shown)
    except IndexRefusedError as e:
        if not manifest.signatures:  # exact verification is the only one it serves
            raise
        texts_changed = str(e)
    every = [f for files in recorded.values() for f in files]
    return Verified(
        store.path,
        manifest,
        len(every),
        sum(f.size for f in every),
        {part: sum(f.rows for f in every if f.part == part) for part in (KEYS, DOCS, SIGNATURES)},
        [s.name for s in manifest.segments if s.files is None],
        texts_changed,
        round(time.time() - started, 3),
    )


def _unreadable_is_damage(store: IndexStore, manifest: Manifest) -> AbstractContextManager[None]:
    """Spark's failure to read one of the index's files -> IndexDamagedError naming it."""
    return index_read_errors(store, manifest, "neardup index build --overwrite rebuilds the index")


def verify_summary(index_path: str, v: Verified) -> str:
    """The line `index verify` prints on a sound index."""
    m = v.manifest
    line = (
        f"neardup: index {index_path} is sound: version {m.version}, {len(m.segments)} segment(s), "
        f"{m.documents:,} documents; {v.files:,} files ({human(v.bytes)}) read whole in {v.seconds:.1f} s, "
        f"{v.rows[KEYS]:,} band keys, {v.rows[DOCS]:,} ids"
        + (f", {v.rows[SIGNATURES]:,} signatures" if m.signatures else "")
        + ", each file's size and rows as recorded."
    )
    if v.unlisted:
        line += (
            f" {len(v.unlisted)} segment(s) of an older neardup's manifest list no files, so dedup "
            "--against cannot check them before use: neardup index add records them (or rebuild)."
        )
    if v.texts_changed is not None:
        line += f" Exact verification would be refused ({v.texts_changed}); signature verification is not."
    return line
