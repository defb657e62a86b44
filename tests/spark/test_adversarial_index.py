"""A damaged index is refused, never used silently; failed and losing adds leave nothing.

Every case runs the command line's entry in this process (tests/inprocess.py) on a copy of
one small index (two segments: a build and an add) and asserts what tests/adversarial.py
says every adversarial case asserts: one `neardup: error:` line and the exit code (4 for a
damaged index), nothing outside our own output deleted (a snapshot of the inputs and the
index), and, for a run that completes, every input row accounted for in the outputs
against an independent count (pyarrow's). Expected figures come from reading the index's
files with pyarrow, never from neardup.

Damage is done to the files themselves: one deleted, one truncated or appended to, one byte
flipped inside a data page with its local checksum file removed (as on a store that keeps
none), a manifest rewritten as an older neardup wrote it. A losing concurrent add is another
store committing the same version between this add's write and its commit; a failed add is
its footers' reading failing after the segment's files are written.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from adversarial import (
    assert_all_accounted,
    assert_one_line,
    assert_untouched,
    error_lines,
    parquet_records,
    snapshot,
)
from inprocess import Ran, neardup
from neardup.cli import main
from neardup.commands import index as indexing
from neardup.runtime.indexstore import IndexStore, Manifest
from neardup_testkit.synth import CorpusSpec, generate

NO_HTML = ("--set", "report.html=false")
BANDS = 18  # the default configuration's lsh.bands


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Batches of one generated corpus (planted clusters straddle them): a and b are indexed,
    c is deduplicated against the index, d and e are added in the cases."""
    table = generate(CorpusSpec(num_docs=150, seed=7, mean_chars=300, dup_fraction=0.5))
    root = tmp_path_factory.mktemp("corpus")
    out = {}
    for k, name in enumerate("abcde"):
        (root / name).mkdir()
        pq.write_table(table.slice(k * 30, 30).select(["id", "text"]), root / name / "part-0.parquet")
        out[name] = root / name
    return out


