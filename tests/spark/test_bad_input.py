"""Every kind of messy input (tests/badinput.py), end to end through the command line's
entry (`neardup.cli.main`, in this process, on the test session): the exact status of
each row that runs through, the exit code and message of each input that must stop."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from badinput import continue_rows, write_continue_corpus, write_lenient_inputs, write_stop_cases
from neardup.cli import main

# report.html is tested in tests/spark/test_report.py and tests/e2e; here it only costs time.
NO_HTML = ("--set", "report.html=false")


def test_messy_rows_each_get_their_documented_status(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inp = write_continue_corpus(tmp_path)
    out = tmp_path / "out"
    assert main(["dedup", "--input", str(inp), "--output", str(out), *NO_HTML]) == 0, capsys.readouterr().err
    rows = {r["id"]: r for r in pq.read_table(out / "clusters").to_pylist()}
    _, expected = continue_rows()
    got = {i: (r["status"], r["reason"]) for i, r in rows.items()}
    want = {i: (status, reason if status == "rejected" else None) for i, (status, reason) in expected.items()}
    assert got == want
    pairs = {7: 8, 9: 10, 11: 12, 14: 13, 17: 16}
    for removed, survivor in pairs.items():
        assert rows[removed]["cluster_id"] == survivor
    kept = pq.read_table(out / "kept")
    rejected = pq.read_table(out / "rejected")
    n_removed = sum(r["status"] in ("exact_duplicate", "near_duplicate") for r in rows.values())
    assert kept.num_rows + n_removed + rejected.num_rows == len(expected)
    assert sorted(rejected.column("id").to_pylist()) == [1, 2, 3]
    # kept/ carries every input column unchanged, the 50 MB document included.
    texts = dict(zip(kept.column("id").to_pylist(), kept.column("text").to_pylist(), strict=True))
    original = {r["id"]: r["text"] for r in pq.read_table(inp).to_pylist()}
    assert all(texts[i] == original[i] for i in texts)
    assert len(texts[5]) > 50_000_000


STOP_CASES = [
    "duplicate ids",
    "empty input directory",
    "invalid utf-8 in jsonl",
    "jsonl with one malformed line",
    "missing id column",
    "missing text column",
    "mixed id types across parquet files",
    "null ids",
    "path does not exist",
    "text not a string",
    "truncated parquet among good ones",
]


@pytest.mark.compat
def test_every_stop_case_is_tested(tmp_path: Path) -> None:
    assert sorted(write_stop_cases(tmp_path)) == STOP_CASES


@pytest.mark.compat
@pytest.mark.parametrize("case", STOP_CASES)
def test_inputs_that_stop_the_job(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    path, extra, code, message = write_stop_cases(tmp_path / "cases")[case]
    out = tmp_path / "out"
    assert main(["dedup", "--input", str(path), "--output", str(out), *extra]) == code
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("neardup: error:")]
    assert len(err) == 1 and message in err[0], err
    assert not out.exists()


@pytest.mark.compat
def test_lenient_inputs_run_through(spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = write_lenient_inputs(tmp_path / "in")
    assert main(["dedup", "--input", str(paths["csv"]), "--output", str(tmp_path / "csv"), *NO_HTML]) == 0
    kept = pq.read_table(tmp_path / "csv" / "kept").to_pylist()
    assert {r["id"] for r in kept} == {"1", "2"}
    assert "caf\ufffd" in next(r["text"] for r in kept if r["id"] == "1")
    assert main(["dedup", "--input", str(paths["jsonl"]), "--output", str(tmp_path / "js"), *NO_HTML]) == 0
    ids = pq.read_table(tmp_path / "js" / "clusters").column("id").to_pylist()
    assert sorted(ids) == ["1", "b-2"]


@pytest.mark.compat
def test_malformed_lines_can_be_rejected_with_file_and_line(spark: Any, tmp_path: Path) -> None:
    """input.malformed: reject puts each malformed JSON line in rejected/ (file, line number,
    the raw line), counts it as input, and goes on with the rest."""
    import gzip
    import json

    import pyarrow.parquet as pq

    from neardup import config
    from neardup.commands.dedup import run

    good = [
        {"id": i, "text": f"document number {i} says something about topic {i % 7} today"} for i in range(40)
    ]
    src = tmp_path / "crawl"
    src.mkdir()
    lines = [json.dumps(r) for r in good[:25]]
    lines.insert(13, '{"id": 99, "text": "an unterminated string}')  # line 14
    lines.insert(19, "not json at all")  # line 20
    (src / "part-0.jsonl").write_text("\n".join(lines) + "\n")
    with gzip.open(src / "part-1.jsonl.gz", "wb") as f:
        f.write(b"".join(json.dumps(r).encode() + b"\n" for r in good[25:30]))
        f.write(b'{"id": 77, "text": "caf\xe9 latin-1 bytes"}\n')  # line 6
        f.write(b"".join(json.dumps(r).encode() + b"\n" for r in good[30:]))
    out = tmp_path / "out"
    cfg = config.load(sets=["input.malformed=reject", "report.html=false"])
    report = run(spark, cfg, str(src), str(out)).report
    assert report["counts"]["input"] == 43 and report["counts"]["malformed"] == 3
    assert report["counts"]["rejected"] == 3 and report["counts"]["kept"] == 40
    clusters = pq.read_table(out / "clusters")
    assert sorted(clusters.column("id").to_pylist()) == list(range(40))
    rejected = pq.read_table(out / "rejected").to_pylist()
    got = sorted((r["reason"].rsplit("/", 1)[-1], r["malformed_line"], r["id"], r["text"]) for r in rejected)
    assert got == [
        ("part-0.jsonl line 14)", b'{"id": 99, "text": "an unterminated string}', None, None),
        ("part-0.jsonl line 20)", b"not json at all", None, None),
        ("part-1.jsonl.gz line 6)", b'{"id": 77, "text": "caf\xe9 latin-1 bytes"}', None, None),
    ]
    assert all(r["reason"].startswith("malformed JSON line (file:") for r in rejected)
