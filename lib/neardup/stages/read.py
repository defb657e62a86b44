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

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from neardup import columns as C
from neardup.config import Config
from neardup.errors import InputDataError, UsageError
from neardup.kernels.policy import PRIORITY
from neardup.runtime.fs import FileSystem, from_uri_column
from neardup.runtime.localpaths import local_file
from neardup.stages.csv_records import csv_records
from neardup.stages.survivor_order import priority_rank

log = logging.getLogger(__name__)

CORRUPT = "_corrupt_record"
# JSON Lines are read as text and each non-blank line parsed to one row (`_json_lines`):
# the raw line beside its parse, under these names, in `Input.lines`.
LINE = "_line_text"
PARSED = "_parsed"
LINE_NO = "_line_no"  # CSV: the line a record starts on
# Jackson refuses a string longer than 20,000,000 characters unless told otherwise; a Java
# string holds at most this many, so no text that reaches the parser is refused for its length.
MAX_STRING_LEN = str(2**31 - 1)
JSON_OPTIONS = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT, "maxStringLen": MAX_STRING_LEN}
# Only "\n" ends a JSON Lines record (a "\r" before it is whitespace to the parser); Spark's
# text reader would also end a line at a lone "\r".
LINE_SEP = "\n"
# Whitespace a blank line may hold (ASCII's, as Python's bytes.strip): not a record.
_BLANK_CHARS = " \t\r\x0b\x0c"

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
    # JSON Lines read line by line (`exact_json_lines`) and CSV: every record as read (LINE)
    # beside its parse (PARSED, a struct of df's columns), one row each: the rows
    # `check_rows` counts, independently of the parser.
    lines: DataFrame | None = None
    # JSON Lines read by Spark's JSON reader: its non-blank lines (text reader's rows), the
    # count its rows are checked against.
    records: DataFrame | None = None


def exact_json_lines(spark: SparkSession, inp: Input) -> Input:
    """`inp` (JSON Lines) read again line by line: each non-blank line exactly one row. For
    an input whose rows from Spark's JSON reader do not match its lines, or may hold a value
    the reader turned into a string (RowCheck.recount). About 3x slower to parse than Spark's
    JSON reader (Jackson from a character stream, every column), so only then."""
    lines = _json_lines(spark, inp.path)
    return Input(lines.select(f"{PARSED}.*"), inp.format, inp.path, lines)


def _non_blank_lines(spark: SparkSession, path: str) -> DataFrame:
    text = spark.read.option("lineSep", LINE_SEP).text(path)
    return text.filter(~_blank(F.col("value")))


def _blank(value: Column) -> Column:
    return F.octet_length(F.call_function("btrim", value, F.lit(_BLANK_CHARS))) == 0


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
        # Spark's JSON reader (fast: it parses the bytes as they are, and only the columns
        # asked for), with Jackson's string limit lifted; `check_rows` counts the lines
        # beside it and, where its rows cannot be trusted, `exact_json_lines` reads again.
        df = reader.options(**JSON_OPTIONS).json(path)
        return Input(df, fmt, path, records=_non_blank_lines(spark, path))
    elif fmt == "csv":
        lines = csv_records(spark, path, cfg, CORRUPT, LINE, PARSED)
        return Input(lines.select(f"{PARSED}.*"), fmt, path, lines)
    else:  # pragma: no cover - config validation forbids it
        raise UsageError(f"unknown input format {fmt}")
    return Input(df, fmt, path)


def _json_lines(spark: SparkSession, path: str) -> DataFrame:
    """Every non-blank line of a JSON Lines input (LINE) and its parse (PARSED).

    The rows are the text reader's: one per line, whatever the parser makes of it, so a
    record the parser fails (a string past Jackson's limit, a line that is not an object,
    invalid UTF-8) is a malformed row, never a missing one (Spark's JSON reader drops some
    and makes several rows of a line holding an array). The schema is inferred by Spark's
    JSON reader (a pass over the input, as before); the corrupt-record column is always in it.
    """
    schema = spark.read.options(**JSON_OPTIONS).json(path).schema
    if CORRUPT not in schema.fieldNames():
        schema = schema.add(CORRUPT, T.StringType())
    text = spark.read.option("lineSep", LINE_SEP).text(path)
    blank = _blank(F.col("value"))
    parsed = F.from_json(F.col("value"), schema, JSON_OPTIONS)
    # Parsed once, in a generator: Spark pushes a filter on a parsed column (the
    # corrupt-record one, asked by every reader of the rows) through a projection by
    # copying the parse into it, and then parsed each line three times; it keeps a filter
    # on a generator's output above the generator.
    once = F.struct(
        F.col("value").alias(LINE),
        parsed.alias(PARSED),
        _valid_utf8(spark, F.col("value")).alias("_utf8"),
    )
    lines = text.filter(~blank).select(F.inline(F.array(once)))
    # A line that parses to no struct at all is malformed too: its raw line is the record;
    # so is invalid UTF-8, as Spark's JSON reader has it (the parser itself would decode
    # the bad bytes as U+FFFD and go on: the text changed without a word).
    whole = F.col(PARSED).isNull() | ~F.col("_utf8")
    fields = [
        F.when(whole, F.col(LINE)).otherwise(F.col(PARSED)[f.name]).alias(f.name)
        if f.name == CORRUPT
        else F.col(PARSED)[f.name].alias(f.name)
        for f in schema.fields
    ]
    return lines.select(LINE, F.struct(*fields).alias(PARSED))


