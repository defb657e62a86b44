"""Quality on real text that nobody here wrote: the licence, copyright and README files
under /usr and the LICENSE, README and METADATA files of the packages in this venv
(neardup_testkit.realtext), with exact all-pairs truth computed here.

Real text has what generated corpora lack: long files quoting a licence share LSH buckets
with short copies of it, so a bucket's members need not be similar to each other (the
star rule alone kept recall at J >= 0.9 to 0.91 on such a corpus). Every change to
signing, candidates, verification, components, survivors or the guard must keep this
green.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from neardup import config
from neardup.commands.dedup import run
from neardup_testkit import realtext
from neardup_testkit.reference import jaccard, shingles, similar_pairs

THRESHOLD = 0.8
# The heavy tail kept, its cost bounded: the longest files (2 MB) are read up to here.
MAX_BYTES = 400_000


def test_recall_and_removal_precision_on_real_text(spark: Any, tmp_path: Path) -> None:
    texts, _ = realtext.read(realtext.collect([Path("/usr"), Path(sys.prefix)]), MAX_BYTES)
    ids = list(range(len(texts)))
    # The corpus this test stands for: thousands of files, hundreds of near-identical pairs.
    assert len(texts) >= 1000, f"only {len(texts)} files found"
    close = similar_pairs(ids, texts, 0.9)
    assert len(close) >= 500, f"only {len(close)} pairs at J >= 0.9"
    path = tmp_path / "corpus.parquet"
    pq.write_table(pa.table({"id": ids, "text": texts}), path)

    out = tmp_path / "out"
    run(spark, config.load(sets=[f"lsh.threshold={THRESHOLD}", "report.html=false"]), str(path), str(out))
    rows = pq.read_table(out / "clusters", columns=["id", "cluster_id", "status"]).to_pylist()
    assert sorted(r["id"] for r in rows) == ids
    cluster = {r["id"]: r["cluster_id"] for r in rows}

    split = sorted(pair for pair in close if cluster[pair[0]] != cluster[pair[1]])
    recall = 1 - len(split) / len(close)
    assert recall >= 0.99, f"recall at J >= 0.9 is {recall:.4f}: {len(split)} pairs split, e.g. {split[:5]}"

    removed = [r for r in rows if r["status"] in ("near_duplicate", "exact_duplicate")]
    assert removed, "nothing removed from a corpus with near-duplicates"
    sets: dict[int, frozenset[Any]] = {}

    def shingled(i: int) -> frozenset[Any]:
        if i not in sets:
            sets[i] = shingles(texts[i])
        return sets[i]

    floor = THRESHOLD - 0.1
    wrong = [r["id"] for r in removed if jaccard(shingled(r["id"]), shingled(r["cluster_id"])) < floor]
    precision = 1 - len(wrong) / len(removed)
    assert precision >= 0.99, f"removal precision {precision:.4f}: {len(wrong)}/{len(removed)}: {wrong[:5]}"
