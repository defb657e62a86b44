"""Every Parquet file of the input has the id and text columns, of the same type.

Spark reads a directory of Parquet files with one file's schema: a file whose text column
has another name is read as null texts (its own column dropped), and a file whose id has
another type fails somewhere in the middle of the job. Here each file's footer is read
(through Hadoop's FileSystem, any scheme, no data read) before anything else, and the first
file that differs from the first file is named.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyspark.sql import SparkSession

from neardup.errors import InputDataError
from neardup.runtime.java import java_class


def check_parquet_files(spark: SparkSession, path: str, files: Sequence[str], columns: Sequence[str]) -> None:
    """InputDataError naming the first of `files` whose `columns` (id, text) are missing or
    of another Parquet type than in `files[0]`."""
    if len(files) < 2:
        return
    jvm: Any = spark._jvm
    jsc: Any = spark._jsc
    conf = jsc.hadoopConfiguration()
    first: dict[str, str] | None = None
    for name in files:
        reader = java_class(jvm, "org.apache.parquet.hadoop.ParquetFileReader").open(
            java_class(jvm, "org.apache.parquet.hadoop.util.HadoopInputFile").fromPath(
                java_class(jvm, "org.apache.hadoop.fs.Path")(name), conf
            )
        )
        try:
            schema = reader.getFooter().getFileMetaData().getSchema()
        finally:
            reader.close()
        got = {c: _type(schema.getType(c)) for c in columns if schema.containsField(c)}
        if first is None:
            first = got
            continue
        for col in columns:
            if col in first and col not in got:
                names = ", ".join(str(f.getName()) for f in schema.getFields())
                raise InputDataError(
                    f"input {path}: file {name} cannot be read with the first file's schema: "
                    f"it has no column {col!r} (its columns: {names})"
                )
            if col in first and got[col] != first[col]:
                raise InputDataError(
                    f"input {path}: file {name} cannot be read with the first file's schema: "
                    f"its column {col!r} is {got[col]}, the first file's {first[col]}"
                )


def _type(t: Any) -> str:
    """A column's Parquet type without its repetition (a writer may mark a column required
    or optional for the same data)."""
    if t.isPrimitive():
        logical = t.getLogicalTypeAnnotation()
        name = str(t.asPrimitiveType().getPrimitiveTypeName()).lower()
        return f"{name} ({logical})" if logical is not None else name
    return " ".join(str(t).split()[1:])
