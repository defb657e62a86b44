"""What every adversarial case asserts: nothing lost (an independent row count against the
outputs), nothing deleted that is not ours (a snapshot of the folders around the output),
and exactly one line and the exit code.

The row counts here never use Spark or neardup: a JSON Lines file's records are its
non-blank lines, a CSV file's are counted from its lines and quotes (csv_records), a Parquet file's come
from its footer; the outputs are read with pyarrow.
"""

from __future__ import annotations

import gzip
import hashlib
from collections.abc import Iterable
from pathlib import Path

import pyarrow.parquet as pq

ERROR_PREFIX = "neardup: error: "
# What must never reach the user's terminal: a traceback, Py4J's or the JVM's own text.
_RAW = (
    "Traceback (most recent call last)",
    "py4j.protocol",
    "Py4JJavaError",
    "\tat org.apache",
    "\tat java.",
)


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith(ERROR_PREFIX)]


def assert_one_line(code: int, stderr: str, expected_code: int, *fragments: str) -> str:
    """The command ended with `expected_code` and exactly one `neardup: error:` line holding
    every fragment, and no traceback or Py4J text; returns the line."""
    lines = error_lines(stderr)
    raw = [marker for marker in _RAW if marker in stderr]
    assert code == expected_code, f"exit {code}, expected {expected_code}; stderr:\n{stderr[-3000:]}"
    assert len(lines) == 1, f"expected one error line, got {lines}; stderr:\n{stderr[-3000:]}"
    assert not raw, f"raw {raw} on stderr:\n{stderr[-3000:]}"
    for fragment in fragments:
        assert fragment in lines[0], f"{fragment!r} not in {lines[0]!r}"
    return lines[0]


def snapshot(*roots: Path) -> dict[str, str]:
    """Every file and folder under `roots` (and the roots), with each file's SHA-256, each
    symlink's target: compare two snapshots to see what was deleted or changed."""
    seen: dict[str, str] = {}
    for root in roots:
        if not root.exists() and not root.is_symlink():
            continue
        for path in [root, *sorted(root.rglob("*"))] if root.is_dir() and not root.is_symlink() else [root]:
            key = str(path)
            if path.is_symlink():
                seen[key] = "-> " + str(path.readlink())
            elif path.is_dir():
                seen[key] = "dir"
            else:
                seen[key] = hashlib.sha256(path.read_bytes()).hexdigest()
    return seen


def assert_untouched(before: dict[str, str], *roots: Path) -> None:
    """Nothing under `roots` was deleted or changed since `before` (new files may appear)."""
    after = snapshot(*roots)
    gone = sorted(k for k in before if k not in after)
    changed = sorted(k for k in before if k in after and after[k] != before[k])
    assert not gone and not changed, f"deleted: {gone[:10]}, changed: {changed[:10]}"


def _open_bytes(path: Path) -> bytes:
    data = path.read_bytes()
    return gzip.decompress(data) if path.name.endswith(".gz") else data


def _files(path: Path, suffixes: Iterable[str]) -> list[Path]:
    if path.is_file():
        return [path]
    wanted = tuple(suffixes)
    return sorted(
        p
        for p in path.rglob("*")
        if p.is_file() and not p.name.startswith(("_", ".")) and p.name.endswith(wanted)
    )


def jsonl_records(path: Path) -> int:
    """Records of a JSON Lines file or folder: its lines that hold anything but whitespace
    (what a JSON Lines reader must account for, parsable or not)."""
    return sum(
        sum(1 for line in _open_bytes(f).split(b"\n") if line.strip())
        for f in _files(path, (".jsonl", ".json", ".ndjson", ".jsonl.gz", ".json.gz", ".ndjson.gz"))
    )


def csv_records(path: Path, header: bool = True) -> int:
    """Records of a CSV file or folder by neardup's rule (lib/neardup/stages/csv_records.py,
    docs/operations.md "Input"), recounted here from the bytes: a record starts on a line
    (split at "\\n") that is not blank (spaces, tabs, CR) and before which the file holds an
    even number of `"`; less each file's header record. A record whose quote is never closed
    counts once (it is malformed)."""
    total = 0
    for f in _files(path, (".csv", ".csv.gz")):
        lines = _open_bytes(f).split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()  # the newline that ends the last line starts none
        records = quotes = 0
        for line in lines:
            if quotes % 2 == 0 and line.strip(b" \t\r"):
                records += 1
            quotes += line.count(b'"')
        total += records - (1 if header and records else 0)
    return total


def parquet_records(path: Path) -> int:
    """Rows of a Parquet file or folder, from the files' footers."""
    return sum(pq.ParquetFile(f).metadata.num_rows for f in _files(path, (".parquet",)))


def output_rows(output: Path) -> dict[str, int]:
    """Rows of a finished output by status, read with pyarrow: clusters/ has every input row
    with an id once (kept, removed or rejected); a malformed line, which has no id, is a
    row of rejected/ only (status `malformed` here)."""
    counts: dict[str, int] = {}
    for status in pq.read_table(output / "clusters").column("status").to_pylist():
        counts[status] = counts.get(status, 0) + 1
    rejected = pq.read_table(output / "rejected")
    if "malformed_line" in rejected.column_names:
        malformed = rejected.num_rows - rejected.column("malformed_line").null_count
        if malformed:
            counts["malformed"] = malformed
    return counts


def assert_all_accounted(output: Path, records: int) -> dict[str, int]:
    """Every one of `records` input rows (an independent count) is in the outputs once, and
    rejected/ holds exactly the rejected and malformed ones; returns the counts by status."""
    counts = output_rows(output)
    assert sum(counts.values()) == records, f"{counts} against {records} input records"
    rejected = pq.read_table(output / "rejected").num_rows
    expected = counts.get("rejected", 0) + counts.get("malformed", 0)
    assert rejected == expected, f"rejected/ has {rejected} rows, the statuses say {counts}"
    return counts
