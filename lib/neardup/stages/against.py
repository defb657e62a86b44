"""Stage: a batch against a persistent index (`neardup dedup --against`).

The index (runtime/indexstore.py) holds band keys, not texts. Candidates between the batch
and the index come from one scan of the index's band rows, probed against the batch's band
keys (broadcast when they fit, so the index's rows are filtered where they are read and
never shuffled); only the rows that share a key are mapped to their ids. Verification then
needs the texts (or signatures) of the indexed documents that are candidates, and no others:
`indexed_texts` reads the id and text columns of the files the index recorded (column
pruning: no other column is read) and keeps the candidates' rows with a broadcast left-semi
join as they are read, so no other text is shipped, shuffled, normalized or shingled. (Parquet
cannot fetch single rows: the reader still decodes the text pages of every row group it
scans; docs/design.md gives the cost.)
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from pyspark.sql import DataFrame, DataFrameReader, SparkSession, Window
from pyspark.sql import functions as F

from neardup import columns as C
from neardup.errors import IndexDamagedError, IndexRefusedError, InputDataError
from neardup.kernels.signatures import SignParams
from neardup.runtime.failures import unreadable_file
from neardup.runtime.indexfiles import check_listing, relative, same_path
from neardup.runtime.indexstore import (
    DOCS,
    KEYS,
    SIGNATURES,
    IndexStore,
    Manifest,
    Texts,
    check_compatible,
)

log = logging.getLogger("neardup")
_PATH_NOT_FOUND = re.compile(r"\[PATH_NOT_FOUND\] Path does not exist: (\S+?)\.?(?:\s|$)")

_BATCH = "_batch_id"
_SIZE = "_index_bucket_size"
_MIN = "_index_bucket_min"


@dataclass(frozen=True)
class OpenIndex:
    """An index checked against this run's parameters, and its frames."""

    store: IndexStore
    manifest: Manifest
    keys: DataFrame  # (_band_key, _n, _seg): every band row of every segment
    docs: DataFrame  # (_seg, _n, _id): every indexed document

    @property
    def shown(self) -> str:
        return self.store.shown


def open_index(spark: SparkSession, path: str, params: SignParams, verify_method: str) -> OpenIndex:
    """The current version of the index at `path`, refused (IndexRefusedError, one line) if
    it was built with other band-key parameters or cannot serve `verify_method`."""
    store = IndexStore(spark, path)
    manifest = store.require()
    check_compatible(manifest, params, path)
    if verify_method == "signature" and not manifest.signatures:
        raise IndexRefusedError(
            f"index {path} holds no signatures (it was built with verify.method=exact), this run "
            "has verify.method=signature; rebuild it with --set verify.method=signature, or verify exactly"
        )
    checked_files(store, manifest)
    if verify_method == "exact":
        for seg in manifest.segments:
            check_unchanged(store, seg.texts, path)
    keys = _union(
        [
            index_reader(spark)
            .parquet(f"{store.segment_dir(s.name)}/{KEYS}")
            .select(C.BAND_KEY, C.DOC_NO, F.lit(i).alias(C.SEGMENT))
            for i, s in enumerate(manifest.segments)
        ]
    )
    return OpenIndex(store, manifest, keys, index_docs(spark, store, manifest))


def index_docs(spark: SparkSession, store: IndexStore, manifest: Manifest) -> DataFrame:
    """(_seg, _n, _id) of every document the manifest's segments hold."""
    return _union(
        [
            index_reader(spark)
            .parquet(f"{store.segment_dir(s.name)}/{DOCS}")
            .select(F.lit(i).alias(C.SEGMENT), C.DOC_NO, C.DOC_ID)
            for i, s in enumerate(manifest.segments)
        ]
    )


def checked_files(store: IndexStore, manifest: Manifest) -> None:
    """The index's files against its manifest, before any is read (one listing): refused
    (IndexDamagedError) if one is missing or of another size; segments of a manifest that
    lists no files (an older neardup's) are used with a warning."""
    unchecked = check_listing(store, manifest)
    if unchecked:
        log.warning(
            "index %s: %d of its %d segment(s) were written by an older neardup whose manifest "
            "lists no files, so a missing or damaged file cannot be noticed before use; neardup "
            "index verify %s reads them whole, and the next neardup index add records their files",
            store.shown,
            len(unchecked),
            len(manifest.segments),
            store.shown,
        )


