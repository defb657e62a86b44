"""Reading the input corpus and checking its id and text columns.

Spark stage. `read_input` returns the input rows with every column unchanged
(the same frame is read again at the end to write kept/ and rejected/, so the
outputs carry the user's columns exactly as they came in).
"""

from __future__ import annotations

import gzip
import logging
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from neardup import columns as C
from neardup.config import Config
from neardup.errors import InputDataError, UsageError
from neardup.kernels.policy import PRIORITY
from neardup.runtime.fs import FileSystem, from_uri_column
from neardup.runtime.localpaths import local_file
from neardup.stages.survivor_order import priority_rank

log = logging.getLogger(__name__)

CORRUPT = "_corrupt_record"

_EXTENSIONS = {
    ".parquet": "parquet",
    ".jsonl": "jsonl",
    ".json": "jsonl",
    ".ndjson": "jsonl",
    ".jsonl.gz": "jsonl",
    ".json.gz": "jsonl",
    ".ndjson.gz": "jsonl",
    ".csv": "csv",
    ".csv.gz": "csv",
}

# Id types whose order is total and stable across runs (floats are not: NaN, -0.0).
ID_TYPES = (
    T.ByteType,
    T.ShortType,
    T.IntegerType,
    T.LongType,
    T.StringType,
    T.DecimalType,
    T.DateType,
    T.TimestampType,
    T.TimestampNTZType,
)

# Types of survivor.priority_column: its values are compared with the list as text.
_PRIORITY_TYPES = (T.StringType, T.ByteType, T.ShortType, T.IntegerType, T.LongType)


@dataclass(frozen=True)
class Input:
    """The input frame and what was learnt reading it."""

    df: DataFrame
    format: str
    path: str


def detect_format(path: str, fs: FileSystem) -> str:
    """parquet | jsonl | csv from the path's extension, or from the files in a directory."""
    names = [path]
    if fs.is_dir(path):
        names = [n for n in fs.list_names(path) if not n.startswith(("_", "."))]
        if not names:
            raise InputDataError(f"input {path} is an empty directory")
    for name in names:
        lower = name.lower()
        for ext in sorted(_EXTENSIONS, key=len, reverse=True):
            if lower.endswith(ext):
                return _EXTENSIONS[ext]
    raise UsageError(
        f"cannot tell the format of input {path} from its file names; pass --format parquet|jsonl|csv|table"
    )


def read_input(spark: SparkSession, path: str, cfg: Config) -> Input:
    """Read `path` (file or directory, or a catalog table name) in the configured format."""
    fmt = cfg.input.format
    if fmt == "table":
        if not spark.catalog.tableExists(path):
            raise UsageError(f"input table {path} does not exist")
        return Input(spark.table(path), fmt, path)
    fs = FileSystem.for_path(spark, path)
    if not fs.exists(path):
        raise UsageError(f"input {path} does not exist")
    if fs.is_empty_dir(path):
        raise InputDataError(f"input {path} is an empty directory (no data files)")
    if fmt == "auto":
        fmt = detect_format(path, fs)
    reader = spark.read
    if fmt == "parquet":
        df = reader.parquet(path)
    elif fmt == "jsonl":
        df = reader.option("mode", "PERMISSIVE").option("columnNameOfCorruptRecord", CORRUPT).json(path)
    elif fmt == "csv":
        df = (
            reader.option("header", str(cfg.input.csv_header).lower())
            .option("multiLine", "true")
            .option("escape", '"')
            .option("mode", "PERMISSIVE")
            .csv(path)
        )
    else:  # pragma: no cover - config validation forbids it
        raise UsageError(f"unknown input format {fmt}")
    return Input(df, fmt, path)


def check_columns(inp: Input, cfg: Config) -> None:
    """Schema checks (no Spark job): the id and text columns exist and have usable types."""
    df, id_col, text_col = inp.df, cfg.input.id_col, cfg.input.text_col
    names = df.columns
    for role, col in (("id", id_col), ("text", text_col)):
        if col not in names:
            shown = ", ".join(c for c in names if c != CORRUPT) or "none"
            raise InputDataError(
                f"input {inp.path} has no {role} column {col!r} (columns: {shown}); set input.{role}_col"
            )
    fields = {f.name: f.dataType for f in df.schema.fields}
    if not isinstance(fields[text_col], T.StringType):
        raise InputDataError(
            f"input {inp.path}: text column {text_col!r} has type "
            f"{fields[text_col].simpleString()}, expected string"
        )
    if not isinstance(fields[id_col], ID_TYPES):
        raise InputDataError(
            f"input {inp.path}: id column {id_col!r} has type {fields[id_col].simpleString()}; "
            "ids must be integers, strings, decimals, dates or timestamps"
        )
    s = cfg.survivor
    used = {"column": s.column, "priority_column": s.priority_column if s.policy == PRIORITY else None}
    for key, wanted in used.items():
        if wanted and wanted not in names:
            raise UsageError(
                f"config key survivor.{key} names {wanted!r}, which input {inp.path} does not have"
            )
    source = used["priority_column"]
    # Values are compared with the list as text: a string's or an integer's is what a user writes.
    if source and not isinstance(fields[source], _PRIORITY_TYPES):
        raise UsageError(
            f"config key survivor.priority_column names {source!r}, of type "
            f"{fields[source].simpleString()}; it must be a string or integer column"
        )


