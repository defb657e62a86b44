"""The pure parts of checking an index's files against its manifest, without a JVM: which
listed files are data, how paths of one file system compare, what a listing that differs
from the manifest is called, the document-count rule, the manifest's file lists read back
(and none in a manifest of format 1), and a Py4J error's deepest Java message."""

from __future__ import annotations

import json

import pytest

from neardup.runtime.failures import java_cause, unreadable_file
from neardup.runtime.fs import Listed
from neardup.runtime.indexfiles import (
    count_problem,
    data_files,
    is_data,
    parts_of,
    relative,
    same_path,
    segment_problem,
)
from neardup.runtime.indexstore import IndexFile, Manifest, Segment, Texts

SEG = "file:/idx/segments/v00000001-" + "a" * 32
FILES = (
    IndexFile("docs/part-0.parquet", 700, 30),
    IndexFile("keys/band=0/part-0.parquet", 1200, 30),
    IndexFile("keys/band=1/part-0.parquet", 1201, 30),
)


def _segment(files: tuple[IndexFile, ...] | None = FILES) -> Segment:
    texts = Texts("file:/data", "parquet", "id", "text", (("file:/data/part-0.parquet", 10, 20),))
    return Segment("v00000001-" + "a" * 32, 30, 31, texts, files)


def _listing(*files: tuple[str, int]) -> dict[str, Listed]:
    return data_files([Listed(f"file:///idx/segments/v00000001-{'a' * 32}/{p}", n) for p, n in files], SEG)


def test_paths_of_one_file_system_compare_alike() -> None:
    assert relative("file:///idx/segments/s/keys/x.parquet", "file:/idx/segments/s") == "keys/x.parquet"
    assert relative("file:/idx/segments/s/keys/x.parquet", "file:///idx/segments/s/") == "keys/x.parquet"
    assert relative("file:/idx/segments/s2/keys/x", "file:/idx/segments/s") is None
    assert relative("hdfs://nn:8020/idx/a/b", "hdfs://nn:8020/idx") == "a/b"
    assert same_path("file:///data/part-0.parquet", "file:/data/part-0.parquet")
    assert not same_path("file:/data/part-0.parquet", "file:/data/part-1.parquet")


def test_only_what_spark_reads_is_data() -> None:
    assert is_data("keys/band=3/part-00000.c000.parquet") and is_data("docs/part-0.parquet")
    assert is_data("signatures/part-0.parquet")
    assert not is_data("docs/_SUCCESS") and not is_data("keys/band=3/.part-0.parquet.crc")
    assert not is_data("keys/_temporary/0/part-0.parquet") and not is_data("notes.txt")
    assert parts_of(["keys/band=0/a.parquet", "keys/band=1/b.parquet", "signatures/c.parquet"]) == [
        "keys",
        "signatures",
    ]


def test_a_listing_as_recorded_is_sound() -> None:
    found = _listing(*((f.path, f.size) for f in FILES), ("docs/_SUCCESS", 0))
    assert set(found) == {f.path for f in FILES}
    assert segment_problem(_segment(), found) is None


def test_a_missing_file_a_size_and_an_extra_file_are_named() -> None:
    assert (
        segment_problem(
            _segment(), _listing(("docs/part-0.parquet", 700), ("keys/band=1/part-0.parquet", 1201))
        )
        == "its file keys/band=0/part-0.parquet is missing"
    )
    sizes = _listing(*((f.path, f.size) for f in FILES[:2]), ("keys/band=1/part-0.parquet", 1197))
    assert segment_problem(_segment(), sizes) == (
        "its file keys/band=1/part-0.parquet has 1,197 bytes, the manifest says 1,201"
    )
    extra = _listing(*((f.path, f.size) for f in FILES), ("keys/band=2/part-9.parquet", 5))
    assert (
        segment_problem(_segment(), extra)
        == "it holds keys/band=2/part-9.parquet, which the manifest does not list"
    )


def test_row_counts_must_match_the_documents() -> None:
    seg = _segment()
    assert count_problem(seg, {"docs": 30, "keys": 60}, 2, False) is None
    assert (
        count_problem(seg, {"docs": 29, "keys": 60}, 2, False) == "its docs/ holds 29 rows for 30 documents"
    )
    assert count_problem(seg, {"docs": 30, "keys": 30}, 2, False) == (
        "its keys/ holds 30 rows for 30 documents x 2 bands"
    )
    assert (
        count_problem(seg, {"docs": 30, "keys": 60}, 2, True)
        == "its signatures/ holds 0 rows for 30 documents"
    )


def _manifest(seg: Segment) -> Manifest:
    return Manifest(1, "b" * 32, {"lsh.bands": 2}, [[1]], "bigint", False, (seg,))


def test_file_lists_read_back_and_format_1_has_none() -> None:
    m = _manifest(_segment())
    assert Manifest.from_json(m.to_json(), "here") == m
    d = json.loads(m.to_json())
    assert d["format_version"] == 2
    assert d["segments"][0]["files"][1] == {"path": "keys/band=0/part-0.parquet", "size": 1200, "rows": 30}
    d["format_version"] = 1
    del d["segments"][0]["files"]
    old = Manifest.from_json(json.dumps(d), "here")
    assert old.segments[0].files is None and old == _manifest(_segment(None))


@pytest.mark.parametrize(
    ("text", "cause"),
    [
        (
            "An error occurred while calling z:x.open.\n: java.io.IOException: not a Parquet file\n\tat x",
            "not a Parquet file",
        ),
        (
            "An error occurred while calling o1.f.\n: org.a.SparkException: outer\n"
            "Caused by: org.apache.hadoop.fs.ChecksumException: Checksum error: f at 0\n\tat y",
            "Checksum error: f at 0",
        ),
        ("plain", "plain"),
    ],
)
def test_the_deepest_java_message_is_shown(text: str, cause: str) -> None:
    assert java_cause(RuntimeError(text)) == cause


def test_a_failed_read_names_its_file() -> None:
    text = (
        "[FAILED_READ_FILE.NO_HINT] Encountered error while reading file "
        "file:///i/segments/s/keys/p.parquet.  SQLSTATE: KD001\n"
        "Caused by: org.apache.parquet.io.ParquetDecodingException: "
        "could not verify page integrity, CRC checksum verification failed\n"
    )
    assert unreadable_file(RuntimeError(text)) == (
        "file:///i/segments/s/keys/p.parquet",
        "could not verify page integrity, CRC checksum verification failed",
    )


def test_a_missing_folder_of_the_index_is_named() -> None:
    from neardup.stages.against import unreadable_index_file

    text = "[PATH_NOT_FOUND] Path does not exist: file:/idx/segments/s/keys. SQLSTATE: 42K03"
    assert unreadable_index_file(RuntimeError(text), "file:/idx", "idx/", _manifest(_segment())) == (
        "index idx/ is damaged: its file segments/s/keys cannot be read (it does not exist)"
    )
    text = "[PATH_NOT_FOUND] Path does not exist: file:/elsewhere/x. SQLSTATE: 42K03"
    assert unreadable_index_file(RuntimeError(text), "file:/idx", "idx/", _manifest(_segment())) is None