def _valid_utf8(spark: SparkSession, line: Column) -> Column:
    if int(spark.version.split(".")[0]) >= 4:
        return F.call_function("is_valid_utf8", line)  # a scan of the bytes, no copy
    # Spark 3.5: decoding replaces each invalid sequence, so the round trip differs.
    raw = line.cast("binary")
    return F.encode(F.decode(raw, "UTF-8"), "UTF-8") == raw


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
    malformed: int = 0  # malformed records let through by input.malformed: reject
    # JSON Lines through Spark's JSON reader: its rows do not match the lines, or may hold
    # a value it converted; nothing else was checked: read again with `exact_json_lines`.
    recount: bool = False


def check_rows(inp: Input, cfg: Config, measure_text: bool = False) -> RowCheck:
    """One Spark job over the ids: every record counted, no malformed record (or, with
    input.malformed: reject, how many), no JSON text or id of the wrong kind, no null or
    repeated id.

    JSON Lines are counted by their non-blank lines: beside Spark's JSON reader
    (`Input.records`; where they disagree, or a value may have been converted, the RowCheck
    says `recount` and nothing else is checked), or as the rows of the line-by-line read
    (`Input.lines`, one row per line). CSV by its records (`csv_records`), one row each. Shuffles
    the id column once (group by id). Every failure is an InputDataError naming how many rows
    are at fault and two examples. With `measure_text` the same job also sums and maxes the
    texts' byte lengths (for JSON Lines and CSV, whose parser reads every text anyway;
    Parquet's sizes come from its metadata instead).
    """
    df, id_col, text_col = inp.df, cfg.input.id_col, cfg.input.text_col
    if inp.lines is not None:
        parsed = F.col(PARSED)
        bad = parsed[CORRUPT].isNotNull()
        frame, ident, text = inp.lines, parsed[id_col], parsed[text_col]
        fields = {f.name: f.dataType for f in df.schema.fields}
        json = inp.format == "jsonl"
        odd_text = _not_json_string(text, text_col, True) if json and _is_string(fields[text_col]) else None
        odd_id = _not_json_string(ident, id_col, False) if json and _is_string(fields[id_col]) else None
    else:
        frame, ident, text = df, F.col(id_col), F.col(text_col)
        bad = F.col(CORRUPT).isNotNull() if CORRUPT in df.columns else F.lit(False)
        odd_text = odd_id = None
        if inp.records is not None:
            # Spark's JSON reader: a value that may have been another kind of JSON, which
            # only a read line by line can tell (`exact_json_lines`).
            fields = {f.name: f.dataType for f in df.schema.fields}
            if _is_string(fields[text_col]):
                odd_text = _may_be_other_json(text, numbers=True)
            if _is_string(fields[id_col]):
                odd_id = _may_be_other_json(ident, numbers=False)
    zero = F.lit(0).cast("long")
    flag = F.when(bad, 1).otherwise(0).cast("long")
    cols = [F.when(bad, None).otherwise(ident).alias(C.ID), flag.alias("_bad")]
    for name, odd in (("_odd_text", odd_text), ("_odd_id", odd_id)):
        if odd is not None:
            cols.append(F.when(~bad & odd, 1).otherwise(0).cast("long").alias(name))
    if measure_text:
        cols.append(F.when(bad, zero).otherwise(F.coalesce(F.octet_length(text), zero)).alias("_bytes"))
    ids = frame.select(*cols)
    sums = [F.sum(c).alias(c) for c in ("_odd_text", "_odd_id") if c in ids.columns]
    if measure_text:
        sums += [F.sum("_bytes").alias("_bytes"), F.max("_bytes").alias("_max")]
    # Shuffled by id before counting: ids are (nearly) all distinct, so a map-side partial
    # count would only add a column to every shuffled row (2x faster on 1M ids). Malformed
    # records have no id here: they all count under null, apart from the null ids.
    per_id = (
        ids.repartition(C.ID)
        .groupBy(C.ID)
        .agg(F.count(F.lit(1)).alias("_all"), F.sum("_bad").alias("_bad"), *sums)
        .withColumn("n", F.col("_all") - F.col("_bad"))
    )
    is_bad = (F.col("n") > 1) | (F.col(C.ID).isNull() & (F.col("n") > 0))
    more = [F.sum(c).alias(c) for c in ("_odd_text", "_odd_id") if c in ids.columns]
    if measure_text:
        more += [F.sum("_bytes").alias("text_bytes"), F.max("_max").alias("largest")]
    # One job for the common case: the row count and whether anything is wrong.
    totals = per_id.agg(
        F.sum("_all").alias("records"),
        F.sum("_bad").alias("malformed"),
        F.sum("n").alias("rows"),
        F.sum(F.when(F.col(C.ID).isNull(), F.col("n")).otherwise(0)).alias("null_rows"),
        F.sum(F.when(F.col("n") > 1, 1).otherwise(0)).alias("repeated_ids"),
        F.sum(F.when(F.col("n") > 1, F.col("n")).otherwise(0)).alias("repeated_rows"),
        *more,
    ).first()
    assert totals is not None
    malformed = int(totals["malformed"] or 0)
    if inp.records is not None:
        # The independent count: the input's non-blank lines, each one record. Rows the
        # reader dropped or made of one line (a string past a limit, a line holding an array)
        # or values it may have converted: the caller reads again line by line.
        records = inp.records.count()
        suspect = sum(int(totals[k] or 0) for k in ("_odd_text", "_odd_id") if k in ids.columns)
        if records != int(totals["records"] or 0) or suspect:
            return RowCheck(int(totals["rows"] or 0), malformed=malformed, recount=True)
    if malformed and cfg.input.malformed == "fail":
        raise InputDataError(
            f"input {inp.path}: {malformed} malformed {_record_word(inp)}(s), e.g. "
            f"{_examples(inp, bad)}; set input.malformed=reject to put them in rejected/ and go on"
        )
    for col_name, key, role in ((text_col, "_odd_text", "text"), (id_col, "_odd_id", "id")):
        if key in ids.columns and totals[key]:
            odd = odd_text if key == "_odd_text" else odd_id
            assert odd is not None
            kinds = "a number, list, object or boolean" if role == "text" else "a list, object or boolean"
            raise InputDataError(
                f"input {inp.path}: {totals[key]} row(s) have a {role} ({col_name!r}) that is {kinds}, "
                f"not a JSON string, e.g. {_examples(inp, ~bad & odd)}; neardup does not convert it"
            )
    if totals["null_rows"]:
        examples = (
            df.filter(
                F.col(id_col).isNull() & F.col(CORRUPT).isNull()
                if CORRUPT in df.columns
                else F.col(id_col).isNull()
            )
            .limit(2)
            .collect()
        )
        shown = "; ".join(_row_excerpt(r, text_col) for r in examples)
        raise InputDataError(
            f"input {inp.path}: {totals['null_rows']} row(s) have a null id in column {id_col!r}, "
            f"e.g. {shown}"
        )
    if totals["repeated_ids"]:
        worst = per_id.filter(is_bad & F.col(C.ID).isNotNull()).orderBy(F.col("n").desc(), F.col(C.ID))
        eg = ", ".join(f"{r[C.ID]!r} ({r['n']} times)" for r in worst.limit(2).collect())
        raise InputDataError(
            f"input {inp.path}: {totals['repeated_ids']} id(s) in column {id_col!r} are repeated "
            f"({totals['repeated_rows']} rows), e.g. {eg}"
        )
    rows_ = int(totals["rows"] or 0)
    # The parse makes one row of each record: the records counted are the rows and the
    # malformed ones, or something was lost between the reader and the parser.
    records = int(totals["records"] or 0)
    if records != rows_ + malformed:  # pragma: no cover - an invariant of the single pass
        raise InputDataError(f"input {inp.path}: {records} records read, {rows_ + malformed} accounted for")
    if not measure_text:
        return RowCheck(rows_, malformed=malformed)
    return RowCheck(rows_, int(totals["text_bytes"] or 0), int(totals["largest"] or 0), malformed)


