"""The Python daemon of a local session neardup launches (runtime/pydaemon.py) and its workers
import nothing from the folder the run was started in: Spark starts the daemon with
`python -m`, which would put that folder first on the path (a `neardup/` or `numpy/` someone
left there would run as the user)."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from neardup.runtime import pydaemon


@pytest.mark.skipif(sys.version_info < (3, 11), reason="PYTHONSAFEPATH is Python 3.11's")
def test_the_workers_path_leaves_out_the_working_directory(spark: Any) -> None:
    def paths(batches: Any) -> Any:
        import json
        import os
        import sys

        import pyarrow as pa

        with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
            parent = f.read().split(b"\0")[2].decode()
        seen = json.dumps([sys.flags.safe_path, os.getcwd(), sys.path, parent])
        for batch in batches:
            yield pa.record_batch({"seen": [seen] * len(batch)})

    import json
    import os

    (row,) = {r["seen"] for r in spark.range(2, numPartitions=2).mapInArrow(paths, "seen string").collect()}
    safe, cwd, path, parent = json.loads(row)
    assert parent == pydaemon.MODULE and safe is True
    assert cwd == os.getcwd() and cwd not in path and "" not in path
