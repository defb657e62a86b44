"""Reusing an active session (Databricks, notebooks): what it cannot take is reported; so
is a setting the running Spark does not have. The warm-up a local run starts while it
reads its input runs the kernels in one task."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from neardup import config
from neardup.runtime import pydaemon
from neardup.runtime.memory import BatchSizes
from neardup.runtime.session import heap_and_slots, start
from neardup.runtime.sizing import ARROW_BYTES, ARROW_ROWS, CACHE_ROWS, batch_settings
from neardup.stages.sign import sign_params
from neardup.stages.warmup import warm_up

pytestmark = pytest.mark.compat  # .ci/spark35 runs these on Spark 3.5 too


def test_settings_a_live_session_refuses_are_reported(spark: Any) -> None:
    before = spark.conf.get("spark.sql.shuffle.partitions")
    try:
        started = start(None, {"spark.driver.memory": "64g", "spark.sql.shuffle.partitions": "3"})
        assert started.spark is spark and started.reused
        assert started.not_applied == ["spark.driver.memory"]
        assert spark.conf.get("spark.sql.shuffle.partitions") == "3"
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before)


def test_heap_and_slots_of_the_local_session(spark: Any) -> None:
    heap, slots, where = heap_and_slots(spark)
    # conftest: local[2] with a 2g heap (the JVM reports a little less than -Xmx).
    assert (slots, where) == (2, "driver")
    assert 1.5 * 2**30 < heap <= 2 * 2**30


def test_batch_settings_set_only_what_this_spark_knows(spark: Any, caplog: pytest.LogCaptureFixture) -> None:
    """maxBytesPerBatch exists from Spark 4.0: set there, left alone on 3.5 (which would
    ignore it), and a user's own on 3.5 is a warning rather than a silent no-op."""
    sizes = BatchSizes(
        batch_bytes=3 << 20,
        reader_rows=700,
        arrow_rows=500,
        row_group_bytes=8 << 20,
        vectorized_reader=True,
        cache_rows=300,
    )
    spark4 = int(spark.version.split(".")[0]) >= 4
    before = spark.conf.get(ARROW_BYTES, None)
    cache_before = spark.conf.get(CACHE_ROWS, None)
    with caplog.at_level(logging.INFO, logger="neardup"), batch_settings(spark, sizes):
        assert spark.conf.get(ARROW_ROWS) == "500"
        assert spark.conf.get(CACHE_ROWS) == "300"
        assert spark.conf.get(ARROW_BYTES, None) == (str(3 << 20) if spark4 else before)
    assert spark.conf.get(ARROW_BYTES, None) == before  # restored
    assert spark.conf.get(CACHE_ROWS, None) == cache_before
    rows_only = [r.getMessage() for r in caplog.records if "Arrow batches by rows only" in r.getMessage()]
    assert len(rows_only) == (0 if spark4 else 1)
    assert all(f"Spark {spark.version} bounds" in m for m in rows_only)

    caplog.clear()
    with caplog.at_level(logging.INFO, logger="neardup"), batch_settings(spark, sizes, [ARROW_BYTES]):
        assert spark.conf.get(ARROW_BYTES, None) == before  # the user's, untouched
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    want = [f"{ARROW_BYTES} has no effect on Spark {spark.version}: it needs Spark 4.0.0"]
    assert warnings == ([] if spark4 else want)


@pytest.mark.parametrize(
    ("keep_signatures", "method", "rows"), [(False, "exact", 3), (True, "signature", 2), (False, "none", 2)]
)
def test_the_warm_up_runs_the_kernels_in_each_task(
    spark: Any, keep_signatures: bool, method: str, rows: int
) -> None:
    # Two documents signed; with exact verification, their one pair scored too.
    job = warm_up(spark, sign_params(config.load()), keep_signatures, method, 2)
    assert job.rdd.getNumPartitions() == 2
    assert [tuple(r) for r in job.collect()] == [(rows,), (rows,)]


def test_local_workers_fork_from_the_daemon_that_loaded_the_kernels(spark: Any) -> None:
    """The shared session is launched here in local mode, as the command line's: its Python
    workers' parent is neardup's daemon (runtime/pydaemon.py), and a process that runs the
    daemon's preload has every kernel signing and exact scoring call loaded, with nothing
    written on stdout (where pyspark's daemon writes its port)."""
    import subprocess
    import sys

    def parent(batches: Any) -> Any:
        import os

        import pyarrow as pa
        import pyspark

        with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
            args = f.read().split(b"\0")
        for batch in batches:
            n = len(batch)
            yield pa.record_batch({"parent": [args[2].decode()] * n, "pyspark": [pyspark.__file__] * n})

    rows = spark.range(2, numPartitions=2).mapInArrow(parent, "parent string, pyspark string").collect()
    assert {r["parent"] for r in rows} == {pydaemon.MODULE}
    # pyspark from the installed package (its bytecode cached), not from Spark's zip of it,
    # where the JVM is the package's own (no SPARK_HOME elsewhere).
    import os
    from pathlib import Path

    import pyspark

    package = Path(pyspark.__file__).resolve().parent
    if Path(os.environ.get("SPARK_HOME", package)).resolve().is_relative_to(package):
        assert {r["pyspark"] for r in rows} == {pyspark.__file__}
    probe = (
        "from neardup.runtime import pydaemon; pydaemon.preload(); "
        "from neardup.kernels import head_jaccard, minhash, textnorm, hashing; "
        "kernels = [minhash._sign_texts_kernel, minhash._band_keys_kernel, textnorm._collapse_kernel, "
        "hashing._text_hash128_kernel, head_jaccard._jaccard_to_heads_kernel]; "
        "print([len(k.overloads) > 0 for k in kernels])"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert proc.stdout == "[True, True, True, True, True]\n"


@pytest.mark.parametrize("from_json", [True, False])
def test_parquet_profile_reads_the_footers_as_pyarrow_does(
    spark: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch, from_json: bool
) -> None:
    """Rows and bytes per row from the footers (as one JSON document, or object by object
    where the JSON will not parse), equal to what pyarrow reads from the same files."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    from neardup.runtime import sizing

    files = []
    for i, (n, groups) in enumerate([(700, 100), (50, 20)]):
        texts = [f"document {i}-{k} " + "word " * (k % 37) for k in range(n)]
        table = pa.table(
            {"id": list(range(n)), "meta": [{"src": "x" * (k % 5)} for k in range(n)], "text": texts}
        )
        path = tmp_path / f"part-{i}.parquet"
        pq.write_table(table, path, row_group_size=groups)
        files.append(str(path))
    if not from_json:

        class Broken:
            @staticmethod
            def loads(_: str) -> Any:
                raise ValueError("not this parquet-mr's JSON")

        monkeypatch.setattr(sizing, "json", Broken)
    profile = sizing.parquet_profile(spark, files, "text")
    assert profile is not None
    rows = text = total = largest = 0
    for f in files:
        meta = pq.ParquetFile(f).metadata
        rows += meta.num_rows
        for g in range(meta.num_row_groups):
            group = meta.row_group(g)
            for c in range(group.num_columns):
                col = group.column(c)
                total += col.total_uncompressed_size
                if col.path_in_schema == "text":
                    text += col.total_uncompressed_size
                    largest = max(largest, col.total_compressed_size)
    assert meta.num_row_groups > 1 and json  # several row groups a file
    assert (profile.text_per_row, profile.row_per_row, profile.largest_chunk) == (
        text / rows,
        total / rows,
        largest,
    )
