"""Stage timing and counts: one log line per stage on the driver, and the figures
that go into report.json."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from neardup.errors import tag_stage

log = logging.getLogger("neardup")

# Fault injection for tests of resumption: the driver exits right after this stage.
FAULT_ENV = "NEARDUP_FAIL_AFTER_STAGE"
FAULT_EXIT_CODE = 86
# With this set to "raise", InjectedCrash is raised instead: the same state left behind, for
# tests that drive the command line in their own process (a Spark session shared by many).
FAULT_HOW_ENV = "NEARDUP_FAIL_HOW"


class InjectedCrash(BaseException):
    """The driver "dies" after a stage. A BaseException: no error handler of the job's
    catches it, as none runs when a driver is killed."""


class StageLog:
    def __init__(self, on_start: Callable[[str, str], None] | None = None) -> None:
        self.seconds: dict[str, float] = {}
        self.counts: dict[str, Any] = {}
        # Called with (stage, what it works on): names the stage's Spark jobs (jobgroups.py).
        self._on_start = on_start

    @contextmanager
    def stage(self, name: str, about: str = "") -> Iterator[dict[str, Any]]:
        """Time a block; counts put in the yielded dict are logged and reported. `about`
        is the stage's size as known when it starts (e.g. `3,000 documents`)."""
        found: dict[str, Any] = {}
        if self._on_start is not None:
            self._on_start(name, about)
        start = time.perf_counter()
        try:
            yield found
        except BaseException as e:
            tag_stage(e, name)  # the error message names the stage that failed
            raise
        secs = time.perf_counter() - start
        self.seconds[name] = round(secs, 3)
        self.counts.update(found)
        shown = ", ".join(f"{k}={v:,}" if isinstance(v, int) else f"{k}={v}" for k, v in found.items())
        log.info("stage %-10s %7.1f s  %s", name, secs, shown)
        if os.environ.get(FAULT_ENV) == name:
            if os.environ.get(FAULT_HOW_ENV) == "raise":
                raise InjectedCrash(name)
            # Test hook: die like a killed driver (no cleanup, no exception handlers).
            log.error("stopping the driver after stage %s (%s is set)", name, FAULT_ENV)
            logging.shutdown()
            os._exit(FAULT_EXIT_CODE)
