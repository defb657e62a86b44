"""Memory rules (neardup.runtime.memory) and what the user is told when the JVM dies (jvmexit)."""

from __future__ import annotations

import pytest

from neardup.errors import stage_of, tag_stage
from neardup.runtime.failures import local_jvm_died, more_memory, task_failure
from neardup.runtime.memory import (
    MAX_ARROW_ROWS,
    MAX_BATCH,
    MAX_CACHE_ROWS,
    MAX_READER_ROWS,
    GiB,
    KiB,
    MiB,
    batch_sizes,
    format_size,
    local_heap,
    parse_size,
    slot_share,
)


@pytest.mark.parametrize(
    ("text", "unit", "want"),
    [
        ("4g", "", 4 * GiB),
        ("512m", "", 512 * MiB),
        ("1024k", "", 1024 * KiB),
        ("2GB", "", 2 * GiB),
        ("1.5g", "", int(1.5 * GiB)),
        ("123", "", 123),
        ("4096", "m", 4 * GiB),
        (" 8m ", "", 8 * MiB),
    ],
)
def test_parse_size(text: str, unit: str, want: int) -> None:
    assert parse_size(text, unit) == want


@pytest.mark.parametrize("bad", ["", "g", "4x", "-1g", "four"])
def test_parse_size_refuses_what_is_not_a_size(bad: str) -> None:
    with pytest.raises(ValueError, match="not a size"):
        parse_size(bad)


def test_format_size_is_exact_and_round_trips() -> None:
    assert [format_size(n) for n in (12 * GiB, 768 * MiB, 1536 * KiB, 3 * KiB + 5)] == [
        "12g",
        "768m",
        "1536k",
        "3k",
    ]
    for n in (GiB, 3 * GiB, 256 * MiB, 1280 * MiB):
        assert parse_size(format_size(n)) == n


@pytest.mark.parametrize(
    ("machine", "heap"),
    [
        (24 * GiB, 12 * GiB),
        (16 * GiB + 300 * MiB, 8 * GiB),  # rounded down to 256 MiB steps
        (3 * GiB, 1536 * MiB),
        (1 * GiB, 1 * GiB),  # never below Spark's own default
        (256 * GiB, 31 * GiB),  # compressed object pointers end at 32 GiB
    ],
)
def test_local_heap_is_half_the_machine(machine: int, heap: int) -> None:
    assert local_heap(machine) == heap
    assert local_heap(machine) % (256 * MiB) == 0


def test_batches_are_bounded_in_bytes_not_rows() -> None:
    heap = GiB
    share = slot_share(heap, 2)
    assert share == (GiB - 300 * MiB) // 2
    short = batch_sizes(heap, 2, text_bytes_per_row=2_350, row_bytes_per_row=2_500)
    long = batch_sizes(heap, 2, text_bytes_per_row=45_000, row_bytes_per_row=45_500)
    # Short documents keep Spark's reader and Arrow row limits; long ones get as many rows
    # as fit the bytes. A cached batch (10,000 rows by Spark's default) is bounded by bytes
    # for both: 11,862,016 bytes a batch here.
    assert short.batch_bytes == 11_862_016
    assert (short.reader_rows, short.arrow_rows) == (MAX_READER_ROWS, MAX_ARROW_ROWS)
    assert (short.cache_rows, long.cache_rows) == (4_744, 260)
    assert long.arrow_rows == long.batch_bytes // 45_000
    assert long.reader_rows == long.batch_bytes // 45_500
    assert long.arrow_rows * 45_000 <= long.batch_bytes < (long.arrow_rows + 1) * 45_000
    assert short.vectorized_reader and not long.vectorized_reader
    # A document larger than a whole batch still goes through: one row per batch.
    huge = batch_sizes(heap, 2, text_bytes_per_row=50 * MiB, row_bytes_per_row=50 * MiB)
    assert (huge.reader_rows, huge.arrow_rows, huge.cache_rows) == (1, 1, 1)


def test_batch_bytes_follow_the_heap_within_bounds() -> None:
    small = batch_sizes(600 * MiB, 16, 10_000, 10_000)
    big = batch_sizes(64 * GiB, 2, 10_000, 10_000)
    assert small.batch_bytes == MiB  # the floor
    assert big.batch_bytes == MAX_BATCH  # the ceiling
    mid = batch_sizes(GiB, 2, 10_000, 10_000)
    assert mid.batch_bytes == slot_share(GiB, 2) // 32
    assert batch_sizes(GiB, 2, 10_000, 10_000, batch_bytes=3 * MiB).arrow_rows == 3 * MiB // 10_000
    assert 8 * MiB <= mid.row_group_bytes <= 128 * MiB


