"""Where a JVM that neardup launches writes its log: a directory of the user's own under
the temporary directory, with old logs cleared; anything else there is refused."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from neardup.runtime.session import LOG_DAYS, log_dir


def test_a_private_directory_with_old_logs_deleted(tmp_path: Path) -> None:
    """Only old logs named as the JVM's launch names them (spark-<date>-<time>-<mkstemp's 8
    characters>.log) are deleted: another file, even one named spark-*.log, or a link named
    as a log, is not neardup's."""
    folder = log_dir(tmp_path)
    assert folder is not None and folder.parent == tmp_path and folder.name.startswith("neardup-")
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    old, fresh = folder / "spark-20260101-000000-ab_cd123.log", folder / "spark-20260102-000000-x1y2z3w4.log"
    others = [
        folder / "notes.txt",
        folder / "spark-old.log",
        folder / "spark-20260101-000000-ab_cd123.log.gz",
    ]
    outside = tmp_path / "kept.log"
    for f in (old, fresh, *others, outside):
        f.write_text("x")
    link = folder / "spark-20260101-000000-linklink.log"
    link.symlink_to(outside)
    week = time.time() - LOG_DAYS * 86400
    for f in (old, *others, outside):
        os.utime(f, (week - 60, week - 60))
    os.utime(link, (week - 60, week - 60), follow_symlinks=False)
    os.utime(fresh, (week + 60, week + 60))
    assert log_dir(tmp_path) == folder
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        [fresh.name, link.name, *(f.name for f in others)]
    )
    assert outside.read_text() == "x"


def test_a_directory_others_can_write_or_a_link_is_refused(tmp_path: Path) -> None:
    folder = log_dir(tmp_path)
    assert folder is not None
    folder.chmod(0o777)
    assert log_dir(tmp_path) is None
    folder.rmdir()
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    folder.symlink_to(target)
    assert log_dir(tmp_path) is None


@pytest.mark.skipif(os.getuid() != 0, reason="only root can give a directory to another user")
def test_a_directory_of_another_user_is_refused(tmp_path: Path) -> None:
    folder = log_dir(tmp_path)
    assert folder is not None
    os.chown(folder, 12345, -1)
    assert log_dir(tmp_path) is None