@dataclass(frozen=True)
class RowCheck:
    """What `check_rows` learnt: the row count and, when it read the text, its bytes."""

    rows: int  # rows with an id (malformed lines not included)
    text_bytes: int | None = None  # UTF-8 bytes of all texts
    largest_text: int | None = None  # UTF-8 bytes of the longest text
    malformed: int = 0  # malformed JSON lines let through by input.malformed: reject


def check_rows(inp: Input, cfg: Config, measure_text: bool = False) -> RowCheck:
    """One Spark job over the ids: no malformed lines, no null or repeated id.

    Shuffles the id column once (group by id). Every failure is an InputDataError
    naming how many rows are at fault and two examples. With `measure_text` the same
    job also sums and maxes the texts' byte lengths (for JSON Lines and CSV, whose
    parser reads every text anyway; Parquet's sizes come from its metadata instead).
    """
    df, id_col = inp.df, cfg.input.id_col
    malformed = 0
    if CORRUPT in df.columns:
        # Spark refuses a query of the corrupt-record column alone; the id comes along.
        bad = df.filter(F.col(CORRUPT).isNotNull()).select(
            from_uri_column(F.input_file_name()).alias("_file"), F.col(CORRUPT), F.col(id_col)
        )
        rows = bad.limit(2).collect()
        if rows:
            # count() alone would prune the query to the corrupt column, which Spark refuses.
            agg = bad.agg(F.count(F.lit(1)).alias("n"), F.count(F.col(id_col)).alias("_ids")).first()
            malformed = int(agg["n"]) if agg is not None else len(rows)
            if cfg.input.malformed == "fail":
                eg = "; ".join(_where(r["_file"], r[CORRUPT]) for r in rows)
                raise InputDataError(
                    f"input {inp.path}: {malformed} malformed JSON line(s), e.g. {eg}; "
                    "set input.malformed=reject to put them in rejected/ and go on"
                )
        df = df.filter(F.col(CORRUPT).isNull())
    # Shuffled by id before counting: ids are (nearly) all distinct, so a map-side partial
    # count would only add a column to every shuffled row (2x faster on 1M ids).
    cols = [F.col(id_col).alias(C.ID)]
    if measure_text:
        cols.append(F.coalesce(F.octet_length(cfg.input.text_col), F.lit(0)).alias("_bytes"))
    ids = df.select(*cols)
    sums = [F.sum("_bytes").alias("_bytes"), F.max("_bytes").alias("_max")] if measure_text else []
    per_id = ids.repartition(C.ID).groupBy(C.ID).agg(F.count(F.lit(1)).alias("n"), *sums)
    is_bad = (F.col("n") > 1) | F.col(C.ID).isNull()
    # One job for the common case: the row count and whether anything is wrong.
    more = [F.sum("_bytes").alias("text_bytes"), F.max("_max").alias("largest")] if measure_text else []
    totals = per_id.agg(
        F.sum("n").alias("rows"),
        F.sum(F.when(F.col(C.ID).isNull(), F.col("n")).otherwise(0)).alias("null_rows"),
        F.sum(F.when(F.col("n") > 1, 1).otherwise(0)).alias("repeated_ids"),
        F.sum(F.when(F.col("n") > 1, F.col("n")).otherwise(0)).alias("repeated_rows"),
        *more,
    ).first()
    assert totals is not None
    if totals["null_rows"]:
        examples = df.filter(F.col(id_col).isNull()).limit(2).collect()
        shown = "; ".join(_row_excerpt(r, cfg.input.text_col) for r in examples)
        raise InputDataError(
            f"input {inp.path}: {totals['null_rows']} row(s) have a null id in column {id_col!r}, "
            f"e.g. {shown}"
        )
    if totals["repeated_ids"]:
        worst = per_id.filter(is_bad).orderBy(F.col("n").desc(), F.col(C.ID)).limit(2).collect()
        eg = ", ".join(f"{r[C.ID]!r} ({r['n']} times)" for r in worst)
        raise InputDataError(
            f"input {inp.path}: {totals['repeated_ids']} id(s) in column {id_col!r} are repeated "
            f"({totals['repeated_rows']} rows), e.g. {eg}"
        )
    if not measure_text:
        return RowCheck(int(totals["rows"] or 0), malformed=malformed)
    rows_ = int(totals["rows"] or 0)
    return RowCheck(rows_, int(totals["text_bytes"] or 0), int(totals["largest"] or 0), malformed)