def test_unknown_sizes_keep_spark_row_limits() -> None:
    sizes = batch_sizes(4 * GiB, 2, 0.0, 0.0)
    assert (sizes.reader_rows, sizes.arrow_rows, sizes.cache_rows, sizes.vectorized_reader) == (
        MAX_READER_ROWS,
        MAX_ARROW_ROWS,
        MAX_CACHE_ROWS,
        True,
    )


def test_more_memory_suggests_twice_the_heap_in_gigabytes() -> None:
    assert [more_memory(x) for x in ("1g", "768m", "4g", "3000m", None, "bogus")] == [
        "2g",
        "2g",
        "8g",
        "6g",
        "2g",
        "2g",
    ]


_OOM_LOG = """26/12/01 03:22:12 WARN NativeCodeLoader: Unable to load native-hadoop library
Terminating due to java.lang.OutOfMemoryError: Java heap space
"""


def test_local_jvm_out_of_memory() -> None:
    msg = local_jvm_died(3, _OOM_LOG, "write", "1g").message
    assert msg == (
        "the Spark JVM ran out of memory (Java heap space) in stage write; "
        "give it more with --conf spark.driver.memory=2g"
    )
    # Spark's own exit code for an OutOfMemoryError in a task, with no log at hand.
    assert local_jvm_died(52, "", "sign", "4g").message.startswith(
        "the Spark JVM ran out of memory (Java heap space) in stage sign; "
    )
    assert (
        "GC overhead limit exceeded"
        in local_jvm_died(52, "java.lang.OutOfMemoryError: GC overhead limit exceeded\n", None, "1g").message
    )


def test_local_jvm_killed_or_crashed() -> None:
    killed = local_jvm_died(-9, "", "verify", "12g").message
    assert "killed by SIGKILL" in killed and "in stage verify" in killed
    assert "out-of-memory killer" in killed
    crashed = local_jvm_died(134, "# /tmp/hs_err_pid4242.log\n", "sign", "1g").message
    assert (
        crashed
        == "the Spark JVM stopped with exit code 134, crash report /tmp/hs_err_pid4242.log in stage sign"
    )


_CLUSTER_OOM = (
    "An error occurred while calling o123.parquet.\n: org.apache.spark.SparkException: Job aborted due to "
    "stage failure: Task 3 in stage 7.0 failed 4 times, most recent failure: Lost task 3.3 in stage 7.0 "
    "(TID 40) (10.0.0.2 executor 3): ExecutorLostFailure (executor 3 exited caused by one of the running "
    "tasks) Reason: Command exited with code 52\n"
)
_CLUSTER_LOST = _CLUSTER_OOM.replace(
    "Command exited with code 52", "Container killed by YARN for exceeding memory limits"
)


def test_cluster_failures_name_the_stage_and_executor_memory() -> None:
    found = task_failure(_CLUSTER_OOM, "verify", local=False, heap="1g")
    assert found is not None
    assert found.message == (
        "Spark executors ran out of memory in stage verify and the task failed after 4 attempts; "
        "give them more with --conf spark.executor.memory=2g"
    )
    lost = task_failure(_CLUSTER_LOST, "write", local=False, heap="4g")
    assert lost is not None
    assert "executors were lost in stage write" in lost.message
    assert "spark.executor.memory=8g" in lost.message and "memoryOverhead" in lost.message
    local = task_failure(
        "org.apache.spark.memory.SparkOutOfMemoryError: [UNABLE_TO_ACQUIRE_MEMORY] "
        "Unable to acquire 65536 bytes",
        "candidates",
        local=True,
        heap="1g",
    )
    assert local is not None and "in stage candidates" in local.message
    assert "spark.driver.memory=2g" in local.message
    assert task_failure("AnalysisException: column x not found", "read", local=True, heap="1g") is None


def test_stage_of_follows_the_chain_of_exceptions() -> None:
    inner = ValueError("boom")
    tag_stage(inner, "verify")
    tag_stage(inner, "outer stage")  # the innermost stage wins
    try:
        try:
            raise inner
        except ValueError as e:
            raise RuntimeError("while cleaning up") from e
    except RuntimeError as outer:
        assert stage_of(outer) == "verify"
    assert stage_of(KeyError("x")) is None
