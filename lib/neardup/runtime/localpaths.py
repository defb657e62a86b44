"""Local paths as Hadoop names them (`/a`, `file:/a`, `file:///a`), and why the operating
system refused to make a folder: no Spark here (runtime/failures.py reads them too)."""

from __future__ import annotations

import os
from pathlib import Path


def local_file(path: str) -> str | None:
    """The operating system's path of a local file named as Hadoop does (`/a`, `file:/a`,
    `file:///a`), or None for another scheme."""
    # Not urlsplit: a `?` or `#` in a path is part of the name.
    if path.startswith("/"):
        return path
    if not path.startswith("file:"):
        return None
    rest = path.removeprefix("file:")
    if not rest.startswith("//"):
        return rest
    host, _, tail = rest[2:].partition("/")
    return "/" + tail if host in ("", "localhost") else None


def why_not_made(path: str) -> str:
    """Why a folder could not be made, as far as the operating system tells without writing
    (Hadoop's local file system says only "Mkdirs failed"): for a local path, the nearest
    existing folder above it is on a read-only file system, or not writable, or a file."""
    local = local_file(path)
    if local is not None:
        above = Path(local)
        while not above.exists() and above != above.parent:
            above = above.parent
        if not above.is_dir():
            return f"{above} is a file"
        if os.statvfs(above).f_flag & os.ST_RDONLY:
            return "read-only file system"
        if not os.access(above, os.W_OK):
            return f"permission denied ({above})"
    return "read-only, not writable, or a file is in the way"
