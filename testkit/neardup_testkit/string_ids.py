"""String ids for a generated corpus, shaped like a real corpus's: URLs, 40-hex content
hashes and object-store paths, of varied lengths, in an order unrelated to the integer
ids they replace (most real corpora's ids are strings; code that is fast or correct only
for integers shows up on them).

Each string is a function of its integer id and distinct for distinct ids (every shape
ends with the id itself in decimal, after a separator no other part has), so a corpus
keeps its rows and its truth; only the ids' type, lengths and order change.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

SHAPES = ("url", "sha1", "path")


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer: 64 well-mixed bits of each id (a deterministic stand-in for a
    content hash)."""
    with np.errstate(over="ignore"):
        z = x.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def string_ids(ids: np.ndarray) -> pa.Array:
    """Integer ids -> distinct string ids, one of three shapes by a hash of the id:
    `https://<host>/<hex, 4-40 digits>/<id>`, `<40 hex digits>-<id>` and
    `s3://corpus/shard-<nn>/<hex, 8 digits>_<id>.jsonl`. A few seconds a million (cached by the callers)."""
    ids = np.asarray(ids, dtype=np.int64)
    a, b, c = _mix(ids), _mix(ids ^ 0x5DEECE66D), _mix(ids ^ 0x2545F4914F6CDD1D)
    hosts = ("example.org", "news.example.com", "a.b.example.net")
    out = []
    for i, x, y, z in zip(ids.tolist(), a.tolist(), b.tolist(), c.tolist(), strict=True):
        digits = f"{x:016x}{y:016x}{z:016x}"
        shape = x % 3
        if shape == 0:
            out.append(f"https://{hosts[z % 3]}/{digits[: 4 + y % 37]}/{i}")
        elif shape == 1:
            out.append(f"{digits[:40]}-{i}")
        else:
            out.append(f"s3://corpus/shard-{z % 64:02d}/{digits[40:]}_{i}.jsonl")
    return pa.array(out, pa.string())


def with_string_ids(table: pa.Table, column: str = "id") -> pa.Table:
    """`table` with its integer `column` replaced by `string_ids` of it (non-null strings)."""
    at = table.schema.get_field_index(column)
    values = string_ids(table.column(column).to_numpy())
    return table.set_column(at, pa.field(column, pa.string(), nullable=False), values)