def _is_string(t: T.DataType) -> bool:
    return isinstance(t, T.StringType)


def _not_json_string(value: Column, key: str, numbers: bool) -> Column:
    """Whether a JSON Lines value read as a string was something else in the line: Spark's
    parser writes a number, list, object or boolean out as its JSON text where the schema
    (inferred from mixed kinds) says string. Only a value whose text could be such JSON (it
    starts with `[`, `{`, a digit or `-`, or is `true`/`false`) is looked at again: the line
    is parsed once more for that key alone, as the kind it looks like, which succeeds only
    for a value of that kind (a JSON string is never read as a list, number or boolean).
    `numbers` False leaves numbers alone (ids may mix numbers and strings)."""
    head = F.substring(value, 1, 2)
    line = F.col(LINE)

    def parses_as(kind: T.DataType) -> Column:
        schema = T.StructType([T.StructField(key, kind)])
        return F.from_json(line, schema, {"mode": "PERMISSIVE", "maxStringLen": MAX_STRING_LEN})[
            key
        ].isNotNull()

    odd = F.when(head.startswith("["), parses_as(T.ArrayType(T.StringType())))
    odd = odd.when(head.startswith("{"), parses_as(T.MapType(T.StringType(), T.StringType())))
    if numbers:
        odd = odd.when(head.rlike("^-?[0-9]"), parses_as(T.DoubleType()))
    odd = odd.when(value.isin("true", "false"), parses_as(T.BooleanType()))
    return F.coalesce(odd.otherwise(F.lit(False)), F.lit(False))


