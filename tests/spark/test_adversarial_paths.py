"""Any legal path works: spaces, non-ASCII, `#`, `%` (a literal `%41`, which must not become
`A`) and `+` in the input, the output, a --config file, an index and decontaminate's
reference, through the command line's entry in this process.

Spark names the files it read as URIs (`file:///a%20b%2541`), Hadoop's Path reads a name
literally: each case runs where the two spellings differ, and checks the result against
what the corpus was built to hold (planted exact duplicates among texts of random words,
which share no near-duplicates), not against another run of neardup.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from adversarial import (
    assert_all_accounted,
    assert_one_line,
    assert_untouched,
    jsonl_records,
    parquet_records,
    snapshot,
)
from inprocess import neardup

# Every character that URIs escape or that unquoting would change, in a folder's name and a
# file's: a space, non-ASCII, a fragment mark, a literal escape and a plus.
ODD = "a b é#%41+c"
NO_HTML = ("--set", "report.html=false")
PAIRS = 12  # distinct texts, each at two ids: i and i + 100
MALFORMED = '{"id": 999, "text": "cut short\n'


def _texts(n: int, seed: int) -> list[str]:
    """`n` texts of 40 words drawn from 2,000 made-up ones: two of them share a handful of
    words at most, far below any near-duplicate threshold."""
    rng = random.Random(seed)
    vocab = ["".join(rng.choice("bcdfghjklmnpqrstvwxz") + rng.choice("aeiou") for _ in range(4)) for _ in range(2000)]
    return [" ".join(rng.choice(vocab) for _ in range(40)) for _ in range(n)]


TEXTS = _texts(PAIRS + 6, seed=5)


def _pairs(k: range) -> list[dict[str, Any]]:
    return [{"id": i + off, "text": TEXTS[i]} for i in k for off in (0, 100)]


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("paths") / ODD
    folder.mkdir()
    return folder


def _jsonl(path: Path, rows: list[dict[str, Any]], malformed: bool) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(r) + "\n" for r in rows]
    if malformed:
        lines.insert(3, MALFORMED)  # line 4
    path.write_text("".join(lines))
    return path


def _kept_texts(output: Path) -> list[str]:
    return sorted(pq.read_table(output / "kept").column("text").to_pylist())


def _config(root: Path) -> Path:
    """A --config file at an odd path: it turns malformed lines into rejected rows."""
    cfg = root / f"conf {ODD}.yaml"
    cfg.write_text("input:\n  malformed: reject\nreport:\n  html: false\n")
    return cfg


def test_dedup_of_a_jsonl_file_with_a_malformed_line(
    spark: Any, root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = _jsonl(root / "file" / f"in {ODD}.jsonl", _pairs(range(PAIRS)), malformed=True)
    out = root / f"out {ODD}"
    before = snapshot(src.parent)
    ran = neardup(capsys, "dedup", "--input", str(src), "--output", str(out), "--config", str(_config(root)))
    assert ran.code == 0, ran.err[-3000:]
    counts = assert_all_accounted(out, jsonl_records(src))
    assert counts == {"kept": PAIRS, "exact_duplicate": PAIRS, "malformed": 1}
    assert _kept_texts(out) == sorted(TEXTS[:PAIRS])
    # The rejected row names the file as it is on disk, not as a URI, with its line number.
    (reason,) = pq.read_table(out / "rejected").column("reason").to_pylist()
    assert reason == f"malformed JSON line (file://{src} line 4)"
    assert not out.with_name(out.name + ".neardup-staging").exists()
    assert (out / "_SUCCESS").exists() and json.loads((out / "report.json").read_text())["input"] == str(src)
    assert_untouched(before, src.parent)


def test_a_malformed_line_in_a_folder_is_named_with_its_file_and_line(
    spark: Any, root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = root / f"folder {ODD}"
    _jsonl(folder / f"part {ODD}.jsonl", _pairs(range(3)), malformed=True)
    _jsonl(folder / "part 2.jsonl", _pairs(range(3, 6)), malformed=False)
    out = root / f"failed {ODD}"
    before = snapshot(folder)
    ran = neardup(capsys, "dedup", "--input", str(folder), "--output", str(out), *NO_HTML)
    assert_one_line(ran.code, ran.err, 3, f"file://{folder}/part {ODD}.jsonl line 4: ")
    assert not out.exists()
    assert_untouched(before, folder)


def test_dedup_of_parquet_and_an_index_at_odd_paths(
    spark: Any, root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """index build from a Parquet folder, index add from a Parquet file, dedup --against of
    a Parquet folder, each path odd."""
    built = root / f"built {ODD}"
    built.mkdir()
    pq.write_table(pa.Table.from_pylist([{"id": i, "text": TEXTS[i]} for i in range(6)]), built / f"p {ODD}.parquet")
    added = root / f"added {ODD}.parquet"
    pq.write_table(pa.Table.from_pylist([{"id": i, "text": TEXTS[i]} for i in range(6, 9)]), added)
    batch = root / f"batch {ODD}"
    batch.mkdir()
    # Copies of an indexed text from each segment, and three texts the index does not hold.
    rows = [{"id": 200, "text": TEXTS[0]}, {"id": 207, "text": TEXTS[7]}]
    rows += [{"id": 200 + i, "text": TEXTS[i]} for i in range(12, 15)]
    pq.write_table(pa.Table.from_pylist(rows), batch / f"b {ODD}.parquet")
    index = root / f"index {ODD}"
    before = snapshot(built, added, batch)

    ran = neardup(capsys, "index", "build", "--input", str(built), "--index", str(index))
    assert ran.code == 0, ran.err[-3000:]
    ran = neardup(capsys, "index", "add", "--input", str(added), "--index", str(index))
    assert ran.code == 0, ran.err[-3000:]
    manifest = json.loads(sorted((index / "_manifest").glob("v*.json"))[-1].read_text())
    listed = sorted(f[0] for s in manifest["segments"] for f in s["texts"]["files"])
    assert listed == sorted([f"file://{added}", f"file://{built}/p {ODD}.parquet"])

    out = root / f"against {ODD}"
    ran = neardup(capsys, "dedup", "--input", str(batch), "--output", str(out), "--against", str(index), *NO_HTML)
    assert ran.code == 0, ran.err[-3000:]
    assert assert_all_accounted(out, parquet_records(batch)) == {"unique": 3, "near_duplicate": 2}
    clusters = {r["id"]: r for r in pq.read_table(out / "clusters").to_pylist()}
    assert {i for i, r in clusters.items() if r["status"] == "near_duplicate"} == {200, 207}
    assert {clusters[200]["matched_index_id"], clusters[207]["matched_index_id"]} == {0, 7}

    assert_untouched(before, built, added, batch)


def test_decontaminate_with_an_odd_reference(spark: Any, root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = _jsonl(root / f"corpus {ODD}.jsonl", [{"id": i, "text": TEXTS[i]} for i in range(PAIRS)], False)
    reference = root / f"evals {ODD}"
    _jsonl(reference / f"set {ODD}.jsonl", [{"id": f"q{i}", "text": TEXTS[i]} for i in (2, 5)], False)
    out = root / f"decon {ODD}"
    before = snapshot(corpus, reference)
    ran = neardup(
        capsys, "decontaminate", "--input", str(corpus), "--reference", str(reference), "--output", str(out)
    )
    assert ran.code == 0, ran.err[-3000:]
    assert sorted(pq.read_table(out / "removed").column("id").to_pylist()) == [2, 5]
    assert pq.read_table(out / "kept").num_rows == PAIRS - 2
    assert_untouched(before, corpus, reference)