@pytest.fixture(scope="module")
def pristine(spark: Any, corpus: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An index of batches a and b: two segments, as `index build` and `index add` make them."""
    index = tmp_path_factory.mktemp("pristine") / "index"
    for verb, batch in (("build", "a"), ("add", "b")):
        assert main(["index", verb, "--input", str(corpus[batch]), "--index", str(index), "--quiet"]) == 0
    return index


@pytest.fixture
def index(pristine: Path, tmp_path: Path) -> Iterator[Path]:
    """A copy of the pristine index (with Hadoop's local checksum files) for one case."""
    copy = tmp_path / "index"
    shutil.copytree(pristine, copy)
    yield copy


def _manifest(index: Path) -> dict[str, Any]:
    return dict(json.loads(sorted((index / "_manifest").glob("v*.json"))[-1].read_text()))


def _data_files(index: Path) -> list[Path]:
    """The index's Parquet data files under its listed segments (what a reader reads)."""
    listed = [s["name"] for s in _manifest(index)["segments"]]
    return sorted(p for name in listed for p in (index / "segments" / name).rglob("*.parquet"))


def _segments_on_disk(index: Path) -> list[str]:
    return sorted(p.name for p in (index / "segments").iterdir())


def _listed(index: Path) -> list[str]:
    return sorted(s["name"] for s in _manifest(index)["segments"])


def _crc(path: Path) -> Path:
    return path.parent / f".{path.name}.crc"


def _relative(path: Path, index: Path) -> str:
    """The file's path under its segment, as the error lines name it."""
    return str(path.relative_to(index / "segments").as_posix().split("/", 1)[1])


def _dedup(capsys: pytest.CaptureFixture[str], batch: Path, out: Path, index: Path) -> Ran:
    return neardup(
        capsys, "dedup", "--input", str(batch), "--output", str(out), "--against", str(index), *NO_HTML
    )


def _add(capsys: pytest.CaptureFixture[str], batch: Path, index: Path) -> Ran:
    return neardup(capsys, "index", "add", "--input", str(batch), "--index", str(index))


def _verify(capsys: pytest.CaptureFixture[str], index: Path) -> Ran:
    return neardup(capsys, "index", "verify", str(index))


def test_a_sound_index_is_verified_and_used(
    spark: Any, corpus: dict[str, Path], index: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = _data_files(index)
    keys = sum(pq.ParquetFile(f).metadata.num_rows for f in files if "/keys/" in str(f))
    ids = sum(pq.ParquetFile(f).metadata.num_rows for f in files if "/docs/" in str(f))
    documents = parquet_records(corpus["a"]) + parquet_records(corpus["b"])
    assert ids == documents == 60 and keys == documents * BANDS
    # The manifest lists exactly these files, with their sizes and footers' row counts.
    recorded = {
        (seg["name"], f["path"]): (f["size"], f["rows"])
        for seg in _manifest(index)["segments"]
        for f in seg["files"]
    }
    on_disk = {
        (f.relative_to(index / "segments").parts[0], _relative(f, index)): (
            f.stat().st_size,
            pq.ParquetFile(f).metadata.num_rows,
        )
        for f in files
    }
    assert recorded == on_disk

    before = snapshot(index, *corpus.values())
    ok = _verify(capsys, index)
    assert ok.code == 0 and error_lines(ok.err) == [], ok.err[-3000:]
    assert ok.out.startswith(
        f"neardup: index {index} is sound: version 2, 2 segment(s), {documents} documents; "
        f"{len(files)} files ("
    )
    assert "read whole in " in ok.out and f"{keys:,} band keys, {ids} ids, " in ok.out
    assert ok.out.count("\n") == 1

    out = tmp_path / "out"
    ran = _dedup(capsys, corpus["c"], out, index)
    assert ran.code == 0 and error_lines(ran.err) == [], ran.err[-3000:]
    assert_all_accounted(out, parquet_records(corpus["c"]))
    assert_untouched(before, index, *corpus.values())


def test_a_deleted_segment_file_is_refused_before_any_read(
    spark: Any, corpus: dict[str, Path], index: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gone = next(f for f in _data_files(index) if "/keys/band=7/" in str(f))
    gone.unlink()
    before = snapshot(index, *corpus.values())
    segment = gone.relative_to(index / "segments").parts[0]
    named = (
        f"index {index} is damaged",
        f"segment {segment}",
        f"its file {_relative(gone, index)} is missing",
    )

    out = tmp_path / "out"
    refused = _dedup(capsys, corpus["c"], out, index)
    assert_one_line(refused.code, refused.err, 4, *named, f"neardup index verify {index}")
    assert not out.exists()
    added = _add(capsys, corpus["d"], index)
    assert_one_line(added.code, added.err, 4, *named)
    verified = _verify(capsys, index)
    assert_one_line(verified.code, verified.err, 4, *named)
    assert verified.out == ""
    assert_untouched(before, index, *corpus.values())
    assert _segments_on_disk(index) == _listed(index)  # the refused add left nothing


@pytest.mark.parametrize("change", ["truncated", "appended"])
def test_a_file_of_another_size_is_refused(
    spark: Any,
    corpus: dict[str, Path],
    index: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    change: str,
) -> None:
    victim = next(f for f in _data_files(index) if "/docs/" in str(f))
    size = victim.stat().st_size
    data = victim.read_bytes()
    victim.write_bytes(data[: size // 2] if change == "truncated" else data + b"\0" * 16)
    now = victim.stat().st_size
    before = snapshot(index, *corpus.values())
    named = (f"its file {_relative(victim, index)} has {now:,} bytes, the manifest says {size:,}",)

    refused = _dedup(capsys, corpus["c"], tmp_path / "out", index)
    assert_one_line(refused.code, refused.err, 4, *named)
    added = _add(capsys, corpus["d"], index)
    assert_one_line(added.code, added.err, 4, *named)
    verified = _verify(capsys, index)
    assert_one_line(verified.code, verified.err, 4, *named)
    assert_untouched(before, index, *corpus.values())


def _flip_a_data_byte(path: Path) -> None:
    """Flip one bit in the middle of the first column's data page (its values, past the
    page header), keeping the file's size."""
    column = pq.ParquetFile(path).metadata.row_group(0).column(0)
    at = column.data_page_offset + column.total_compressed_size // 2
    data = bytearray(path.read_bytes())
    data[at] ^= 0x10
    path.write_bytes(bytes(data))


def test_a_flipped_byte_is_found_by_a_full_read(
    spark: Any, corpus: dict[str, Path], index: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    victim = next(f for f in _data_files(index) if "/keys/band=11/" in str(f))
    _flip_a_data_byte(victim)
    # Hadoop's local checksum file would catch it too; most stores keep none, so the
    # page's own checksum must.
    _crc(victim).unlink()
    before = snapshot(index, *corpus.values())
    named = (f"index {index} is damaged", f"its file {victim.relative_to(index).as_posix()} cannot be read")

    verified = _verify(capsys, index)
    assert_one_line(verified.code, verified.err, 4, *named, "checksum")
    out = tmp_path / "out"
    refused = _dedup(capsys, corpus["c"], out, index)
    assert_one_line(refused.code, refused.err, 4, *named, f"neardup index verify {index}")
    assert not (out / "kept").exists()
    assert_untouched(before, index, *corpus.values())


def test_a_flipped_byte_under_a_local_checksum_is_found_by_verify(
    spark: Any, corpus: dict[str, Path], index: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    victim = next(f for f in _data_files(index) if "/docs/" in str(f))
    _flip_a_data_byte(victim)
    before = snapshot(index, *corpus.values())
    # The local checksum covers 512-byte chunks: the footer's read may be the first to fail.
    verified = _verify(capsys, index)
    assert_one_line(
        verified.code, verified.err, 4, _relative(victim, index), "cannot be read", "Checksum error"
    )
    assert_untouched(before, index, *corpus.values())


def test_a_losing_concurrent_add_leaves_no_segment(
    spark: Any,
    corpus: dict[str, Path],
    index: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    base = Manifest.from_json((index / "_manifest" / "v00000002.json").read_text(), "base")
    real_commit = IndexStore.commit

    def another_writer_first(self: IndexStore, manifest: Manifest) -> None:
        # Another writer's store commits the same version (its manifest: the base's
        # segments) between this add's write and its own commit.
        real_commit(IndexStore(spark, str(index)), dataclasses.replace(base, version=manifest.version))
        real_commit(self, manifest)

    before = snapshot(index, *corpus.values())
    with monkeypatch.context() as racing:
        racing.setattr(IndexStore, "commit", another_writer_first)
        lost = _add(capsys, corpus["d"], index)
    assert_one_line(lost.code, lost.err, 1, f"index {index}: another writer committed version 3 meanwhile")
    assert _manifest(index)["version"] == 3
    assert _segments_on_disk(index) == _listed(index) == sorted(s.name for s in base.segments)
    assert_untouched(before, index, *corpus.values())

    again = _add(capsys, corpus["d"], index)
    assert again.code == 0 and error_lines(again.err) == [], again.err[-3000:]
    assert _manifest(index)["version"] == 4 and len(_listed(index)) == 3
    assert _segments_on_disk(index) == _listed(index)
    assert _verify(capsys, index).code == 0


def test_a_failed_add_deletes_its_segment_and_a_crashed_ones_is_collected(
    spark: Any,
    corpus: dict[str, Path],
    index: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A crashed add's segment (a driver killed mid-write): a name of neardup's own, listed
    # by no manifest. Beside it, folders and files neardup did not write.
    crashed = index / "segments" / "v00000003-0123456789abcdef0123456789abcdef"
    shutil.copytree(index / "segments" / _listed(index)[0], crashed)
    (index / "segments" / "notes").mkdir()
    (index / "segments" / "notes" / "keep.txt").write_text("not neardup's")
    (index / "segments" / "v00000003-mine").mkdir()
    before = snapshot(index, *corpus.values())

    def unreachable(*args: Any) -> Any:
        raise OSError("the store did not answer")  # after the segment's files are written

    with monkeypatch.context() as failing:
        failing.setattr(indexing, "record", unreachable)
        failed = _add(capsys, corpus["d"], index)
    assert_one_line(failed.code, failed.err, 1, "the store did not answer")
    assert _manifest(index)["version"] == 2
    assert_untouched(before, index, *corpus.values())  # its own segment gone, nothing else
    assert sorted(p.name for p in (index / "segments").iterdir() if p.name.startswith("v0000000")) == sorted(
        [*_listed(index), crashed.name, "v00000003-mine"]
    )

    added = _add(capsys, corpus["d"], index)
    assert added.code == 0 and error_lines(added.err) == [], added.err[-3000:]
    assert not crashed.exists()
    assert (index / "segments" / "notes" / "keep.txt").exists() and (
        index / "segments" / "v00000003-mine"
    ).exists()
    assert sorted(set(_segments_on_disk(index)) - {"notes", "v00000003-mine"}) == _listed(index)


def _as_format_1(index: Path) -> None:
    """Rewrite the current manifest as a neardup of format 1 wrote it: no file lists."""
    path = sorted((index / "_manifest").glob("v*.json"))[-1]
    d = json.loads(path.read_text())
    d["format_version"] = 1
    for seg in d["segments"]:
        del seg["files"]
    path.write_text(json.dumps(d, indent=2))
    _crc(path).unlink()  # Hadoop's checksum of the old content


def test_an_older_manifest_is_used_with_a_warning_and_add_records_its_files(
    spark: Any, corpus: dict[str, Path], index: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _as_format_1(index)
    before = snapshot(index, *corpus.values())
    warning = "written by an older neardup whose manifest lists no files"

    verified = _verify(capsys, index)
    assert verified.code == 0 and error_lines(verified.err) == [], verified.err[-3000:]
    assert "2 segment(s) of an older neardup's manifest list no files" in verified.out
    assert "neardup index add records them" in verified.out

    out = tmp_path / "out"
    used = _dedup(capsys, corpus["c"], out, index)
    assert used.code == 0 and error_lines(used.err) == [], used.err[-3000:]
    assert warning in used.err
    assert_all_accounted(out, parquet_records(corpus["c"]))
    assert_untouched(before, index, *corpus.values())

    added = _add(capsys, corpus["d"], index)
    assert added.code == 0 and error_lines(added.err) == [], added.err[-3000:]
    m = _manifest(index)
    assert m["format_version"] == 2 and all(seg["files"] for seg in m["segments"])
    assert sorted((s["name"], f["path"]) for s in m["segments"] for f in s["files"]) == sorted(
        (f.relative_to(index / "segments").parts[0], _relative(f, index)) for f in _data_files(index)
    )
    # Now a deleted file of an old segment is noticed before use.
    gone = next(f for f in _data_files(index) if "/keys/band=0/" in str(f))
    gone.unlink()
    refused = _dedup(capsys, corpus["e"], tmp_path / "out2", index)
    assert_one_line(refused.code, refused.err, 4, f"its file {_relative(gone, index)} is missing")


def test_an_older_manifest_with_a_missing_file_is_not_recorded(
    spark: Any, corpus: dict[str, Path], index: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _as_format_1(index)
    gone = next(f for f in _data_files(index) if "/docs/" in str(f))
    held = 30 - pq.ParquetFile(gone).metadata.num_rows  # the segment's other docs/ files
    gone.unlink()
    before = snapshot(index, *corpus.values())
    added = _add(capsys, corpus["d"], index)
    assert_one_line(added.code, added.err, 4, "is damaged", f"its docs/ holds {held:,} rows for 30 documents")
    verified = _verify(capsys, index)
    assert_one_line(verified.code, verified.err, 4, f"its docs/ holds {held:,} rows for 30 documents")
    assert_untouched(before, index, *corpus.values())
    assert _manifest(index)["format_version"] == 1 and _segments_on_disk(index) == _listed(index)