def _may_be_other_json(value: Column, numbers: bool) -> Column:
    """A string Spark's JSON reader may have written out from a number, list, object or
    boolean (it writes their JSON text): one that is a JSON number, `true`/`false`, or starts
    and ends with brackets or braces. Looked at whole only when its first character fits."""
    head = F.substring(value, 1, 1)
    tail = F.substring(value, -1, 1)
    maybe = F.when((head == "[") & (tail == "]"), True).when((head == "{") & (tail == "}"), True)
    if numbers:
        maybe = maybe.when(head.rlike("^[-0-9]$"), value.rlike("^-?[0-9][0-9.eE+-]*$"))
    maybe = maybe.when(value.isin("true", "false"), True)
    return F.coalesce(maybe.otherwise(False), F.lit(False))


def _record_word(inp: Input) -> str:
    return {"csv": "CSV record", "jsonl": "JSON line"}.get(inp.format, "record")


def _examples(inp: Input, which: Column) -> str:
    """Two rows of `which`, each as `file line N: 'text'`."""
    frame = inp.lines if inp.lines is not None else inp.df
    raw = F.col(LINE) if inp.lines is not None else F.col(CORRUPT)
    if LINE_NO in frame.columns:  # CSV: the records know their file and line
        got = frame.filter(which).select("_file", LINE_NO, raw.alias("_raw")).limit(2).collect()
        return "; ".join(f"{r['_file']} line {r[LINE_NO]}: {r['_raw'][:60]!r}" for r in got)
    # Spark's JSON reader refuses a query of the corrupt-record column alone: the id comes along.
    other = next(c for c in frame.columns if c != CORRUPT)
    file = from_uri_column(F.input_file_name()).alias("_file")
    picked = frame.filter(which).select(file, raw.alias("_raw"), F.col(other))
    rows = picked.limit(2).collect()
    return "; ".join(_where(r["_file"], r["_raw"]) for r in rows)


def malformed_records(spark: SparkSession, inp: Input) -> DataFrame:
    """The malformed records of a JSON Lines or CSV input: (_file, _line, _raw, _kind:
    "JSON line" or "CSV record", for their reason in rejected/)."""
    kind = F.lit(_record_word(inp)).alias("_kind")
    if inp.lines is not None and LINE_NO in inp.lines.columns:
        bad = inp.lines.filter(F.col(PARSED)[CORRUPT].isNotNull())
        return bad.select(
            "_file", F.col(LINE_NO).cast("long").alias("_line"), F.col(LINE).alias("_raw"), kind
        )
    return malformed_lines(spark, inp.df).select("_file", "_line", "_raw", kind)


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
        lines = (
            spark.read.option("lineSep", LINE_SEP)
            .text(file)
            .select(
                F.shiftright(mid, 33).alias("_part"),
                mid.bitwiseAND((1 << 33) - 1).alias("_row"),
                F.col("value").alias("_raw"),
                _without_cr(F.col("value")).alias("_key"),
            )
        )
        counts = sorted((r["_part"], r["count"]) for r in lines.groupBy("_part").count().collect())
        first, offset = {}, 0
        for part, count in counts:
            first[part] = offset
            offset += count
        starts = spark.createDataFrame(list(first.items()), "_part long, _first long")
        # Matched without a line's final CR: Spark's JSON reader ends its lines at CRLF (its
        # corrupt record has no CR), the line-by-line read at LF only.
        mine = bad.filter(F.col("_file") == file).select(_without_cr(F.col("_raw")).alias("_key"))
        wanted = F.broadcast(mine.distinct())
        located.append(
            lines.join(wanted, "_key")
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


def _without_cr(line: Column) -> Column:
    return F.regexp_replace(line, "\r$", "")


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
