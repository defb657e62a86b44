"""The scale benchmark's reading of Spark's event log (bench/eventlog.py, bench/scale.py) on a
hand-written log whose every figure is worked out here, and the corpus cache without shards."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from neardup_testkit import synth, truth

# bench/ is scripts, not a package: its modules import each other by name.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import eventlog
import scale

MB = 2**20


def _job(job: int, stages: list[int], group: str | None, desc: str | None, at_ms: int) -> dict:
    props = {k: v for k, v in (("spark.jobGroup.id", group), ("spark.job.description", desc)) if v}
    return {
        "Event": "SparkListenerJobStart",
        "Job ID": job,
        "Submission Time": at_ms,
        "Stage IDs": stages,
        "Properties": props,
    }


def _submitted(stage: int, attempt: int = 0) -> dict:
    return {
        "Event": "SparkListenerStageSubmitted",
        "Stage Info": {"Stage ID": stage, "Stage Attempt ID": attempt},
    }


def _task(
    stage: int, ok: bool, run_ms: int, cpu_ns: int, read: tuple[int, int, int], write: int, **m: int
) -> dict:
    remote, local, records = read
    return {
        "Event": "SparkListenerTaskEnd",
        "Stage ID": stage,
        "Stage Attempt ID": 0,
        "Task End Reason": {"Reason": "Success" if ok else "ExceptionFailure"},
        "Task Metrics": {
            "Executor Run Time": run_ms,
            "Executor CPU Time": cpu_ns,
            "JVM GC Time": m.get("gc", 0),
            "Memory Bytes Spilled": m.get("mem_spill", 0),
            "Disk Bytes Spilled": m.get("disk_spill", 0),
            "Peak Execution Memory": m.get("peak", 0),
            "Input Metrics": {"Bytes Read": m.get("input", 0), "Records Read": 0},
            "Output Metrics": {"Bytes Written": m.get("output", 0), "Records Written": 0},
            "Shuffle Read Metrics": {
                "Remote Bytes Read": remote,
                "Local Bytes Read": local,
                "Total Records Read": records,
            },
            "Shuffle Write Metrics": {"Shuffle Bytes Written": write, "Shuffle Records Written": write // 10},
        },
    }


def _peaks(stage: int, heap: int, rss: int, python: int, direct: int) -> dict:
    return {
        "Event": "SparkListenerStageExecutorMetrics",
        "Executor ID": "driver",
        "Stage ID": stage,
        "Stage Attempt ID": 0,
        "Executor Metrics": {
            "JVMHeapMemory": heap,
            "ProcessTreeJVMRSSMemory": rss,
            "ProcessTreePythonRSSMemory": python,
            "DirectPoolMemory": direct,
            "OnHeapExecutionMemory": heap // 2,
            "OnHeapStorageMemory": heap // 4,
            "JVMOffHeapMemory": 100,
        },
    }


def _write_log(tmp_path: Path) -> Path:
    """Spark 4's layout: a directory of rolled files, events split over two of them."""
    events = [
        {
            "Event": "SparkListenerEnvironmentUpdate",
            "Spark Properties": {"spark.master": "local[2]", "x": "y"},
        },
        _job(0, [0], None, None, 1_000),  # outside any stage (no group, no description)
        _submitted(0),
        _task(0, True, 100, 5_000_000, (0, 0, 0), 0, input=1000),
        _job(1, [1, 2], "neardup-abc123-sign", "neardup: sign 10 documents", 2_000),
        _submitted(1),
        _task(1, True, 300, 20_000_000, (0, 0, 0), 700, output=50, peak=3 * MB),
        _task(1, False, 50, 1_000_000, (0, 0, 0), 0),
        _submitted(2),
        _task(2, True, 200, 10_000_000, (100, 600, 70), 0, mem_spill=4096, disk_spill=1024, peak=5 * MB),
        _submitted(2, attempt=1),  # a retry
        _task(2, True, 250, 12_000_000, (0, 300, 30), 0, gc=40),
        _peaks(1, heap=900, rss=2000, python=600, direct=10),
        _peaks(2, heap=1200, rss=1800, python=650, direct=30),
        # Only a description: the memory benchmark's way of naming the stage.
        _job(2, [3], None, "neardup: verify 5 candidates", 5_000),
        _submitted(3),
        _task(3, True, 400, 30_000_000, (0, 80, 8), 20, peak=MB),
    ]
    app = tmp_path / "eventlog_v2_local-1"
    app.mkdir()
    for n, part in ((1, events[:6]), (2, events[6:])):
        (app / f"events_{n}_local-1").write_text("".join(json.dumps(e) + "\n" for e in part))
    return tmp_path


