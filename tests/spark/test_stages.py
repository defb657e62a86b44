"""Small hand-made frames through the whole job: exact copies, survivor policies,
rejected rows, and awkward ids. Expected results are written out by hand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup import config
from neardup.errors import InputDataError, UsageError
from neardup.pipeline import run

BASE = (
    "the quick brown fox jumps over the lazy dog while the cat sleeps on the warm mat "
    "and the bird sings a song about rivers mountains valleys and the sea far away"
)
OTHER = (
    "completely different words appear in this second text which shares nothing at all "
    "with the first one because it talks about trains stations tickets and timetables"
)
THIRD = (
    "a third document about cooking pasta with tomatoes garlic basil olive oil and salt for dinner tonight"
)


def _write(tmp: Path, rows: list[dict[str, Any]], name: str = "in.parquet") -> str:
    path = tmp / name
    pq.write_table(pa.Table.from_pylist(rows), path)
    return str(path)


def _run(spark: Any, inp: str, out: Path, *sets: str) -> dict[Any, dict[str, Any]]:
    cfg = config.load(sets=list(sets))
    run(spark, cfg, inp, str(out))
    return {r["id"]: r for r in pq.read_table(out / "clusters").to_pylist()}


def test_exact_copies_and_policies(spark: Any, tmp_path: Path) -> None:
    near = BASE + " today"  # a near duplicate: one word appended, J = 29/30
    rows = [
        {"id": 300, "text": BASE, "q": 0.5},
        {"id": 4, "text": "  The QUICK brown fox " + BASE[20:] + "\n", "q": 0.9},  # exact after normalization
        {"id": -1, "text": near, "q": 0.1},
        {"id": 2, "text": OTHER, "q": None},
        {"id": 1, "text": THIRD, "q": 0.3},
    ]
    inp = _write(tmp_path, rows)
    # longest: the near duplicate is one word longer, so it survives the whole cluster.
    got = _run(spark, inp, tmp_path / "a")
    assert got[-1]["status"] == "kept" and got[-1]["cluster_id"] == -1
    assert got[300]["cluster_id"] == -1 and got[4]["cluster_id"] == -1
    # 4 and 300 are exact copies; 4 is longer (extra spaces), so 4 represents the group
    # and 300 is its exact copy.
    assert got[4]["status"] == "near_duplicate"
    assert got[300]["status"] == "exact_duplicate"
    statuses = sorted(r["status"] for r in got.values())
    assert statuses == ["exact_duplicate", "kept", "near_duplicate", "unique", "unique"]
    assert got[2]["status"] == "unique" and got[1]["status"] == "unique"

    # quality: highest q wins (4, 0.9); nulls rank last.
    got = _run(spark, inp, tmp_path / "b", "survivor.policy=quality", "survivor.column=q")
    assert got[4]["status"] == "kept"
    assert got[300]["status"] == "exact_duplicate" and got[300]["cluster_id"] == 4
    assert got[-1]["status"] == "near_duplicate" and got[-1]["cluster_id"] == 4

    # earliest without a column: smallest id.
    got = _run(spark, inp, tmp_path / "c", "survivor.policy=earliest")
    assert got[-1]["status"] == "kept"
    assert {got[4]["cluster_id"], got[300]["cluster_id"]} == {-1}


def test_longest_counts_characters_not_bytes(spark: Any, tmp_path: Path) -> None:
    # Exact copies after NFKC: " \ufb01ne" is 4 characters in 6 bytes, " fine" 5 in 5.
    rows = [{"id": 1, "text": BASE + " \ufb01ne"}, {"id": 2, "text": BASE + " fine"}]
    got = _run(spark, _write(tmp_path, rows), tmp_path / "out")
    assert got[2]["status"] == "kept"
    assert got[1]["status"] == "exact_duplicate" and got[1]["cluster_id"] == 2


def test_rejected_rows_and_string_ids(spark: Any, tmp_path: Path) -> None:
    rows = [
        {"id": "b", "text": BASE},
        {"id": "a10", "text": BASE},
        {"id": "a9", "text": None},
        {"id": "", "text": "   \n\t "},
        {"id": "zz", "text": OTHER},
    ]
    inp = _write(tmp_path, rows)
    got = _run(spark, inp, tmp_path / "out")
    assert got["a9"]["status"] == "rejected" and got["a9"]["reason"] == "null text"
    assert got[""]["status"] == "rejected" and "empty" in got[""]["reason"]
    assert got["a10"]["status"] == "kept" and got["b"]["status"] == "exact_duplicate"
    assert got["b"]["cluster_id"] == "a10"  # same length: the smallest id wins
    rejected = pq.read_table(tmp_path / "out" / "rejected").to_pylist()
    assert sorted(r["id"] for r in rejected) == ["", "a9"]
    assert all(r["reason"] for r in rejected)
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["counts"]["rejected"] == 2
    assert (tmp_path / "out" / "_SUCCESS").exists()
    assert not (tmp_path / "out.neardup-staging").exists()


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([{"id": 1, "text": "a"}, {"id": 1, "text": "b"}, {"id": 2, "text": "c"}], r"1 id\(s\) .* repeated"),
        ([{"id": None, "text": "a"}, {"id": 1, "text": "b"}], "1 row.* null id"),
        ([{"key": 1, "text": "a"}], "no id column 'id'"),
        ([{"id": 1, "body": "a"}], "no text column 'text'"),
        ([{"id": 1, "text": 5}], "text column 'text' has type bigint"),
    ],
)
def test_bad_input_is_an_input_error(
    spark: Any, tmp_path: Path, rows: list[dict[str, Any]], message: str
) -> None:
    inp = _write(tmp_path, rows)
    with pytest.raises(InputDataError, match=message):
        run(spark, config.load(), inp, str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_output_safety(spark: Any, tmp_path: Path) -> None:
    inp = _write(tmp_path, [{"id": 1, "text": BASE}])
    (tmp_path / "taken").mkdir()
    with pytest.raises(UsageError, match="already exists"):
        run(spark, config.load(), inp, str(tmp_path / "taken"))
    with pytest.raises(UsageError, match="inside input"):
        run(spark, config.load(), str(tmp_path), str(tmp_path / "sub"))
    with pytest.raises(UsageError, match="does not exist"):
        run(spark, config.load(), str(tmp_path / "missing"), str(tmp_path / "o2"))


def _statuses(out: Path) -> dict[str, tuple[str, str | None]]:
    rows = pq.read_table(out / "clusters").to_pylist()
    return {
        str(r["id"]): (r["status"], None if r["cluster_id"] is None else str(r["cluster_id"])) for r in rows
    }


def test_every_input_format_gives_the_same_clusters(spark: Any, tmp_path: Path) -> None:
    import gzip

    near = BASE + " today"
    rows = [
        {"id": 7, "text": BASE},
        {"id": 8, "text": near},
        {"id": 9, "text": BASE.upper()},
        {"id": 10, "text": 'quoted "text", with a comma,\nand a newline ' + OTHER},
        {"id": 11, "text": THIRD},
    ]
    parquet = _write(tmp_path, rows)
    expected = {"7": ("exact_duplicate", "8"), "8": ("kept", "8"), "9": ("near_duplicate", "8")}
    cfg = config.load()
    run(spark, cfg, parquet, str(tmp_path / "o-parquet"))
    base = _statuses(tmp_path / "o-parquet")
    for k, v in expected.items():
        # 7 and 9 are exact copies after lowercasing; 9 (uppercase) ties on length, so the
        # smaller id 7 represents the pair... and is the near duplicate of 8.
        assert base[k][1] == v[1]
    assert base["10"] == ("unique", "10") and base["11"] == ("unique", "11")

    jsonl = tmp_path / "in.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows))
    jsonl_gz = tmp_path / "gz"
    jsonl_gz.mkdir()
    with gzip.open(jsonl_gz / "part-0.jsonl.gz", "wt") as f:
        f.write("".join(json.dumps(r) + "\n" for r in rows))
    csv = tmp_path / "in.csv"
    pa_csv = pa.Table.from_pylist(rows)
    import pyarrow.csv as pacsv

    pacsv.write_csv(pa_csv, csv)
    spark.createDataFrame(rows).write.mode("overwrite").saveAsTable("neardup_test_docs")
    for name, path, extra in [
        ("jsonl", str(jsonl), []),
        ("jsonl-gz-dir", str(jsonl_gz), []),
        ("csv", str(csv), []),
        ("table", "neardup_test_docs", ["input.format=table"]),
    ]:
        run(spark, config.load(sets=extra), path, str(tmp_path / f"o-{name}"))
        assert _statuses(tmp_path / f"o-{name}") == base, name


def test_verification_methods_and_oph(spark: Any, tmp_path: Path) -> None:
    near = BASE + " today"
    half = " ".join(BASE.split()[:18]) + " " + " ".join(OTHER.split()[:16])  # shares ~half of BASE's words
    rows = [
        {"id": 1, "text": BASE},
        {"id": 2, "text": near},
        {"id": 3, "text": half},
        {"id": 4, "text": THIRD},
    ]
    inp = _write(tmp_path, rows)
    for i, sets in enumerate(
        [["verify.method=exact"], ["minhash.method=oph"], ["verify.method=exact", "minhash.method=oph"]]
    ):
        got = _run(spark, inp, tmp_path / f"o{i}", *sets)
        assert got[2]["status"] == "kept" and got[1]["status"] == "near_duplicate", sets
        assert got[3]["status"] == "unique" and got[4]["status"] == "unique", sets
    # With no verification every band collision is an edge.
    _run(spark, inp, tmp_path / "none", "verify.method=none", "lsh.threshold=0.3")
    counts = json.loads((tmp_path / "none" / "report.json").read_text())["counts"]
    assert counts["verified_pairs"] == counts["candidate_pairs"] >= 1
