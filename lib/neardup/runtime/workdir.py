"""Finished stages kept on disk, so a rerun after a failure resumes instead of restarting.

A stage's result is written as Parquet to `<work>/<stage>-<fingerprint>/`; Spark's
job commit writes `_SUCCESS` there last, so a directory without it is an
interrupted write and is recomputed. The fingerprint hashes every parameter that
affects the result (and the input files' names, sizes and modification times),
so a result made with other parameters sits in another directory and is never
read; older fingerprints of the same stage are deleted when a new one is written.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from neardup.runtime.fs import FileSystem

log = logging.getLogger("neardup")


def fingerprint(params: Mapping[str, Any]) -> str:
    """A short stable digest of JSON-serializable parameters (key order does not matter)."""
    text = json.dumps(params, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def input_fingerprint(spark: SparkSession, files: list[str]) -> list[tuple[str, int, int]]:
    """(file, size, modification time) of every file the input reads, sorted."""
    files = sorted(files)
    if not files:
        return []
    fs = FileSystem.for_path(spark, files[0])
    return [fs.stat(f) for f in files]


class WorkDir:
    def __init__(self, spark: SparkSession, fs: FileSystem, root: str) -> None:
        self._spark = spark
        self._fs = fs
        self.root = root
        self.resumed: list[str] = []
        self.writer_options: dict[str, str] = {}  # bound the Parquet writer's memory

    def materialize(self, stage: str, fp: str, build: Callable[[], DataFrame]) -> DataFrame:
        """The stage's result read back from disk: reused when finished with the same
        fingerprint, else computed by `build`, written, and read back."""
        path = f"{self.root}/{stage}-{fp}"
        if self._fs.exists(f"{path}/_SUCCESS"):
            log.info("stage %-10s reusing %s", stage, path)
            self.resumed.append(stage)
            return self._spark.read.parquet(path)
        for name in self._fs.list_names(self.root) if self._fs.exists(self.root) else []:
            if name.startswith(f"{stage}-"):
                self._fs.delete(f"{self.root}/{name}")
        built = build()
        # Uncompressed: signatures, hashes and band keys are random bits that no codec shrinks.
        writer = built.write.mode("overwrite").options(**self.writer_options)
        writer.option("compression", "uncompressed").parquet(path)
        # Read back from files: later stages never see a recomputed result. With the schema
        # just written, so Spark runs no job to read it from the files' footers.
        return read_parquet(self._spark, path, built.schema)


def read_parquet(spark: SparkSession, path: str, schema: StructType | None = None) -> DataFrame:
    """Parquet files as a DataFrame; `schema`, when the caller wrote them and knows it,
    spares the job Spark otherwise runs to read it from a footer. (Spark reads any file
    data source as nullable, so the frame is the same either way.)"""
    reader = spark.read if schema is None else spark.read.schema(schema)
    return reader.parquet(path)