# Line numbers of malformed lines are found for at most this many files (each is read again).
LOCATED_FILES = 20


def malformed_lines(spark: SparkSession, df: DataFrame, files_limit: int = LOCATED_FILES) -> DataFrame:
    """The malformed lines of a JSON Lines input: (_file: string, _line: long, _raw: string).

    Spark's JSON reader does not know line numbers, so each file with malformed lines
    (the first `files_limit` of them; the others get a null `_line`) is read again as text,
    and its lines numbered in the JVM: a row's partition and position come from
    `monotonically_increasing_id`, and one file's partitions are its splits in order. A
    line that occurs twice in a file, malformed both times, is reported at both places.
    """
    # Spark refuses a query of the corrupt-record column alone, and would prune any other
    # column away again in the queries below: the (few) malformed lines are materialized.
    other = next(c for c in df.columns if c != CORRUPT)
    bad = (
        df.filter(F.col(CORRUPT).isNotNull())
        .select(
            from_uri_column(F.input_file_name()).alias("_file"),
            F.col(CORRUPT).alias("_raw"),
            F.col(other).alias("_other"),
        )
        .checkpoint(eager=True)
        .drop("_other")
    )
    files = [
        r["_file"] for r in bad.select("_file").distinct().orderBy("_file").limit(files_limit + 1).collect()
    ]
    located = []
    for file in files[:files_limit]:
        mid = F.monotonically_increasing_id()
        lines = spark.read.text(file).select(
            F.shiftright(mid, 33).alias("_part"),
            mid.bitwiseAND((1 << 33) - 1).alias("_row"),
            F.col("value").alias("_raw"),
        )
        counts = sorted((r["_part"], r["count"]) for r in lines.groupBy("_part").count().collect())
        first, offset = {}, 0
        for part, count in counts:
            first[part] = offset
            offset += count
        starts = spark.createDataFrame(list(first.items()), "_part long, _first long")
        wanted = F.broadcast(bad.filter(F.col("_file") == file).select("_raw").distinct())
        located.append(
            lines.join(wanted, "_raw")
            .join(F.broadcast(starts), "_part")
            .select(F.lit(file).alias("_file"), (F.col("_first") + F.col("_row") + 1).alias("_line"), "_raw")
        )
    rest = bad.filter(~F.col("_file").isin(files[:files_limit])).select(
        "_file", F.lit(None).cast("long").alias("_line"), "_raw"
    )
    out = rest
    for frame in located:
        out = out.unionByName(frame)
    return out


def _where(file: str, line: str) -> str:
    """`file line N: 'text'` (the line number is found for local files; else file and text)."""
    excerpt = repr(line[:60])
    number = _line_number(file, line)
    return f"{file} line {number}: {excerpt}" if number else f"{file}: {excerpt}"


def _line_number(file: str, line: str) -> int | None:
    path = local_file(file)  # `file` is a Hadoop path (from_uri_column), not a URI
    if path is None:
        return None
    opener: Any = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8", errors="replace") as f:
            for i, text in enumerate(f, start=1):
                if text.rstrip("\r\n") == line.rstrip("\r\n"):
                    return i
    except OSError:
        return None
    return None


def _row_excerpt(row: object, text_col: str) -> str:
    d = row.asDict()  # type: ignore[attr-defined]
    text = d.get(text_col)
    return f"text {str(text)[:40]!r}" if text is not None else repr({k: v for k, v in d.items()})[:80]


def documents(df: DataFrame, cfg: Config) -> DataFrame:
    """Input rows -> the narrow frame every stage works on.

    Output schema: _id (input id type), _text (string, may be null), _rank
    (survivor.column or null), and under survivor.policy priority _priority (int, never
    null: `survivor_order.priority_rank`). The text's length is measured where it is signed:
    Spark's `length` decodes every character in the JVM (4.6 s of 10.6 for reading 1M 2 KB
    documents into Python, against 0.1 s with Arrow's kernel).
    """
    s = cfg.survivor
    rank = F.col(s.column) if s.column else F.lit(None).cast("long")
    cols = [
        F.col(cfg.input.id_col).alias(C.DOC_ID),
        F.col(cfg.input.text_col).alias(C.TEXT),
        rank.alias(C.RANK),
    ]
    if s.policy == PRIORITY:
        assert s.priority_column is not None  # SurvivorConfig requires it
        cols.append(priority_rank(s.priority_column, s.priority).alias(C.PRIORITY))
    return df.select(*cols)