def index_reader(spark: SparkSession) -> DataFrameReader:
    """Spark's reader for the index's own Parquet files, verifying each page's checksum (the
    writer stores one per page): a corrupt byte fails the read (index_read_errors names the
    file) instead of decoding to another band key, which no other check would notice."""
    return spark.read.option("parquet.page.verify-checksum.enabled", "true")


@contextmanager
def index_read_errors(store: IndexStore, manifest: Manifest, hint: str | None = None) -> Iterator[None]:
    """Spark's failure to read one of the index's files, or one of its indexed texts', ->
    IndexDamagedError naming the file (one line, exit 4) instead of an input error; any
    other failure passes unchanged. `hint`: what to do, after the file (by default, verify
    the index and rebuild it)."""
    try:
        yield
    except Exception as e:
        what = unreadable_index_file(e, store.path, store.shown, manifest)
        if what is None:
            raise
        told = hint or (
            f"neardup index verify {store.shown} checks every file, neardup index build "
            "--overwrite rebuilds the index"
        )
        raise IndexDamagedError(f"{what}; {told}") from e


def unreadable_index_file(e: BaseException, path: str, shown: str, manifest: Manifest) -> str | None:
    """What `e` says if it is Spark's failure to read a file of the index or of its indexed
    texts (`index ... is damaged: its file ... cannot be read (cause)`), else None. `path`:
    the index's, qualified; `shown`: as the user wrote it."""
    found = unreadable_file(e)
    gone = _PATH_NOT_FOUND.search(str(e)) if found is None else None
    if gone is not None:  # a folder of an index whose manifest lists no files (format 1)
        found = gone.group(1), "it does not exist"
    if found is None:
        return None
    file, cause = found
    inside = relative(file, path)
    if inside is not None:
        return f"index {shown} is damaged: its file {inside} cannot be read ({cause[:200]})"
    if any(same_path(file, name) for seg in manifest.segments for name, _, _ in seg.texts.files):
        return f"index {shown}: the indexed texts' file {file} cannot be read ({cause[:200]})"
    return None


def _union(frames: list[DataFrame]) -> DataFrame:
    out = frames[0]
    for df in frames[1:]:
        out = out.unionByName(df)
    return out


def refuse_indexed_ids(docs: DataFrame, ids: DataFrame, small: bool, input_path: str, index: str) -> None:
    """InputDataError if any of `ids` (_id, an input's) is in `docs` (the index's): an id
    names one document, and an indexed document is never deduplicated or indexed again.
    `small`: the input's ids are broadcast to the scan of the index's."""
    again = docs.select(C.DOC_ID).join(F.broadcast(ids) if small else ids, C.DOC_ID, "left_semi")
    n = again.count()
    if n:
        eg = ", ".join(repr(row[0]) for row in again.orderBy(C.DOC_ID).limit(2).collect())
        raise InputDataError(
            f"input {input_path}: {n:,} id(s) are already in index {index}, e.g. {eg}; "
            "it takes new documents only"
        )


def check_unchanged(store: IndexStore, texts: Texts, path: str) -> None:
    """Exact verification reads texts from the files the index recorded: refuse if any of
    them is gone or was rewritten since (its size or modification time differs)."""
    for name, size, mtime in texts.files:
        if not store.fs.exists(name):
            raise IndexRefusedError(
                f"index {path}: the indexed texts' file {name} is gone; rebuild the index"
            )
        _, now_size, now_mtime = store.fs.stat(name)
        if (now_size, now_mtime) != (size, mtime):
            raise IndexRefusedError(
                f"index {path}: the indexed texts' file {name} changed since it was indexed (size "
                f"{size} -> {now_size}, modified {mtime} -> {now_mtime}); rebuild the index"
            )


def shared_index_rows(keys: DataFrame, batch_rows: DataFrame, small_batch: bool) -> DataFrame:
    """keys (_band_key, _n, _seg): the index's band rows; batch_rows (_id, _band_key) -> the
    index's rows whose key some batch row has. `small_batch`: the batch's rows are broadcast
    and the index's filtered where they are read; else both are shuffled by key."""
    side = batch_rows.select(C.BAND_KEY)
    return keys.join(F.broadcast(side) if small_batch else side, C.BAND_KEY, "left_semi")


