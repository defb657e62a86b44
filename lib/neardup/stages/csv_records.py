"""CSV records found from the file's lines, independently of Spark's CSV parser.

Spark's multi-line CSV reader decides alone where a record ends: an unterminated quote
makes it swallow the rest of the file into one row, and nothing says so. Here the records
are cut from the text reader's lines by a rule anyone can recount (tests/adversarial.py's
`csv_records` does, in Python):

- a record starts on a line that is not blank (only spaces, tabs, CR) and before which the
  file holds an even number of `"` characters (so no quoted field is open);
- it runs up to the next line where one starts (the lines of its quoted fields with it);
  blank lines between records belong to none;
- with a header, each file's first record is its header;
- a record holding an odd number of `"` opens a quoted field the file never closes: it is
  malformed (it is the file's last, since no record starts while a field is open), with
  the line it starts on. The lines after its quote are not read as records of their own.

Each record's text is then parsed by `from_csv`, to exactly one row, with the columns
Spark's CSV reader gives the input (the header's names, every column a string): a file the
parser cannot cut up differently, and no record lost or merged without a word.

One sort of the lines per file (the quote count before each line); records of one line,
nearly all of them, are parsed where they are, and only the lines of multi-line records
are grouped.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from neardup.config import Config
from neardup.runtime.fs import from_uri_column

CSV_OPTIONS = {"escape": '"', "mode": "PERMISSIVE"}
_BLANK_CHARS = " \\t\\r"


def csv_records(
    spark: SparkSession, path: str, cfg: Config, corrupt: str, line: str, parsed: str
) -> DataFrame:
    """(_file, _line_no, `line`: the record's text, `parsed`: its row as a struct with the
    `corrupt` column set where the record is malformed) for every record of every file."""
    header = cfg.input.csv_header
    # The columns Spark's own reader gives (the first file's header, or _c0, _c1, ...);
    # it reads one line for them.
    columns = (
        spark.read.option("header", str(header).lower())
        .options(**CSV_OPTIONS)
        .option("multiLine", "true")
        .csv(path)
        .schema
    )
    schema = T.StructType([*columns.fields, T.StructField(corrupt, T.StringType())])
    pos = F.monotonically_increasing_id()
    text = (
        spark.read.option("lineSep", "\n")
        .text(path)
        .select(
            from_uri_column(F.input_file_name()).alias("_file"),
            pos.alias("_pos"),
            # Spark's CSV reader ends a line at CRLF too: the CR is no part of a value.
            F.regexp_replace(F.col("value"), "\r$", "").alias("_v"),
        )
    )
    # Counted on the decoded line: a `"` byte is never part of an invalid UTF-8 sequence
    # there (Spark's own character count of raw bytes could skip one after a bad lead byte).
    quotes = F.length(F.regexp_replace(F.col("_v"), '[^"]+', ""))
    # One file's lines are its splits' rows in order, and the splits are numbered in order:
    # `_pos` orders a file's lines.
    in_file = Window.partitionBy("_file").orderBy("_pos")
    before = F.coalesce(F.sum(quotes).over(in_file.rowsBetween(Window.unboundedPreceding, -1)), F.lit(0))
    blank = F.octet_length(F.expr(f"trim(BOTH '{_BLANK_CHARS}' FROM _v)")) == 0
    lines = text.select(
        "_file",
        "_pos",
        "_v",
        quotes.alias("_q"),
        F.row_number().over(in_file).alias("_line_no"),
        ((before % 2 == 0) & ~blank).alias("_starts"),
        (before % 2 == 0).alias("_closed"),
    )
    numbered = lines.withColumn(
        "_rec", F.sum(F.col("_starts").cast("long")).over(in_file.rowsBetween(Window.unboundedPreceding, 0))
    ).filter(~(F.col("_closed") & ~F.col("_starts")))  # blank lines between records
    # A record of one line: it starts here and its quotes close on it (nearly every record).
    single = F.col("_starts") & (F.col("_q") % 2 == 0)
    one = numbered.filter(single).select("_file", "_rec", "_line_no", F.col("_v").alias("_text"), "_q")
    # The others: their lines gathered in order (a file's lines are in one partition since
    # the sort, so this groups without another shuffle).
    many = (
        numbered.filter(~single)
        .groupBy("_file", "_rec")
        .agg(
            F.min("_line_no").alias("_line_no"),
            F.sort_array(F.collect_list(F.struct("_pos", "_v"))).alias("_parts"),
            F.sum("_q").alias("_q"),
        )
        .select("_file", "_rec", "_line_no", F.concat_ws("\n", F.col("_parts._v")).alias("_text"), "_q")
    )
    records = one.unionByName(many)
    if header:
        records = records.filter(F.col("_rec") > 1)
    unclosed = F.col("_q") % 2 == 1
    ddl = ", ".join(f"`{f.name.replace('`', '``')}` STRING" for f in schema.fields)
    row = F.when(~unclosed, F.from_csv(F.col("_text"), ddl, _options(corrupt)))
    fields = [
        F.when(F.col("_unclosed"), F.col(line)).otherwise(F.col("_row")[f.name]).alias(f.name)
        if f.name == corrupt
        else F.col("_row")[f.name].alias(f.name)
        for f in schema.fields
    ]
    return records.select(
        "_file", "_line_no", F.col("_text").alias(line), unclosed.alias("_unclosed"), row.alias("_row")
    ).select("_file", "_line_no", line, F.struct(*fields).alias(parsed))


def _options(corrupt: str) -> dict[str, str]:
    return {**CSV_OPTIONS, "columnNameOfCorruptRecord": corrupt}
