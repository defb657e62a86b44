"""The readers fuzzed: random JSON Lines and CSV files, malformed, with empty, blank, binary
and (once in a while) huge rows, run end to end through the command line's entry with
`input.malformed: reject`. Each example must account for every record by a count made
without Spark (tests/adversarial.py: jsonl_records, csv_records) in kept/, clusters/ and
rejected/, or, where the documented outcome is a refusal (a JSON text that is not a
string), stop with one line and exit 3, writing nothing.

Few examples, each a folder of one to three small files (a run each), derandomized (the
same ones on every run, so CI is deterministic); in this process, on the shared session.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adversarial import assert_all_accounted, assert_one_line, csv_records, jsonl_records, snapshot
from inprocess import neardup

FUZZ = settings(
    max_examples=4,
    deadline=None,
    derandomize=True,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
# Verification off: the readers are the point here, and each example is a whole run.
RUN = (
    "--set",
    "input.malformed=reject",
    "--set",
    "report.html=false",
    "--set",
    "verify.method=none",
    "--set",
    "lsh.threshold=0.9",
    "--overwrite",
)
HUGE = 3_000_000  # characters of the huge row: a few MB, past any batch of the test session

# Texts that look like JSON of another kind, and plain ones, and any Unicode.
_texts = st.one_of(
    st.sampled_from(["5", "-1.5", "[x", "{", "true", "", "   ", "\u00a0\u3000", "a b c d e f"]),
    st.text(max_size=60),
)
_binary = st.binary(max_size=40).map(lambda b: b.replace(b"\n", b" "))


def _jsonl_line(kind: str, i: int, text: str, junk: bytes, cut: int, ascii_only: bool) -> bytes:
    good = json.dumps({"id": i, "text": text}, ensure_ascii=ascii_only).encode()
    if kind == "good":
        return good
    if kind == "truncated":  # a strict prefix of an object is never an object
        return good[: max(1, min(cut, len(good) - 1))]
    if kind == "binary":
        return b"#" + junk  # `#` starts no JSON value
    if kind == "bad utf-8":
        return b'{"id": %d, "text": "caf\xe9 %s"}' % (i, junk.hex().encode())
    if kind == "blank":
        return [b"", b"  ", b"\t\r"][cut % 3]
    if kind == "not a string":
        return json.dumps({"id": i, "text": [text] if cut % 2 else cut}).encode()
    raise AssertionError(kind)


_jsonl_kinds = st.sampled_from(
    ["good", "good", "good", "truncated", "binary", "bad utf-8", "blank", "not a string"]
)


@st.composite
def jsonl_files(draw: Any, base: int) -> tuple[bytes, bool]:
    """A JSON Lines file's bytes (ids from `base`), and whether its documented outcome is a
    refusal."""
    # A good row first: the columns are inferred from the rows that parse (with none, the
    # input has no id column: its own refusal, tested in test_bad_input.py).
    kinds = ["good", *draw(st.lists(_jsonl_kinds, max_size=13))]
    lines = [
        _jsonl_line(
            kind, base + i, draw(_texts), draw(_binary), draw(st.integers(0, 60)), draw(st.booleans())
        )
        for i, kind in enumerate(kinds)
    ]
    if draw(st.integers(0, 5)) == 0:  # now and then one huge row
        lines.insert(
            draw(st.integers(0, len(lines))),
            json.dumps({"id": base + 999, "text": "w " * (HUGE // 2)}).encode(),
        )
    ending = draw(st.sampled_from([b"\n", b"\r\n"]))
    data = ending.join(lines) + (ending if draw(st.booleans()) else b"")
    refused = "not a string" in kinds
    return data, refused


def _csv_field(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def _csv_record(kind: str, i: int, text: str, junk: bytes) -> bytes:
    if kind == "good":
        return f"{i},{_csv_field(text)}".encode()
    if kind == "plain":  # unquoted: no quote, comma or line break in it
        plain = "".join(c for c in text if c not in '",\r\n')
        return f"{i},{plain}".encode()
    if kind == "null text":
        return f"{i},".encode()
    if kind == "binary":  # may hold quotes that open a field the file never closes
        return f"{i},".encode() + junk.replace(b"\r", b" ")
    if kind == "unclosed":
        return f'{i},"{text.replace(chr(34), "")}'.encode()
    if kind == "blank":
        return b"  "
    raise AssertionError(kind)


_csv_kinds = st.sampled_from(["good", "good", "plain", "null text", "binary", "unclosed", "blank"])


@st.composite
def csv_files(draw: Any, base: int) -> bytes:
    kinds = ["good", *draw(st.lists(_csv_kinds, max_size=13))]
    records = [b"id,text"] + [
        _csv_record(kind, base + i, draw(_texts), draw(_binary)) for i, kind in enumerate(kinds)
    ]
    if draw(st.integers(0, 5)) == 0:
        records.insert(1, f"{base + 999},{_csv_field('w ' * (HUGE // 2))}".encode())
    ending = draw(st.sampled_from([b"\n", b"\r\n"]))
    return ending.join(records) + ending


def _folders(files: Any) -> Any:
    """One to three files, their ids apart (a file's are from 1000 x its number)."""
    return st.integers(1, 3).flatmap(lambda n: st.tuples(*[files(1000 * k) for k in range(n)]).map(list))


def _folder(root: Path, files: list[bytes], ext: str) -> Path:
    src = root / "in"
    shutil.rmtree(src, ignore_errors=True)
    src.mkdir()
    for i, data in enumerate(files):
        (src / f"part-{i}.{ext}").write_bytes(data)
    return src


def _check(capsys: pytest.CaptureFixture[str], root: Path, src: Path, records: int, refused: bool) -> None:
    out = root / "out"
    shutil.rmtree(out, ignore_errors=True)
    before = snapshot(src)
    ran = neardup(capsys, "dedup", "--input", str(src), "--output", str(out), *RUN)
    if refused:
        assert_one_line(ran.code, ran.err, 3, "not a JSON string")
        assert not out.exists()
    else:
        assert ran.code == 0, ran.err[-3000:]
        assert_all_accounted(out, records)
    assert snapshot(src) == before


def test_fuzzed_json_lines_are_all_accounted_for(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    @FUZZ
    @given(_folders(jsonl_files))
    def one(files: list[tuple[bytes, bool]]) -> None:
        src = _folder(tmp_path, [data for data, _ in files], "jsonl")
        _check(capsys, tmp_path, src, jsonl_records(src), any(refused for _, refused in files))

    one()


def test_fuzzed_csv_files_are_all_accounted_for(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    @FUZZ
    @given(_folders(csv_files))
    def one(files: list[bytes]) -> None:
        src = _folder(tmp_path, files, "csv")
        _check(capsys, tmp_path, src, csv_records(src), refused=False)

    one()
