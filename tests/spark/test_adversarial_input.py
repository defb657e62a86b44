"""Messy input, end to end through the command line's entry on the test session: every
input record accounted for by a count made without Spark (tests/adversarial.py), nothing
around the output touched, and either a run to the end or one line and exit 3.

- a JSON line longer than Jackson's default limit (20,000,000 characters) is processed;
- JSON text or ids of another kind (a number, list, object where a string is expected)
  are refused, naming the file and line;
- a CSV quote that is never closed is a malformed record with its line (exit 3, or a row
  of rejected/ with `input.malformed: reject`), never a row that swallowed the rest;
- a Parquet file whose text or id column has another name or type among the others is
  named (exit 3), never read as null texts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from adversarial import (
    assert_all_accounted,
    assert_one_line,
    assert_untouched,
    csv_records,
    jsonl_records,
    snapshot,
)
from inprocess import neardup

NO_HTML = ("--set", "report.html=false")


def _docs(n: int, start: int = 0) -> list[dict[str, Any]]:
    return [
        {"id": i, "text": f"document {i} speaks of topic {i % 5} in words of its own {i * 7} {i * 13}"}
        for i in range(start, start + n)
    ]


def _run(capsys: pytest.CaptureFixture[str], inp: Path, out: Path, *extra: str) -> Any:
    return neardup(capsys, "dedup", "--input", str(inp), "--output", str(out), *NO_HTML, *extra)


def test_a_json_line_past_jacksons_limit_is_read(spark: Any, tmp_path: Path) -> None:
    """Spark's JSON reader dropped a record with a string over 20,000,000 characters (counted
    neither as input nor as malformed): now it is read whole, a row like any other. (The
    run end to end, on a 100 MB line: tests/e2e/test_huge_rows.py.)"""
    from neardup import config
    from neardup.harness import open_input

    src = tmp_path / "in"
    src.mkdir()
    big = "long " * 4_100_001  # 20,500,005 characters
    rows = [json.dumps(r) for r in _docs(20)]
    rows.insert(7, json.dumps({"id": 100, "text": big}))
    (src / "part-0.jsonl").write_text("\n".join(rows) + "\n")
    opened = open_input(spark, config.load(), str(src))
    assert (opened.check.rows, opened.check.malformed) == (jsonl_records(src), 0) == (21, 0)
    assert opened.check.largest_text == len(big)
    got = opened.source.filter("id = 100").selectExpr("length(text) AS n").first()
    assert got is not None and got["n"] == len(big)


@pytest.mark.parametrize(
    ("value", "role"),
    [(5, "text"), (["a", "list"], "text"), ({"an": "object"}, "text"), (True, "text"), ([1, 2], "id")],
)
def test_json_values_of_another_kind_are_refused(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], value: object, role: str
) -> None:
    """A number, list, object or boolean where the other rows have a string: Spark would
    turn it into a string (its JSON text) and deduplicate it. Refused, naming file and line."""
    src = tmp_path / "in.jsonl"
    rows = [json.dumps(r) for r in _docs(12)]
    odd = {"id": 50, "text": value} if role == "text" else {"id": value, "text": "an id that is a list"}
    if role == "id":
        rows[3] = json.dumps({"id": "s-3", "text": "a string id among numbers"})
    rows.insert(5, json.dumps(odd))  # line 6
    src.write_text("\n".join(rows) + "\n")
    before = snapshot(tmp_path)
    ran = _run(capsys, src, tmp_path / "out")
    assert_one_line(ran.code, ran.err, 3, f"have a {role} ", "not a JSON string", "in.jsonl line 6")
    assert not (tmp_path / "out").exists()
    assert_untouched(before, tmp_path)


def _unclosed_csv(path: Path) -> None:
    path.write_text(
        "id,text\n"
        '1,"a first row, quoted"\n'
        '2,"a field over\n\ntwo lines"\n'
        "3,a plain row\n"
        '4,"a quote never closed\n'  # line 7
        '5,"the row after it"\n'
        "6,another plain row\n"
    )


def test_an_unterminated_csv_quote_stops_the_run_with_its_line(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "in.csv"
    _unclosed_csv(src)
    before = snapshot(tmp_path)
    ran = _run(capsys, src, tmp_path / "out")
    assert_one_line(
        ran.code, ran.err, 3, "1 malformed CSV record(s)", "in.csv line 7", "input.malformed=reject"
    )
    assert_untouched(before, tmp_path)


def test_an_unterminated_csv_quote_is_rejected_never_merged(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With input.malformed: reject, the record from the unclosed quote to the end of the
    file is one row of rejected/ naming its line; the rows before it run through."""
    src = tmp_path / "in.csv"
    _unclosed_csv(src)
    out = tmp_path / "out"
    ran = _run(capsys, src, out, "--set", "input.malformed=reject")
    assert ran.code == 0, ran.err
    counts = assert_all_accounted(out, csv_records(src))
    assert counts == {"unique": 3, "malformed": 1}
    texts = {r["id"]: r["text"] for r in pq.read_table(out / "kept").to_pylist()}
    assert texts == {"1": "a first row, quoted", "2": "a field over\n\ntwo lines", "3": "a plain row"}
    (bad,) = pq.read_table(out / "rejected").to_pylist()
    assert bad["reason"].startswith("malformed CSV record (file:") and bad["reason"].endswith(
        "in.csv line 7)"
    )
    assert bad["malformed_line"] == b'4,"a quote never closed\n5,"the row after it"\n6,another plain row'


@pytest.mark.parametrize("change", ["renamed text", "text of another type", "id of another type"])
def test_a_parquet_file_with_another_schema_is_named(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], change: str
) -> None:
    """Spark reads every file with one file's schema: a file whose text column is named
    `body` gave "null text" rejections and its column was dropped. Now the file is named."""
    src = tmp_path / "in"
    src.mkdir()
    pq.write_table(pa.Table.from_pylist(_docs(10)), src / "part-0.parquet")
    other = _docs(10, start=10)
    if change == "renamed text":
        other = [{"id": r["id"], "body": r["text"]} for r in other]
    elif change == "text of another type":
        other = [{"id": r["id"], "text": r["text"].encode()} for r in other]
    else:
        other = [{"id": str(r["id"]), "text": r["text"]} for r in other]
    pq.write_table(pa.Table.from_pylist(other), src / "part-1.parquet")
    before = snapshot(tmp_path)
    ran = _run(capsys, src, tmp_path / "out")
    column = "'text'" if "text" in change else "'id'"
    assert_one_line(
        ran.code, ran.err, 3, "part-1.parquet cannot be read with the first file's schema", column
    )
    assert_untouched(before, tmp_path)
