"""Stage of `neardup decontaminate`: the reference (evaluation sets) read and checked,
sized, brought to the driver and made into what every task receives
(`kernels.contamination.Reference`, broadcast as Arrow IPC bytes).

The reference is read as the input is (stages/read.py: the same readers and the same row
checks: non-null, unique ids), but only as Parquet or JSON Lines, and its text's UTF-8
bytes are summed in the same job: a reference above `decontaminate.max_reference_bytes`
stops the run before anything is brought to the driver. Items are numbered in the order
of their ids, so the numbers, and the broadcast, do not depend on how the reference is
split into files or partitions.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from neardup import columns as C
from neardup.config import Config, SurvivorConfig
from neardup.errors import InputDataError, NeardupError, UsageError
from neardup.kernels.contamination import REF, DeconParams, build_reference, reference_bytes
from neardup.runtime.fs import from_uri
from neardup.runtime.memory import human, parse_size
from neardup.stages.read import CORRUPT, ID_TYPES, Input, check_rows, exact_json_lines, read_input
from neardup.stages.tune_sample import collect_arrow

REFERENCE_ID = "reference_id"
FORMATS = ("parquet", "jsonl")


@dataclass(frozen=True)
class ReferenceSet:
    """The reference as the run uses it."""

    ids: DataFrame  # (_ref, reference_id): names the items in matches/
    payload: bytes  # kernels.contamination.reference_bytes: what every task receives
    key: str  # a digest of the payload: a Python worker parses it once per key
    files: list[str]  # the files read, for the run's fingerprint
    items: int
    empty: int  # items that match nothing (null, or empty text once normalized)
    text_bytes: int  # UTF-8 bytes of the items' texts
    ngrams: int  # distinct (n-gram, item) entries


def reference_config(cfg: Config) -> Config:
    """`cfg` with the reference's format and columns as the input's, for the input readers.
    Malformed JSON lines are counted rather than raised here (a reference has no rejected/)."""
    id_col, text_col = cfg.decontaminate.reference_columns(cfg.input)
    inp = dataclasses.replace(
        cfg.input,
        format=cfg.decontaminate.reference_format,
        id_col=id_col,
        text_col=text_col,
        malformed="reject",
    )
    return dataclasses.replace(cfg, input=inp, survivor=SurvivorConfig())


def _check_columns(inp: Input, cfg: Config) -> None:
    fields = {f.name: f.dataType for f in inp.df.schema.fields}
    for role, col in (("id", cfg.input.id_col), ("text", cfg.input.text_col)):
        if col not in fields:
            shown = ", ".join(c for c in fields if c != CORRUPT) or "none"
            raise InputDataError(
                f"reference {inp.path} has no {role} column {col!r} (columns: {shown}); "
                f"set decontaminate.reference_{role}_col or --reference-{role}-col"
            )
    text_type, id_type = fields[cfg.input.text_col], fields[cfg.input.id_col]
    if not isinstance(text_type, T.StringType):
        raise InputDataError(
            f"reference {inp.path}: text column {cfg.input.text_col!r} has type "
            f"{text_type.simpleString()}, expected string"
        )
    if not isinstance(id_type, ID_TYPES):
        raise InputDataError(
            f"reference {inp.path}: id column {cfg.input.id_col!r} has type {id_type.simpleString()}; "
            "ids must be integers, strings, decimals, dates or timestamps"
        )


@contextlib.contextmanager
def _as_reference() -> Iterator[None]:
    """The input readers' and checks' errors say "input <path>": here the path is the reference's."""
    try:
        yield
    except NeardupError as e:
        text = str(e)
        if not text.startswith("input "):
            raise
        raise type(e)("reference " + text.removeprefix("input ")) from None


def _checked(spark: SparkSession, cfg: Config, path: str) -> tuple[Input, int]:
    """The reference read and checked, and its text's bytes."""
    with _as_reference():
        inp = read_input(spark, path, cfg)
    if inp.format not in FORMATS:
        raise UsageError(
            f"reference {path} is read as {inp.format}: a reference must be Parquet or JSON Lines "
            "(decontaminate.reference_format)"
        )
    _check_columns(inp, cfg)
    with _as_reference():
        rows = check_rows(inp, cfg, measure_text=True)
        if rows.recount:  # JSON Lines whose reader's rows cannot be trusted: line by line
            inp = exact_json_lines(spark, inp)
            rows = check_rows(inp, cfg, measure_text=True)
    if rows.malformed:
        raise InputDataError(
            f"reference {path}: {rows.malformed} malformed JSON line(s); a reference is read whole, fix them"
        )
    if rows.rows == 0:
        raise InputDataError(f"reference {path} has no rows")
    return inp, int(rows.text_bytes or 0)


def load_reference(spark: SparkSession, cfg: Config, path: str, params: DeconParams) -> ReferenceSet:
    """Read, check and size the reference at `path`, number its items by id, and build the
    broadcast payload from their texts (collected to the driver: at most
    `decontaminate.max_reference_bytes` of text)."""
    ref_cfg = reference_config(cfg)
    inp, text_bytes = _checked(spark, ref_cfg, path)
    limit = parse_size(cfg.decontaminate.max_reference_bytes)
    if text_bytes > limit:
        raise UsageError(
            f"reference {path} holds {human(text_bytes)} of text, more than "
            f"decontaminate.max_reference_bytes = {cfg.decontaminate.max_reference_bytes}: it is sent "
            "whole to every Python worker; raise that key if they have the memory (docs/design.md) or "
            "split the reference"
        )
    df = inp.df.filter(F.col(CORRUPT).isNull()) if CORRUPT in inp.df.columns else inp.df
    # One partition for the window: the reference is small, and the numbering must be total.
    numbered = df.select(
        F.col(ref_cfg.input.id_col).alias(REFERENCE_ID), F.col(ref_cfg.input.text_col).alias(C.TEXT)
    ).withColumn(REF, (F.row_number().over(Window.orderBy(REFERENCE_ID)) - 1).cast("int"))
    texts = collect_arrow(numbered.select(REF, C.TEXT).orderBy(REF)).column(C.TEXT)
    ref = build_reference(texts, params)
    payload = reference_bytes(ref)
    return ReferenceSet(
        ids=numbered.select(REF, REFERENCE_ID),
        payload=payload,
        key=hashlib.sha256(payload).hexdigest()[:16],
        files=sorted(from_uri(f) for f in inp.df.inputFiles()),
        items=ref.items,
        empty=ref.empty,
        text_bytes=text_bytes,
        ngrams=ref.ngrams,
    )
