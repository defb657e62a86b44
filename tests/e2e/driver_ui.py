"""A running driver seen from outside: its UI's REST API (/api/v1) says which executor is
busy in a stage; waiting for a stage or a line while the driver's process lives."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())


def busy_executor(ui: int, description: str) -> str | None:
    """An executor (its id) running tasks while a job whose description starts with
    `description` runs: one the driver knows, so that killing it loses work."""
    api = f"http://127.0.0.1:{ui}/api/v1/applications"
    try:
        (app,) = get_json(api)
        jobs = get_json(f"{api}/{app['id']}/jobs?status=running")
        executors = get_json(f"{api}/{app['id']}/executors")
    except (OSError, ValueError):
        return None
    if not any((j.get("description") or "").startswith(description) for j in jobs):
        return None
    busy = [e["id"] for e in executors if e["id"] != "driver" and e["isActive"] and e["activeTasks"] > 0]
    return busy[0] if busy else None


def wait_for_busy_executor(ui: int, stage: str, driver: subprocess.Popen[bytes], log: Path) -> str:
    deadline = time.monotonic() + 600
    while (busy := busy_executor(ui, f"neardup: {stage}")) is None:
        assert driver.poll() is None, f"the driver ended before stage {stage}:\n" + log.read_text()[-3000:]
        tail = log.read_text(errors="replace")[-3000:]
        assert time.monotonic() < deadline, f"no executor was busy in stage {stage}:\n" + tail
        time.sleep(0.2)
    return busy


def wait_for(what: str, ready: Any, driver: subprocess.Popen[bytes], log: Path, every: float = 0.2) -> None:
    deadline = time.monotonic() + 600
    while not ready():
        assert driver.poll() is None, f"the driver ended before {what}:\n" + log.read_text()[-3000:]
        assert time.monotonic() < deadline, f"{what} never came:\n" + log.read_text(errors="replace")[-3000:]
        time.sleep(every)
