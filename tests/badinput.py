"""Builds the bad-input corpora: every kind of messy input neardup documents, with the
outcome each must get. Run as a script to look at them:

    python tests/badinput.py /tmp/bad

Two kinds of case:
- CONTINUE: rows of one Parquet corpus; the job runs to the end and each row gets the
  status (and reason) in EXPECTED.
- STOP: inputs on which the job must stop with the exit code and a message naming the
  file, column or row (STOP_CASES: name -> (exit code, message fragment)).
"""

from __future__ import annotations

import gzip
import json
import random
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

_WORDS = [f"w{i}" for i in range(5000)]


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choices(_WORDS, k=n))


def continue_rows() -> tuple[list[dict[str, object]], dict[int, tuple[str, str | None]]]:
    """Rows of the corpus that runs to the end, and id -> (status, cluster id's key or reason)."""
    rng = random.Random(5)
    emoji = "launch day 🚀🚀 we shipped the new release 🎉 thanks to every contributor 🙏 " * 3
    rtl = "שלום עולם זהו מסמך בעברית עם מספיק מילים כדי ליצור רעפים רבים " * 2 + "مرحبا بالعالم هذه وثيقة"
    cjk = "".join(chr(0x4E00 + rng.randrange(0, 2000)) for _ in range(300))
    big = _words(rng, 9_000_000)  # ~53 MB
    assert len(big) > 50_000_000
    rows: list[dict[str, object]] = [
        {"id": 1, "text": None},
        {"id": 2, "text": ""},
        {"id": 3, "text": " \t\n\u3000\u00a0 "},
        {"id": 4, "text": "hi"},  # shorter than one shingle
        {"id": 5, "text": big},
        {"id": 6, "text": "\x00\x07control\x1b[0m characters " + _words(rng, 40)},
        {"id": 7, "text": emoji},
        {"id": 8, "text": emoji + "again"},  # near duplicate of 7
        {"id": 9, "text": "un café crème au bord de la mer " * 3},  # precomposed é
        {
            "id": 10,
            "text": "un cafe\u0301 cre\u0300me au bord de la mer " * 3,
        },  # combining marks: NFKC-equal to 9
        {"id": 11, "text": rtl},
        {"id": 12, "text": rtl + " نهاية"},  # near duplicate of 11
        {"id": 13, "text": cjk},  # no spaces: character 5-grams
        {"id": 14, "text": cjk[:150] + "好" + cjk[151:]},  # one character changed: J ~ 0.97
        {"id": 15, "text": "replacement \ufffd\ufffd characters from invalid bytes " + _words(rng, 30)},
        {"id": 16, "text": "ＦＵＬＬ－ＷＩＤＴＨ letters fold under nfkc " + "x " * 3},
        {"id": 17, "text": "full-width letters fold under nfkc x x x"},  # NFKC + lowercase equal to 16
    ]
    expected: dict[int, tuple[str, str | None]] = {
        1: ("rejected", "null text"),
        2: ("rejected", "empty text after normalization"),
        3: ("rejected", "empty text after normalization"),
        4: ("unique", None),
        5: ("unique", None),
        6: ("unique", None),
        7: ("near_duplicate", None),
        8: ("kept", None),  # longer of the pair
        9: ("exact_duplicate", None),  # 10 is longer (combining marks are extra code points)
        10: ("kept", None),
        11: ("near_duplicate", None),
        12: ("kept", None),
        13: ("kept", None),  # equal length: the smaller id wins
        14: ("near_duplicate", None),
        15: ("unique", None),
        16: ("kept", None),  # longer: full-width spaces and the trailing "x "
        17: ("exact_duplicate", None),
    }
    return rows, expected


def write_continue_corpus(root: Path) -> Path:
    rows, _ = continue_rows()
    path = root / "continue"
    path.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path / "part-0.parquet")
    return path


