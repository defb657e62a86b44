"""Spark's event log as the benchmarks read it: one application's events in order, and the
neardup stage each Spark job (and so each Spark stage) belongs to.

Shared by memory.py (executor metrics per stage), skew.py (shuffle reads per task), index.py
(SQL metrics of the scans) and scale.py (task metrics per stage), so that the log's layout
and the naming of neardup's jobs are read in one place.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# Jobs that run outside a neardup stage (the JVM's own, a reused session's) are counted here.
OUTSIDE = "outside stages"
_GROUP_PREFIX = "neardup-"  # runtime/jobgroups.py: group_id = neardup-<run_id>-<stage>
_DESCRIPTION_PREFIX = "neardup: "  # and the description begins `neardup: <stage>`


def app_log(log_dir: Path) -> Path:
    """The one application's log in a `spark.eventLog.dir` (a file, or Spark 4's directory)."""
    found = list(log_dir.iterdir())
    if len(found) != 1:
        raise ValueError(f"{log_dir}: expected one application's event log, found {len(found)}")
    return found[0]


def event_files(event_log: Path) -> list[Path]:
    """The files of one application's log, in order: Spark 4 writes a directory of rolled
    files (eventlog_v2_*/events_<n>_*), Spark 3 one file."""
    if event_log.is_dir():
        return sorted(event_log.glob("events_*"), key=lambda f: int(f.name.split("_")[1]))
    return [event_log]


def events(event_log: Path) -> Iterator[dict[str, Any]]:
    """The events of one application's event log, in order."""
    for f in event_files(event_log):
        with f.open() as lines:
            for line in lines:
                yield json.loads(line)


def job_stage(job_start: dict[str, Any]) -> str:
    """The neardup stage of a SparkListenerJobStart event: from its job group
    (`neardup-<run_id>-<stage>`), else its description (`neardup: <stage> ...`)."""
    props = job_start.get("Properties") or {}
    group = props.get("spark.jobGroup.id") or ""
    if group.startswith(_GROUP_PREFIX) and group.count("-") >= 2:
        return str(group.split("-", 2)[2])
    desc = props.get("spark.job.description") or ""
    if desc.startswith(_DESCRIPTION_PREFIX):
        return str(desc.removeprefix(_DESCRIPTION_PREFIX).split(" ")[0])
    return OUTSIDE


def job_stages(job_start: dict[str, Any]) -> tuple[str, list[int]]:
    """A job start's neardup stage and the ids of the Spark stages it runs."""
    return job_stage(job_start), [int(s) for s in job_start.get("Stage IDs", [])]


def shuffle_read_bytes(read: dict[str, Any]) -> int:
    """Bytes a task read from shuffle files, fetched from other executors or its own."""
    return int(read.get("Remote Bytes Read", 0)) + int(read.get("Local Bytes Read", 0))


def stage_starts(event_log: Path) -> dict[str, float]:
    """Each neardup stage's first Spark job's submission (epoch seconds), in order: the stages
    run one after the other, so each owns the time from its start to the next one's."""
    starts: dict[str, float] = {}
    for event in events(event_log):
        if event.get("Event") == "SparkListenerJobStart":
            name = job_stage(event)
            if name != OUTSIDE and name not in starts:
                starts[name] = int(event["Submission Time"]) / 1e3
    return dict(sorted(starts.items(), key=lambda kv: kv[1]))


def spark_properties(event_log: Path) -> dict[str, str]:
    """The application's Spark settings, as its environment-update event lists them."""
    for event in events(event_log):
        if event.get("Event") == "SparkListenerEnvironmentUpdate":
            props = event.get("Spark Properties") or {}
            # Spark 3 and 4 write a list of [key, value] pairs; be lenient with a mapping.
            pairs = props.items() if isinstance(props, dict) else props
            return {str(k): str(v) for k, v in pairs}
    return {}
