"""Whole-frame equality for the Spark tiers, on every Spark version the project supports.

pyspark's own `assertDataFrameEqual` cannot be used on Spark 3.5: it imports
pyspark.pandas, whose 3.5 releases still use `np.NaN`, removed in NumPy 2.
"""

from __future__ import annotations

from typing import Any


def _sort_key(row: tuple[Any, ...]) -> tuple[tuple[bool, Any], ...]:
    # None sorts first in each column, and is never compared with a value.
    return tuple((v is not None, v if v is not None else 0) for v in row)


def assert_frames_equal(actual: Any, expected: Any) -> None:
    """Same column names and types (nullability aside) and the same rows in any order."""
    got_schema = [(f.name, f.dataType.simpleString()) for f in actual.schema.fields]
    want_schema = [(f.name, f.dataType.simpleString()) for f in expected.schema.fields]
    assert got_schema == want_schema
    got = sorted((tuple(r) for r in actual.collect()), key=_sort_key)
    want = sorted((tuple(r) for r in expected.collect()), key=_sort_key)
    assert got == want


def assert_counted(pairs: Any, known: Any) -> None:
    """`known` (stages/skew.Counted) counts the groups of `pairs` (src, dst) as they are."""
    from collections import Counter

    sizes = Counter(row[0] for row in pairs.select("src").collect())
    assert dict(zip(known.keys.tolist(), known.rows.tolist(), strict=True)) == sizes
    assert known.total == sum(sizes.values()) + len(sizes)
