"""Stage timing and counts: one log line per stage on the driver, and the figures
that go into report.json."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

log = logging.getLogger("neardup")


class StageLog:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.counts: dict[str, Any] = {}

    @contextmanager
    def stage(self, name: str) -> Iterator[dict[str, Any]]:
        """Time a block; counts put in the yielded dict are logged and reported."""
        found: dict[str, Any] = {}
        start = time.perf_counter()
        yield found
        secs = time.perf_counter() - start
        self.seconds[name] = round(secs, 3)
        self.counts.update(found)
        shown = ", ".join(f"{k}={v:,}" if isinstance(v, int) else f"{k}={v}" for k, v in found.items())
        log.info("stage %-10s %7.1f s  %s", name, secs, shown)