def test_stage_figures_from_a_hand_written_log(tmp_path: Path) -> None:
    log = eventlog.app_log(_write_log(tmp_path))
    figures = scale.stage_figures(log)
    expected = {
        eventlog.OUTSIDE: scale.StageFigures(
            spark_stages=1, tasks=1, run_s=0.1, cpu_s=0.005, input_bytes=1000
        ),
        "sign": scale.StageFigures(
            spark_stages=2,
            tasks=4,
            failed_tasks=1,
            retried_stages=1,
            run_s=0.8,
            cpu_s=0.043,
            gc_s=0.04,
            output_bytes=50,
            shuffle_write_bytes=700,
            shuffle_write_records=70,
            shuffle_read_bytes=1000,
            shuffle_read_records=100,
            memory_spilled=4096,
            disk_spilled=1024,
            peak_execution=5 * MB,
            largest_task_read=700,
            largest_stage_read=1000,  # stage 2's two attempts: 700 + 300
            jvm_heap=1200,
            execution_memory=600,
            storage_memory=300,
            jvm_offheap=100,
            direct_pool=30,
            jvm_rss=2000,
            python_rss=650,
        ),
        "verify": scale.StageFigures(
            spark_stages=1,
            tasks=1,
            run_s=0.4,
            cpu_s=0.03,
            shuffle_write_bytes=20,
            shuffle_write_records=2,
            shuffle_read_bytes=80,
            shuffle_read_records=8,
            peak_execution=MB,
            largest_task_read=80,
            largest_stage_read=80,
        ),
    }
    assert list(figures) == list(expected)
    for name, want in expected.items():
        assert _close(figures[name], want), name
    assert eventlog.stage_starts(log) == {"sign": 2.0, "verify": 5.0}
    assert eventlog.spark_properties(log) == {"spark.master": "local[2]", "x": "y"}


def _close(got: scale.StageFigures, want: scale.StageFigures) -> bool:
    """Field by field, floats to a nanosecond's rounding, everything else exactly."""
    for name, value in vars(want).items():
        have = getattr(got, name)
        if have != pytest.approx(value, abs=1e-9):
            raise AssertionError(f"{name}: {have} != {value}")
    return True


def test_total_sums_and_takes_peaks() -> None:
    a = scale.StageFigures(tasks=2, run_s=1.5, shuffle_write_bytes=10, peak_execution=7, jvm_rss=5)
    b = scale.StageFigures(tasks=3, run_s=0.5, shuffle_write_bytes=4, peak_execution=3, jvm_rss=9)
    assert scale.total({"a": a, "b": b}) == scale.StageFigures(
        tasks=5, run_s=2.0, shuffle_write_bytes=14, peak_execution=7, jvm_rss=9
    )


def test_cpu_by_stage_splits_the_samples_at_each_stage_start() -> None:
    # CPU rises 1 s per second from t=10 to t=20, then 2 s per second to t=30.
    samples = [(10.0, 0.0), (20.0, 10.0), (30.0, 30.0)]
    got = scale.cpu_by_stage(samples, {"read": 15.0, "sign": 25.0})
    assert got == pytest.approx({scale.STARTUP: 5.0, "read": 15.0, "sign": 10.0})
    assert scale.cpu_by_stage(samples[:1], {"read": 15.0}) == {}


def test_ensure_corpus_without_shards(tmp_path: Path) -> None:
    spec = synth.CorpusSpec(num_docs=60, seed=3, mean_chars=300)
    corpus, reused = truth.ensure_corpus(spec, tmp_path, num_shards=0)
    assert not reused
    assert sorted(p.name for p in (tmp_path / corpus.key).iterdir()) == ["corpus.parquet"]
    again, reused = truth.ensure_corpus(spec, tmp_path, num_shards=0)
    assert reused and again.path == corpus.path
    # Asking for shards later makes them from the same file.
    _, reused = truth.ensure_corpus(spec, tmp_path, num_shards=2)
    assert not reused
    assert sorted(p.name for p in (tmp_path / corpus.key / "shards2").iterdir()) == [
        "00000.parquet",
        "00001.parquet",
    ]
