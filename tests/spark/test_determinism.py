"""Determinism, property-based: random small corpora with planted near-duplicates give
identical clusters/ (sorted by id) and the same kept ids whatever the shuffle
partition count (1, or 29: most partitions of a small corpus empty; 200 with adaptive
execution off cost minutes of empty tasks) and the input's file and row layout (one file,
or three with the rows reversed). tests/spark/test_pipeline.py and test_against.py repeat
their runs under other partitionings too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neardup import config
from neardup.commands.dedup import run

WORDS = [f"t{i}" for i in range(300)]


@st.composite
def corpora(draw: st.DrawFn) -> list[dict[str, Any]]:
    n_base = draw(st.integers(3, 12))
    string_ids = draw(st.booleans())
    docs: list[str] = []
    for _ in range(n_base):
        base = draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=40))
        docs.append(" ".join(base))
        for _ in range(draw(st.integers(0, 3))):
            variant = list(base)
            for _ in range(draw(st.integers(0, 3))):
                i = draw(st.integers(0, len(variant)))
                variant.insert(i, draw(st.sampled_from(WORDS)))
            text = " ".join(variant)
            docs.append(text.upper() if draw(st.booleans()) else text)
    ids = draw(st.lists(st.integers(-(2**40), 2**40), min_size=len(docs), max_size=len(docs), unique=True))
    return [{"id": f"d{i}" if string_ids else i, "text": t} for i, t in zip(ids, docs, strict=True)]


def _canonical(out: Path) -> tuple[pa.Schema, list[dict[str, Any]], list[Any]]:
    """clusters/ as read (its schema and rows in file order), and the kept ids. Not Arrow's
    bytes: those follow the chunks, one per file written, which the partitioning sets."""
    table = pq.read_table(out / "clusters")
    kept = sorted(pq.read_table(out / "kept").column("id").to_pylist())
    return table.schema, table.to_pylist(), kept


def _write(rows: list[dict[str, Any]], path: Path, files: int, reverse: bool) -> None:
    path.mkdir(parents=True)
    rows = rows[::-1] if reverse else rows
    step = max(1, -(-len(rows) // files))
    for i in range(0, len(rows), step):
        pq.write_table(pa.Table.from_pylist(rows[i : i + step]), path / f"part-{i}.parquet")


@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=corpora())
def test_same_output_whatever_the_layout(
    spark: Any, tmp_path_factory: Any, rows: list[dict[str, Any]]
) -> None:
    root = tmp_path_factory.mktemp("det")
    cfg = config.load(sets=["report.html=false"])
    results = []
    for shuffle, files, reverse in [(1, 1, False), (29, 3, True)]:
        inp = root / f"in-{shuffle}"
        _write(rows, inp, files, reverse)
        partitions_before = spark.conf.get("spark.sql.shuffle.partitions")
        spark.conf.set("spark.sql.shuffle.partitions", str(shuffle))
        try:
            run(spark, cfg, str(inp), str(root / f"out-{shuffle}"))
        finally:
            spark.conf.set("spark.sql.shuffle.partitions", partitions_before)
        results.append(_canonical(root / f"out-{shuffle}"))
    assert results[0] == results[1]
    ids = [r["id"] for r in pq.read_table(root / "out-1" / "clusters").to_pylist()]
    assert ids == sorted(ids) and sorted(ids) == sorted(r["id"] for r in rows)