def write_stop_cases(root: Path) -> dict[str, tuple[Path, list[str], int, str]]:
    """name -> (input path, extra CLI args, exit code, message fragment)."""
    root.mkdir(parents=True, exist_ok=True)
    good = [{"id": i, "text": f"document {i} has a few words of its own {i * 7}"} for i in range(20)]
    cases: dict[str, tuple[Path, list[str], int, str]] = {}

    def parquet(name: str, rows: list[dict[str, object]]) -> Path:
        p = root / name
        p.mkdir(exist_ok=True)
        pq.write_table(pa.Table.from_pylist(rows), p / "part-0.parquet")
        return p

    cases["duplicate ids"] = (parquet("dup_ids", [*good, {"id": 3, "text": "again"}]), [], 3, "repeated")
    cases["null ids"] = (parquet("null_ids", [*good, {"id": None, "text": "no id"}]), [], 3, "null id")
    cases["missing id column"] = (parquet("no_id", [{"key": 1, "text": "x"}]), [], 3, "no id column 'id'")
    cases["missing text column"] = (
        parquet("no_text", [{"id": 1, "body": "x"}]),
        [],
        3,
        "no text column 'text'",
    )
    cases["text not a string"] = (parquet("int_text", [{"id": 1, "text": 5}]), [], 3, "expected string")
    empty = root / "empty_dir"
    empty.mkdir(exist_ok=True)
    cases["empty input directory"] = (empty, ["--format", "parquet"], 3, "empty directory")
    cases["path does not exist"] = (root / "does_not_exist", [], 2, "does not exist")

    corrupt = root / "corrupt_parquet"
    corrupt.mkdir(exist_ok=True)
    for i in range(3):
        pq.write_table(pa.Table.from_pylist(good[i * 6 : i * 6 + 6]), corrupt / f"part-{i}.parquet")
    data = (corrupt / "part-1.parquet").read_bytes()
    (corrupt / "part-1.parquet").write_bytes(data[: len(data) // 2])  # truncated
    cases["truncated parquet among good ones"] = (corrupt, [], 3, "part-1.parquet cannot be read")

    mixed = root / "mixed_id_types_parquet"
    mixed.mkdir(exist_ok=True)
    pq.write_table(pa.Table.from_pylist(good[:10]), mixed / "part-0.parquet")
    pq.write_table(
        pa.Table.from_pylist([{"id": f"s{i}", "text": f"string id {i} text"} for i in range(10)]),
        mixed / "part-1.parquet",
    )
    cases["mixed id types across parquet files"] = (mixed, [], 3, "cannot be read")

    lines = [json.dumps(r) for r in good]
    lines.insert(13, '{"id": 99, "text": "an unterminated string}')
    jl = root / "malformed.jsonl"
    jl.write_text("\n".join(lines) + "\n")
    cases["jsonl with one malformed line"] = (jl, [], 3, "malformed.jsonl line 14")

    bad_utf8 = root / "bad_utf8.jsonl.gz"
    with gzip.open(bad_utf8, "wb") as f:
        f.write(b"".join(json.dumps(r).encode() + b"\n" for r in good[:5]))
        f.write(b'{"id": 77, "text": "caf\xe9 latin-1 bytes"}\n')
    cases["invalid utf-8 in jsonl"] = (bad_utf8, [], 3, "bad_utf8.jsonl.gz line 6")
    return cases


def write_lenient_inputs(root: Path) -> dict[str, Path]:
    """Inputs that run to the end although they look odd: invalid UTF-8 in CSV (decoded
    with U+FFFD), mixed id types in JSON Lines (the column is read as strings)."""
    root.mkdir(parents=True, exist_ok=True)
    csv = root / "bad_utf8.csv"
    csv.write_bytes(b'id,text\n1,"caf\xe9 latin-1 bytes in a csv file here"\n2,"plain text row two ok"\n')
    mixed = root / "mixed_ids.jsonl"
    mixed.write_text(
        json.dumps({"id": 1, "text": "an integer id row with words"})
        + "\n"
        + json.dumps({"id": "b-2", "text": "a string id row with other words"})
        + "\n"
    )
    return {"csv": csv, "jsonl": mixed}


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "bad-input")
    print(write_continue_corpus(out))
    for name, (path, _, code, msg) in write_stop_cases(out / "stop").items():
        print(f"{name}: {path} -> exit {code} ({msg})")
    print(write_lenient_inputs(out / "lenient"))
