"""What a run may replace, and overlap of resolved paths (runtime/outputs.py), without
Spark: local paths resolved through real symlinks, `..` and `file:` forms; both
directions of "inside" and equality; the rules for outputs, staging folders and indexes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from neardup.runtime import outputs as O
from neardup.runtime.lease import LocalFiles

REPORT = json.dumps({"command": "dedup", "neardup_version": "0.1.0", "counts": {}}).encode()


@pytest.mark.parametrize(
    ("qualified", "local"),
    [
        ("file:/a/b", "/a/b"),
        ("file:///a/b", "/a/b"),
        ("file://localhost/a/b", "/a/b"),
        ("file://otherhost/a/b", None),
        ("hdfs://nn:8020/a/b", None),
        ("s3a://bucket/a", None),
        ("/a/b", None),  # not qualified: the caller qualifies first
    ],
)
def test_local_part(qualified: str, local: str | None) -> None:
    assert O.local_part(qualified) == local


def test_symlinks_and_dotdot_resolve_to_the_real_folder(tmp_path: Path) -> None:
    real = tmp_path / "real"
    (real / "sub").mkdir(parents=True)
    (tmp_path / "link").symlink_to(real)
    assert O.resolve_local(str(tmp_path / "link" / "in.jsonl")) == str(real / "in.jsonl")
    assert O.resolve_local(str(tmp_path / "link" / "sub" / ".." / "x")) == str(real / "x")
    # A path that does not exist yet, under a link: the link resolved, the rest as written.
    assert O.resolve_local(str(tmp_path / "link" / "new" / "deeper")) == str(real / "new" / "deeper")


@pytest.mark.parametrize(
    ("path", "folder", "expected"),
    [
        ("file:/a/b", "file:/a", True),
        ("file:/a", "file:/a", True),
        ("file:/a/", "file:/a", True),
        ("file:/ab", "file:/a", False),  # a prefix of the name is not inside
        ("file:/a", "file:/a/b", False),
        ("hdfs://nn/a/b", "hdfs://nn/a", True),
        ("hdfs://nn/a/b", "file:/a", False),
        ("file:/x", "file:/", True),
    ],
)
def test_inside(path: str, folder: str, expected: bool) -> None:
    assert O.inside(path, folder) is expected


def test_overlap_in_both_directions_and_equality() -> None:
    out = "file:/data/out"
    assert O.overlap("input", "/data/in", "file:/data/in", "/data/out", out) is None
    inner = O.overlap("input", "/l/in.jsonl", "file:/data/out/in.jsonl", "/data/out", out)
    assert inner is not None and "input /l/in.jsonl (resolved: /data/out/in.jsonl) is inside output" in inner
    outer = O.overlap("reference", "/data", "file:/data", "/data/out", out)
    assert outer is not None and "output /data/out is inside reference /data" in outer
    same = O.overlap("index", "/l", "file:/data/out", "/data/out", out)
    assert same is not None and "same path" in same
    staged = O.overlap("input", "x", "file:/data/out.neardup-staging/x", "/data/out", out)
    assert staged is not None and "staging folder" in staged
    # The staging folder beside the output would be inside an input that is a sibling's parent.
    assert O.overlap("input", "/data/out.neardup-staging", "file:/data/out.neardup-staging", "/o", out)


@pytest.mark.parametrize(
    ("data", "ours"),
    [
        (REPORT, True),
        (json.dumps({"command": "dedup"}).encode(), False),
        (json.dumps({"neardup_version": "1"}).encode(), False),
        (json.dumps([1, 2]).encode(), False),
        (b"not json", False),
        (b"", False),
    ],
)
def test_a_neardup_report(data: bytes, ours: bool) -> None:
    assert O.is_neardup_report(data) is ours


def test_what_overwrite_replaces() -> None:
    def refusal(kind: str, names: list[str], report: bytes | None, overwrite: bool = True) -> str | None:
        return O.output_refusal("out", kind, names, report, overwrite)

    assert refusal("missing", [], None) is None
    assert refusal("dir", [], None) is None  # an empty folder
    assert refusal("dir", ["_SUCCESS", "clusters", "kept", "report.json"], REPORT) is None
    assert "is a file" in (refusal("file", [], None) or "")
    # A Spark job's output has _SUCCESS too: not ours.
    assert "not a neardup output" in (refusal("dir", ["_SUCCESS", "part-0.parquet"], None) or "")
    assert "not a neardup output" in (refusal("dir", ["notes.txt", "report.json"], b'{"a": 1}') or "")
    assert "not a neardup output" in (refusal("dir", ["photos"], None, overwrite=False) or "")
    assert "--overwrite" in (refusal("dir", ["report.json"], REPORT, overwrite=False) or "")
    assert "--overwrite" in (refusal("dir", [], None, overwrite=False) or "")


def test_what_a_run_clears_of_a_staging_folder() -> None:
    assert O.staging_refusal("s", "missing", [], None) is None
    assert O.staging_refusal("s", "dir", [], None) is None
    assert O.staging_refusal("s", "dir", [O.STAGING_MARKER, "_work", "kept"], None) is None
    # Published but for the rename: the marker is gone, report.json is there.
    assert O.staging_refusal("s", "dir", ["kept", "report.json"], REPORT) is None
    assert "not a staging folder" in (O.staging_refusal("s", "dir", ["_work"], None) or "")
    assert "a file" in (O.staging_refusal("s", "file", [], None) or "")


def test_what_index_build_writes_into() -> None:
    assert O.index_refusal("i", "missing", []) is None
    assert O.index_refusal("i", "dir", []) is None
    assert O.index_refusal("i", "dir", ["_manifest", "segments", O.INDEX_LEASE]) is None
    assert O.index_refusal("i", "dir", ["segments"]) is None  # a first build that crashed
    assert "not a neardup index" in (O.index_refusal("i", "dir", ["segments", "notes.txt"]) or "")
    assert "is a file" in (O.index_refusal("i", "file", []) or "")


def test_lease_files_are_the_os_for_local_paths(tmp_path: Path) -> None:
    files, where = O.lease_files(None, f"file:{tmp_path}/out.neardup-lock")  # type: ignore[arg-type]
    assert isinstance(files, LocalFiles) and where == os.path.join(tmp_path, "out.neardup-lock")
