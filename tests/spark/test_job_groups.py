"""Every Spark job of a run belongs to its stage's job group and is described with the
stage's size: the whole list of (group, description), read back from the UI's REST API
and the status tracker, against one worked out from how the corpus was made."""

from __future__ import annotations

import json
import time
import urllib.request
from itertools import combinations
from pathlib import Path
from typing import Any

import pytest

from neardup import config
from neardup.commands.dedup import run
from neardup_testkit.reference import jaccard, normalize, shingles

pytestmark = pytest.mark.compat  # .ci/spark35 runs these on Spark 3.5 too


def _cycle(tag: str, times: int) -> str:
    """Five words repeated: every repetition of two or more has the same five shingles
    (the rotations), so the texts differ but their shingle sets are equal."""
    return " ".join([f"{tag}a {tag}b {tag}c {tag}d {tag}e"] * times)


def _corpus() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    # Two groups of near duplicates (equal shingle sets), of 3 and 2 documents.
    rows += [{"text": _cycle("near", n)} for n in (2, 3, 4)]
    rows += [{"text": _cycle("pair", n)} for n in (2, 3)]
    # An exact group: three texts equal after normalization (case, spaces).
    exact = "an exact copy of one text with eight words"
    rows += [{"text": exact}, {"text": exact.upper()}, {"text": exact.replace(" ", "   ")}]
    # Five unrelated documents, each with words of its own.
    rows += [{"text": " ".join(f"u{i}w{j}" for j in range(8))} for i in range(5)]
    # Rejected: no text, and whitespace only.
    rows += [{"text": None}, {"text": " \u3000 "}]
    return [{"id": i, **row} for i, row in enumerate(rows)]


def _expected(rows: list[dict[str, Any]], input_path: str) -> dict[str, str]:
    """stage -> description, counted in plain Python from the corpus."""
    signed = [r for r in rows if r["text"] is not None and normalize(r["text"]).strip()]
    by_text: dict[str, list[dict[str, Any]]] = {}
    for r in signed:
        by_text.setdefault(normalize(r["text"]).strip(), []).append(r)
    reps = [group[0]["text"] for group in by_text.values()]
    sets = [shingles(t) for t in reps]
    # Equal shingle sets give equal signatures, hence shared buckets in every band; the
    # other documents share no word, hence no bucket: candidates are the equal pairs.
    equal = [(a, b) for a, b in combinations(range(len(reps)), 2) if sets[a] == sets[b]]
    verified = [(a, b) for a, b in equal if jaccard(sets[a], sets[b]) >= 0.8]
    groups = {frozenset(s) for s in sets}
    kept = len(groups)  # one per group of equal sets (an exact group is one representative)
    return {
        "read": f"neardup: read {input_path}",
        "sign": f"neardup: sign {len(rows)} documents",
        "exact": f"neardup: exact {len(signed)} signed",
        "candidates": f"neardup: candidates {len(reps)} representatives",
        "verify": f"neardup: verify {len(equal)} candidates",
        "components": f"neardup: components {len(verified)} edges",
        "survivors": f"neardup: survivors {len(verified)} edges",
        # Representatives in a cluster: the ends of the verified edges.
        "guard": f"neardup: guard {len({i for pair in verified for i in pair})} clustered",
        "write": f"neardup: write {kept} kept / {len(signed) - kept} removed",
        "check": f"neardup: check {len(rows)} rows",
        "report": f"neardup: report {len(rows)} rows, {len(verified)} edges",
    }


def _jobs(spark: Any) -> list[dict[str, Any]]:
    sc = spark.sparkContext
    url = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}/jobs"
    with urllib.request.urlopen(url, timeout=30) as r:
        jobs: list[dict[str, Any]] = json.loads(r.read())
    return jobs


def _marker_job(spark: Any) -> int:
    """Run a job of the test's own and wait until the status store lists it: the store
    takes Spark's events in order, so every job of the run before it is listed too."""
    sc = spark.sparkContext
    sc.setJobGroup("test-marker", "test-marker")
    try:
        sc.parallelize([1], 1).count()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
        sc.setLocalProperty("spark.job.description", None)  # type: ignore[arg-type]
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        done = [j["jobId"] for j in _jobs(spark) if j.get("jobGroup") == "test-marker"]
        if done and all(j["status"] != "RUNNING" for j in _jobs(spark)):
            return max(done)
        time.sleep(0.2)
    raise TimeoutError("the marker job never reached the status store")


def test_each_stage_is_a_job_group_described_with_its_size(spark: Any, tmp_path: Path) -> None:
    rows = _corpus()
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    want = _expected(rows, str(path))
    assert want["verify"] == "neardup: verify 4 candidates"  # the corpus is what it says

    sc = spark.sparkContext
    before = max((j["jobId"] for j in _jobs(spark)), default=-1)
    cfg = config.load(sets=["output.overwrite=true", "components.backend=builtin"])
    run_id = run(spark, cfg, str(path), str(tmp_path / "out")).report["run_id"]
    # The session's own properties are back as they were.
    assert sc.getLocalProperty("spark.jobGroup.id") is None
    assert sc.getLocalProperty("spark.job.description") is None
    marker = _marker_job(spark)
    jobs = [j for j in _jobs(spark) if before < j["jobId"] < marker]

    prefix = f"neardup-{run_id}-"
    # Every job of the run is in one of its stages' groups, with that stage's description.
    found = {(j.get("jobGroup"), j.get("description")) for j in jobs}
    assert found == {(prefix + stage, d) for stage, d in want.items()}
    # The public status tracker sees the same groups.
    tracker = sc.statusTracker()
    by_group = {stage: sorted(tracker.getJobIdsForGroup(prefix + stage)) for stage in want}
    assert by_group == {
        stage: sorted(j["jobId"] for j in jobs if j["jobGroup"] == prefix + stage) for stage in want
    }
