"""Folders neardup keeps caches and logs in, and loads code from: this user's alone, or unused.

numba loads its cache with pickle and the JVM maps a class archive as code, so whoever can
write to such a folder can run code as the user. A folder neardup names (the numba cache's
`neardup-<key>`, the fallback `<tmp>/neardup-numba-<uid>`, `~/.cache/neardup/jvm`, the log
folder `<tmp>/neardup-<user>`) is made with mode 0700 and, made now or found, used only if
it is a real directory (lstat: not a symlink), owned by this user (or root, who can replace
anything anyway) and writable by no one else (no group or other write bit). Its read bits
are not checked: reading the cache lets no one change what is loaded, and a folder an earlier
neardup made with the umask's 0755 stays usable.

Such folders live under an *anchor* neardup does not name: the temporary directory, the
user's cache directory (XDG_CACHE_HOME, ~/.cache) or a folder the user names (NUMBA_CACHE_DIR,
NEARDUP_CLASS_ARCHIVE_DIR). An anchor may be a symlink (the user's choice: a cache on another
disk); it is followed, and must be a directory of this user's or root's (the symlink too)
that others cannot write to unless it has the sticky bit, as /tmp does: otherwise someone
else could rename our folder inside it away and put theirs in its place. Its group write bit
is left to the user (a private group, the default of many systems, is only them). An anchor
that is itself the folder loaded from (NEARDUP_CLASS_ARCHIVE_DIR) gets the full check,
symlink aside. The folders above an anchor are the system's and are not looked at.

A check that fails raises `NotPrivate`; its caller does without the folder and reports it
once per process (`warn_once`, through logging: on a cluster's executor, its stderr).
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from collections.abc import Sequence
from pathlib import Path

log = logging.getLogger("neardup")

MODE = 0o700


class NotPrivate(Exception):
    """`path` is not a folder of this user's alone: `reason` says why."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


def _uid() -> int:
    return os.getuid() if hasattr(os, "getuid") else 0


def _owner_problem(st: os.stat_result) -> str | None:
    me = _uid()
    if st.st_uid not in (me, 0):
        return f"owned by uid {st.st_uid}, not by this user (uid {me})"
    return None


def _write_problem(st: os.stat_result) -> str | None:
    mode = stat.S_IMODE(st.st_mode)
    who = [w for bit, w in ((0o020, "its group"), (0o002, "others")) if mode & bit]
    return f"mode {mode:04o}: {' and '.join(who)} can write to it" if who else None


def _stat(path: Path, follow: bool) -> os.stat_result | str:
    """`path`'s lstat, or for a symlink what is wrong with it, or (`follow`) the stat of
    what it points to, the link itself being this user's or root's."""
    st = os.lstat(path)
    if not stat.S_ISLNK(st.st_mode):
        return st
    if not follow:
        return f"a symlink (to {os.readlink(path)})"
    link = _owner_problem(st)
    if link is not None:
        return f"a symlink {link}"
    try:
        return os.stat(path)
    except FileNotFoundError:
        return f"a symlink to nothing ({os.readlink(path)})"


def folder_problem(path: Path, follow: bool = False) -> str | None:
    """Why `path` is not a folder of this user's alone (None: it is). `follow`: a symlink
    the user named is followed (its own owner checked too)."""
    st = _stat(path, follow)
    if isinstance(st, str):
        return st
    if not stat.S_ISDIR(st.st_mode):
        return "not a folder"
    return _owner_problem(st) or _write_problem(st)


def file_problem(path: Path) -> str | None:
    """Why the file `path` is not this user's alone to write (None: it is): a regular file
    (not a symlink), of this user's or root's, that no one else can write to."""
    st = _stat(path, follow=False)
    if isinstance(st, str):
        return st
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    return _owner_problem(st) or _write_problem(st)


def _anchor_problem(path: Path) -> str | None:
    """Why the folder neardup's folders sit in would let someone else replace them."""
    st = _stat(path, follow=True)
    if isinstance(st, str):
        return st
    if not stat.S_ISDIR(st.st_mode):
        return "not a folder"
    owner = _owner_problem(st)
    if owner is not None:
        return owner
    if st.st_mode & 0o002 and not st.st_mode & stat.S_ISVTX:
        return f"mode {stat.S_IMODE(st.st_mode):04o}: others can write to it and it has no sticky bit"
    return None


def private_dir(anchor: Path, levels: Sequence[str] = ()) -> Path:
    """`anchor / levels...`, each folder made where missing (the levels with mode 0700) and
    checked as the module says. Raises NotPrivate for a folder that fails a check (do not
    use it, nor anything under it), OSError where one cannot be made (read-only, no room)."""
    if not os.path.lexists(anchor):
        os.makedirs(anchor, mode=MODE, exist_ok=True)  # concurrently made: checked below
    problem = folder_problem(anchor, follow=True) if not levels else _anchor_problem(anchor)
    if problem is not None:
        raise NotPrivate(anchor, problem)
    path = anchor
    for name in levels:
        path = path / name
        # 0700 (a umask only takes bits away); one found is checked as one made now is.
        with contextlib.suppress(FileExistsError):
            os.mkdir(path, MODE)
        problem = folder_problem(path)
        if problem is not None:
            raise NotPrivate(path, problem)
    return path


_warned: set[str] = set()


def warn_once(problem: NotPrivate, use: str) -> None:
    """One warning line per folder and process: the folder, what is wrong, what it was for."""
    key = str(problem.path)
    if key in _warned:
        return
    _warned.add(key)
    log.warning(
        "warning: not using %s for %s: %s; only this user may write there (remove it, or make "
        "it this user's with mode 0700)",
        problem.path,
        use,
        problem.reason,
    )