def cross_edges(
    shared: DataFrame, docs: DataFrame, batch_rows: DataFrame, all_pairs_up_to: int, small_shared: bool
) -> DataFrame:
    """shared (_band_key, _n, _seg): index rows in buckets the batch shares; docs (_seg, _n,
    _id); batch_rows (_id, _band_key) -> distinct (src, dst, _index_id): src < dst, one end
    a batch representative and the other, `_index_id`, an indexed document.

    As within a batch (`stages/candidates.py`), a bucket's pairs are bounded: a batch document pairs
    with every indexed document of a bucket holding at most `all_pairs_up_to` of them, and with
    the smallest indexed id of a larger one. `small_shared`: the shared rows are broadcast
    (to the docs scan, then to the batch's rows); else shuffled.
    """

    def side(df: DataFrame) -> DataFrame:
        return F.broadcast(df) if small_shared else df

    ids = docs.join(side(shared), [C.SEGMENT, C.DOC_NO]).select(C.BAND_KEY, C.DOC_ID)
    bucket = Window.partitionBy(C.BAND_KEY)
    bounded = (
        ids.select(
            C.BAND_KEY,
            C.DOC_ID,
            F.count(F.lit(1)).over(bucket).alias(_SIZE),
            F.min(C.DOC_ID).over(bucket).alias(_MIN),
        )
        .filter((F.col(_SIZE) <= all_pairs_up_to) | (F.col(C.DOC_ID) == F.col(_MIN)))
        .select(C.BAND_KEY, F.col(C.DOC_ID).alias(C.INDEX_ID))
    )
    pairs = batch_rows.select(F.col(C.DOC_ID).alias(_BATCH), C.BAND_KEY).join(side(bounded), C.BAND_KEY)
    return pairs.select(
        F.least(_BATCH, C.INDEX_ID).alias(C.SRC), F.greatest(_BATCH, C.INDEX_ID).alias(C.DST), C.INDEX_ID
    ).distinct()


def read_texts(spark: SparkSession, texts: Texts, id_type: str) -> DataFrame:
    """(_id, _text) of the files a segment's texts are in, read as `index build` read them."""
    files = [name for name, _, _ in texts.files]
    if texts.format == "parquet":
        df = spark.read.parquet(*files)
    elif texts.format == "jsonl":
        # The schema given: inferring it would parse every line of the files first.
        df = spark.read.schema(f"`{texts.id_col}` {id_type}, `{texts.text_col}` string").json(files)
    elif texts.format == "csv":
        df = (
            spark.read.option("header", str(texts.csv_header).lower())
            .option("multiLine", "true")
            .option("escape", '"')
            .csv(files)
        )
    else:  # pragma: no cover - index build records only these
        raise IndexRefusedError(f"index texts in unknown format {texts.format}")
    return df.select(F.col(texts.id_col).alias(C.DOC_ID), F.col(texts.text_col).alias(C.TEXT))


def indexed_texts(spark: SparkSession, index: OpenIndex, wanted: DataFrame, small: bool) -> DataFrame:
    """(_id, _text) of the indexed documents in `wanted` (_id), and of no other: each
    segment's files read for the id and text columns only, filtered by a left-semi join on
    `wanted` (broadcast when `small`, so the filter runs in the scan's own tasks)."""
    m = index.manifest
    texts = _union([read_texts(spark, s.texts, m.id_type) for s in m.segments])
    return texts.join(F.broadcast(wanted) if small else wanted, C.DOC_ID, "left_semi")


def indexed_signatures(spark: SparkSession, index: OpenIndex, wanted: DataFrame, small: bool) -> DataFrame:
    """(_id, _sig) of the indexed documents in `wanted` (_id): their numbers first (docs/,
    semi-joined), then only those numbers' signatures."""
    store, m = index.store, index.manifest
    numbers = index.docs.join(F.broadcast(wanted) if small else wanted, C.DOC_ID, "left_semi")
    sigs = _union(
        [
            index_reader(spark)
            .parquet(f"{store.segment_dir(s.name)}/{SIGNATURES}")
            .select(F.lit(i).alias(C.SEGMENT), C.DOC_NO, C.SIG)
            for i, s in enumerate(m.segments)
        ]
    )
    return sigs.join(F.broadcast(numbers) if small else numbers, [C.SEGMENT, C.DOC_NO]).select(
        C.DOC_ID, C.SIG
    )
