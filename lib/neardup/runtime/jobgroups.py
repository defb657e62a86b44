"""Each stage's Spark jobs in a job group of their own, described with the stage's size.

The Spark UI, its REST API and the event log then show `neardup: verify 521 candidates`
instead of `mapInArrow at ...`, and `sc.cancelJobGroup(group_id(run_id, "verify"))`
cancels one stage of one run. The description always begins `neardup: <stage>` (the memory
benchmark and the cluster tests match on that prefix); what follows is the size known
when the stage starts.

Job group and description are properties of the calling thread; jobs Spark SQL starts
in its own threads (broadcasts, subqueries) inherit them. A session neardup reuses
(Databricks, notebooks, tests) gets its previous properties back at the end of the run.
"""

from __future__ import annotations

import contextlib

from pyspark import SparkContext

PREFIX = "neardup: "
# The thread-local properties setJobGroup sets (SparkContext.SPARK_JOB_* in Scala).
_KEYS = ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel")
# The job groups of the runs under way, by run: what Ctrl-C cancels (runtime/interrupts.py).
_ACTIVE: dict[str, set[str]] = {}


def active_groups() -> list[str]:
    """Every job group a run under way in this process has started (a stage's jobs, and a
    thread's that inherited its group, may run on after the next stage began)."""
    return sorted(g for groups in list(_ACTIVE.values()) for g in groups)


def description(stage: str, about: str = "") -> str:
    """`neardup: <stage>` followed by what the stage works on, e.g. `3,000 documents`."""
    return f"{PREFIX}{stage} {about}".rstrip()


def group_id(run_id: str, stage: str) -> str:
    """One group per stage of one run (run_id is report.json's)."""
    return f"neardup-{run_id}-{stage}"


def count(n: int, noun: str) -> str:
    return f"{n:,} {noun}"


class JobGroups:
    """Sets each stage's job group; `close` restores what the thread had before."""

    def __init__(self, sc: SparkContext, run_id: str) -> None:
        self._sc = sc
        self._run_id = run_id
        self._before = {key: sc.getLocalProperty(key) for key in _KEYS}

    def start(self, stage: str, about: str = "") -> None:
        # interruptOnCancel stays False (Spark's default): interrupting task threads can
        # mark HDFS data nodes dead (HDFS-1208); Spark still stops a cancelled task when
        # it next reads a record.
        group = group_id(self._run_id, stage)
        _ACTIVE.setdefault(self._run_id, set()).add(group)
        self._sc.setJobGroup(group, description(stage, about), False)

    def close(self) -> None:
        _ACTIVE.pop(self._run_id, None)
        # After a JVM death this fails too; the original error is the one to report.
        with contextlib.suppress(Exception):
            for key, value in self._before.items():
                # A null value removes the property (SparkContext.setLocalProperty).
                self._sc.setLocalProperty(key, value)  # type: ignore[arg-type]
