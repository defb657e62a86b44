"""Stage: read an index whole (`neardup index verify`, commands/index_verify.py).

Every data file of keys/, docs/ and signatures/ is read by Spark with each page's checksum
verified, and every value of every column decoded (a hash of each row, folded per file), so
a corrupt page fails the read, where `dedup --against` would read it, and names its file.
The rows each file gave are compared with its footer's count (runtime/indexfiles.py checks
the listing and the footers first, without reading data pages).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from neardup.runtime.fs import from_uri
from neardup.runtime.indexfiles import by_segment, parts_of
from neardup.runtime.indexstore import DOCS, KEYS, SIGNATURES, IndexStore, Manifest
from neardup.stages.against import index_reader

_FILE, _ROWS, _FOLD = "_file", "_rows", "_fold"


def rows_read(
    spark: SparkSession, store: IndexStore, manifest: Manifest, found: Mapping[str, Iterable[str]]
) -> dict[tuple[str, str], int]:
    """(segment, file under it) -> rows read from it, every column decoded; one Spark job per
    part (keys, docs, signatures) over every segment. `found`: each segment's data files (paths
    under it), by name. A file that yields no row is absent."""
    rows: dict[str, int] = {}
    for part in (KEYS, DOCS, SIGNATURES):
        dirs = [f"{store.segment_dir(s)}/{part}" for s, files in found.items() if part in parts_of(files)]
        if not dirs:
            continue
        # Every file under each folder, partition folders (band=<b>) included, without
        # inferring the partition column: only the files' own columns are read.
        df = index_reader(spark).option("recursiveFileLookup", "true").parquet(*dirs)
        per_file = df.groupBy(F.input_file_name().alias(_FILE)).agg(
            F.count(F.lit(1)).alias(_ROWS),
            # Forces every value of every column to be decoded; the fold itself is unused.
            F.bit_xor(F.xxhash64(*df.columns)).alias(_FOLD),
        )
        # Spark names files by their URI (percent-encoded); the file system by its path.
        rows.update({from_uri(str(r[_FILE])): int(r[_ROWS]) for r in per_file.collect()})
    return by_segment(rows, store, manifest)
