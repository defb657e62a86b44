"""Reusing an active session (Databricks, notebooks): what it cannot take is reported."""

from __future__ import annotations

from typing import Any

from neardup.runtime.session import heap_and_slots, start


def test_settings_a_live_session_refuses_are_reported(spark: Any) -> None:
    before = spark.conf.get("spark.sql.shuffle.partitions")
    try:
        started = start(None, {"spark.driver.memory": "64g", "spark.sql.shuffle.partitions": "3"})
        assert started.spark is spark and started.reused
        assert started.not_applied == ["spark.driver.memory"]
        assert spark.conf.get("spark.sql.shuffle.partitions") == "3"
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before)


def test_heap_and_slots_of_the_local_session(spark: Any) -> None:
    heap, slots, where = heap_and_slots(spark)
    # conftest: local[2] with a 2g heap (the JVM reports a little less than -Xmx).
    assert (slots, where) == (2, "driver")
    assert 1.5 * 2**30 < heap <= 2 * 2**30
