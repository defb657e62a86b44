"""Small hand-made frames through the whole job: exact copies, survivor policies,
rejected rows, and awkward ids. Expected outputs are written out by hand, whole: every
row of clusters/ with every column."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup import columns as C
from neardup import config
from neardup.commands.dedup import run
from neardup.errors import InputDataError, UsageError
from neardup.harness import open_input
from neardup.stages.read import documents
from neardup_testkit.reference import jaccard, shingles

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


Row = tuple[Any, Any, bool, str, str | None]  # id, cluster_id, kept, status, reason


def _clusters(out: Path) -> list[Row]:
    """clusters/ as written, in its order (by id), every column but similarity (checked
    apart, by _check_similarity)."""
    t = pq.read_table(out / "clusters")
    assert t.column_names == ["id", "cluster_id", "kept", "status", "similarity", "reason"]
    return [(r["id"], r["cluster_id"], r["kept"], r["status"], r["reason"]) for r in t.to_pylist()]


def _check_similarity(cfg: config.Config, inp: str, out: Path) -> None:
    """Each removed document's similarity is the exact Jaccard of its shingles and its kept
    document's (reference.shingles), and null for the rest; null throughout without
    verification."""
    texts = {r["id"]: r["text"] for r in pq.read_table(inp, columns=["id", "text"]).to_pylist()}
    kw = {
        "unit": cfg.shingle.unit,
        "ngram": cfg.shingle.ngram,
        "char_ngram": cfg.shingle.char_ngram,
        "lowercase": cfg.normalize.lowercase,
        "strip_punctuation": cfg.normalize.strip_punctuation,
    }
    rows = pq.read_table(out / "clusters").to_pylist()
    got = {r["id"]: r["similarity"] for r in rows}
    want = {
        r["id"]: None
        if r["kept"] or r["status"] == "rejected" or cfg.verify.method == "none"
        else jaccard(shingles(texts[r["id"]], **kw), shingles(texts[r["cluster_id"]], **kw))
        for r in rows
    }
    if cfg.verify.method == "signature":  # an estimate: only where it is null must match
        assert {i: s is None for i, s in got.items()} == {i: s is None for i, s in want.items()}
        return
    assert got == pytest.approx(want)


def _run(spark: Any, inp: str, out: Path, *sets: str) -> list[Row]:
    cfg = config.load(sets=["report.html=false", *sets])
    report = run(spark, cfg, inp, str(out)).report
    # report.html=false: no page and no report stage (test_report.py has a run with both).
    assert (out / "_SUCCESS").exists() and not (out / "report.html").exists()
    assert "report" not in report["seconds"]
    if inp.endswith(".parquet"):
        _check_similarity(cfg, inp, out)
    return _clusters(out)


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
    # longest: the near duplicate is one word longer, so it survives the whole cluster. 4 and
    # 300 are exact copies; 4 is longer (extra spaces), so 4 represents the group (a near
    # duplicate of -1) and 300 is its exact copy.
    assert _run(spark, inp, tmp_path / "a") == [
        (-1, -1, True, "kept", None),
        (1, 1, True, "unique", None),
        (2, 2, True, "unique", None),
        (4, -1, False, "near_duplicate", None),
        (300, -1, False, "exact_duplicate", None),
    ]
    # quality: highest q wins (4, 0.9); nulls rank last.
    assert _run(spark, inp, tmp_path / "b", "survivor.policy=quality", "survivor.column=q") == [
        (-1, 4, False, "near_duplicate", None),
        (1, 1, True, "unique", None),
        (2, 2, True, "unique", None),
        (4, 4, True, "kept", None),
        (300, 4, False, "exact_duplicate", None),
    ]
    # earliest without a column: smallest id; 4 is the exact group's representative.
    assert _run(spark, inp, tmp_path / "c", "survivor.policy=earliest") == [
        (-1, -1, True, "kept", None),
        (1, 1, True, "unique", None),
        (2, 2, True, "unique", None),
        (4, -1, False, "near_duplicate", None),
        (300, -1, False, "exact_duplicate", None),
    ]
    kept = pq.read_table(tmp_path / "c" / "kept").sort_by("id")
    assert kept.to_pylist() == [rows[2], rows[4], rows[3]]  # every input column, unchanged


@pytest.mark.compat
def test_rejected_rows_string_ids_and_longest_in_characters(spark: Any, tmp_path: Path) -> None:
    rows = [
        {"id": "b", "text": BASE},
        {"id": "a10", "text": BASE},
        {"id": "a9", "text": None},
        {"id": "", "text": "   \n\t "},
        {"id": "zz", "text": OTHER},
        # Exact copies after NFKC: " \ufb01ne" is 4 characters in 6 bytes, " fine" 5 in 5.
        {"id": "l1", "text": THIRD + " \ufb01ne"},
        {"id": "l2", "text": THIRD + " fine"},
    ]
    inp = _write(tmp_path, rows)
    # Same length: the smallest id ("a10" < "b" as strings) wins. Longest counts characters:
    # l2, not l1.
    assert _run(spark, inp, tmp_path / "out") == [
        ("", None, False, "rejected", "empty text after normalization"),
        ("a10", "a10", True, "kept", None),
        ("a9", None, False, "rejected", "null text"),
        ("b", "a10", False, "exact_duplicate", None),
        ("l1", "l2", False, "exact_duplicate", None),
        ("l2", "l2", True, "kept", None),
        ("zz", "zz", True, "unique", None),
    ]
    rejected = pq.read_table(tmp_path / "out" / "rejected").sort_by("id").to_pylist()
    assert rejected == [
        {"id": "", "text": "   \n\t ", "reason": "empty text after normalization"},
        {"id": "a9", "text": None, "reason": "null text"},
    ]
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["counts"]["rejected"] == 2
    assert (tmp_path / "out" / "_SUCCESS").exists()
    assert not (tmp_path / "out.neardup-staging").exists()


@pytest.mark.compat
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


@pytest.mark.compat
def test_output_safety(spark: Any, tmp_path: Path) -> None:
    inp = _write(tmp_path, [{"id": 1, "text": BASE}])
    (tmp_path / "taken").mkdir()
    with pytest.raises(UsageError, match="already exists"):
        run(spark, config.load(), inp, str(tmp_path / "taken"))
    with pytest.raises(UsageError, match="inside input"):
        run(spark, config.load(), str(tmp_path), str(tmp_path / "sub"))
    with pytest.raises(UsageError, match="does not exist"):
        run(spark, config.load(), str(tmp_path / "missing"), str(tmp_path / "o2"))


@pytest.mark.compat
def test_every_input_format_reads_the_same_documents(spark: Any, tmp_path: Path) -> None:
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
    # 7 and 9 are exact copies after lowercasing and tie on length, so the smaller id 7
    # represents the pair, a near duplicate of the longer 8; 9 is 7's exact copy.
    expected = [
        (7, 8, False, "near_duplicate", None),
        (8, 8, True, "kept", None),
        (9, 8, False, "exact_duplicate", None),
        (10, 10, True, "unique", None),
        (11, 11, True, "unique", None),
    ]
    assert _run(spark, parquet, tmp_path / "o-parquet") == expected

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
    # Every stage after reading works on the documents frame (_id, _text, _rank) alone, so
    # the same frame gives the same clusters: each other format is read as a run reads it
    # (its checks included) and its frame compared, not run through the pipeline again.
    want = [(r["id"], r["text"], None) for r in rows]
    assert _documents(spark, str(parquet)) == want
    for name, path, extra in [
        ("jsonl", str(jsonl), []),
        ("jsonl-gz-dir", str(jsonl_gz), []),
        ("csv", str(csv), []),
        ("table", "neardup_test_docs", ["input.format=table"]),
    ]:
        got = _documents(spark, path, *extra)
        if name == "csv":  # CSV columns are strings: ids order and compare as strings
            assert got == sorted(((str(i), t, k) for i, t, k in want), key=lambda row: row[0]), name
        else:
            assert got == want, name


def _documents(spark: Any, path: str, *sets: str) -> list[tuple[Any, ...]]:
    """The documents frame a run of `path` works on, sorted by id."""
    cfg = config.load(sets=list(sets))
    opened = open_input(spark, cfg, path)
    frame = documents(opened.source, cfg).select(C.DOC_ID, C.TEXT, C.RANK)
    return sorted(tuple(r) for r in frame.collect())


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
    # Exact verification of one-permutation signatures is every other run's (the defaults).
    for i, sets in enumerate([["verify.method=signature"], ["minhash.method=classic"]]):
        assert _run(spark, inp, tmp_path / f"o{i}", *sets) == [
            (1, 2, False, "near_duplicate", None),
            (2, 2, True, "kept", None),
            (3, 3, True, "unique", None),
            (4, 4, True, "unique", None),
        ], sets
    # With no verification every band collision is an edge.
    with pytest.warns(config.ConfigWarning, match="verify.method = none"):
        _run(spark, inp, tmp_path / "none", "verify.method=none", "lsh.threshold=0.3")
    counts = json.loads((tmp_path / "none" / "report.json").read_text())["counts"]
    assert counts["verified_pairs"] == counts["candidate_pairs"] >= 1
