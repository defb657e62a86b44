"""What a run may replace or delete, and where its paths really are.

- Every check that one path is inside another (the input inside the output, the output
  inside the input, a reference or an index and the output) compares resolved paths: on a
  local file system (`file:` or a scheme-less path whose default file system is local),
  Hadoop's qualified path (relative paths against the JVM's working directory, `..`
  removed as Hadoop reads it) then the OS's `realpath` (symlinks); on other file systems
  the qualified path with FileSystem.resolvePath applied to its deepest existing ancestor.
  Both directions and equality are refused.
- `--overwrite` replaces only a neardup output: a folder holding a report.json of neardup's
  (with its `command` and `neardup_version`, which every run publishes), or an empty one.
  `_SUCCESS` alone does not count: any Spark job writes one. A file, or a folder of
  anything else, is refused and left as it is.
- The staging folder `<output>.neardup-staging` is cleared only if it is ours: it holds the
  marker `_neardup-staging` neardup writes when it makes it (or, between the marker's
  removal and publication, a report.json of neardup's), or is empty.
- An index is replaced or appended to only if it is one: a folder with `_manifest/`, or one
  holding nothing but what an index holds (`segments/`, its lease), or empty.
- The lease (runtime/lease.py) of an output is the file `<output>.neardup-lock` beside it
  (the output folder itself is replaced by a rename when a run publishes); an index's is
  `_neardup-lock` inside the index folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Iterable, Iterator, Sequence

from pyspark.sql import SparkSession

from neardup.errors import StorageError, UsageError
from neardup.runtime.fs import FileSystem
from neardup.runtime.lease import HadoopFiles, Lease, LeaseFiles, LocalFiles, held

STAGING_SUFFIX = ".neardup-staging"
STAGING_MARKER = "_neardup-staging"
LEASE_SUFFIX = ".neardup-lock"
INDEX_LEASE = "_neardup-lock"
REPORT = "report.json"
# What an index folder holds (runtime/indexstore.py's layout), besides its lease.
_INDEX_NAMES = ("_manifest", "segments")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


# --- resolving paths ------------------------------------------------------------------------


def local_part(qualified: str) -> str | None:
    """The OS path of a qualified local path (`file:/a`, `file:///a`, `file://localhost/a`),
    None for any other scheme."""
    if not qualified.startswith("file:"):
        return None
    rest = qualified[len("file:") :]
    if rest.startswith("//"):
        authority, _, path = rest[2:].partition("/")
        if authority not in ("", "localhost"):
            return None
        rest = "/" + path
    return rest


def resolve_local(path: str) -> str:
    """An absolute OS path with its symlinks resolved; the part that does not exist yet is
    appended as written (`realpath` without strict does both)."""
    return os.path.realpath(path)


def resolve(spark: SparkSession, path: str) -> str:
    """`path` as the file system will reach it: qualified, links resolved (module doc)."""
    fs = FileSystem.for_path(spark, path)
    qualified = fs.qualify(path.rstrip("/") or "/")
    local = local_part(qualified)
    if local is not None:
        return "file:" + resolve_local(local)
    try:
        return fs.resolved(qualified).rstrip("/")
    except Exception:  # a file system without links, or one that cannot say: as qualified
        return qualified


def inside(path: str, folder: str) -> bool:
    """`path` is `folder` or under it (both resolved)."""
    folder = folder.rstrip("/")
    return path.rstrip("/") == folder or path.startswith(folder + "/")


def _as_shown(shown: str, resolved: str) -> str:
    """The user's path, with where it resolves to when that is not what it says."""
    plain = local_part(resolved) or resolved
    return shown if shown.rstrip("/") in (plain, resolved) else f"{shown} (resolved: {plain})"


def overlap(name: str, shown: str, path: str, out_shown: str, out: str) -> str | None:
    """Why the output cannot be written where it is with `name` (the input, a reference,
    an index) at `path`, or None. Both paths resolved."""
    staging = out + STAGING_SUFFIX
    them, output = _as_shown(shown, path), _as_shown(out_shown, out)
    if path.rstrip("/") == out.rstrip("/"):
        return f"output {output} and {name} {them} are the same path; choose another output path"
    if inside(path, out):
        return f"{name} {them} is inside output {output}; --overwrite would delete it"
    if inside(out, path):
        return f"output {output} is inside {name} {them}; choose another output path"
    if inside(path, staging):
        return (
            f"{name} {them} is inside the output's staging folder {local_part(staging) or staging}, "
            "which a run clears; choose another output path"
        )
    if inside(staging, path):
        return (
            f"the output's staging folder {local_part(staging) or staging} would be inside {name} "
            f"{them}; choose another output path"
        )
    return None


def check_apart(spark: SparkSession, out_shown: str, out: str, others: Iterable[tuple[str, str]]) -> None:
    """Refuse (UsageError) an output that overlaps any of `others`: (name, path as given)."""
    for name, shown in others:
        why = overlap(name, shown, resolve(spark, shown), out_shown, out)
        if why is not None:
            raise UsageError(why)


# --- what is ours -----------------------------------------------------------------------------


def is_neardup_report(data: bytes | str) -> bool:
    """A report.json a neardup run wrote: a JSON object with `command` and `neardup_version`."""
    try:
        d = json.loads(data)
    except ValueError:
        return False
    return isinstance(d, dict) and all(isinstance(d.get(k), str) for k in ("command", "neardup_version"))


def output_refusal(
    shown: str, kind: str, names: Sequence[str], report: bytes | None, overwrite: bool
) -> str | None:
    """Why an existing output path may not be replaced, or None. `kind`: "missing", "file"
    or "dir"; `names`: a folder's entries; `report`: its report.json's content, if any."""
    if kind == "missing":
        return None
    if kind == "file":
        return f"output {shown} is a file; --output names a folder, which neardup makes: choose another path"
    ours = not names or (REPORT in names and report is not None and is_neardup_report(report))
    if not ours:
        return (
            f"output {shown} exists and is not a neardup output (no report.json of neardup's, not "
            "empty); neardup replaces only its own outputs: choose another path, or move it away"
        )
    if not overwrite:
        return f"output {shown} already exists; pass --overwrite to replace it"
    return None


def staging_refusal(staging: str, kind: str, names: Sequence[str], report: bytes | None) -> str | None:
    """Why a staging folder may not be cleared, or None (see the module's doc)."""
    if kind == "missing":
        return None
    ours = kind == "dir" and (
        not names or STAGING_MARKER in names or (report is not None and is_neardup_report(report))
    )
    if ours:
        return None
    what = "a file" if kind == "file" else f"a folder without neardup's marker {STAGING_MARKER}"
    return (
        f"{staging} is {what}, not a staging folder of neardup's, and a run would clear it; "
        "move it away, or choose another output path"
    )


def index_refusal(shown: str, kind: str, names: Sequence[str]) -> str | None:
    """Why `index build` may not write into an existing path, or None (module's doc)."""
    if kind == "missing":
        return None
    if kind == "file":
        return f"index {shown} is a file; --index names a folder, which neardup makes: choose another path"
    if "_manifest" in names or all(n in _INDEX_NAMES or n.startswith(INDEX_LEASE) for n in names):
        return None
    return (
        f"index {shown} exists and is not a neardup index (no _manifest/, not empty); neardup "
        "writes only into its own indexes: choose another path, or move it away"
    )


def _kind(fs: FileSystem, path: str) -> str:
    if not fs.exists(path):
        return "missing"
    return "dir" if fs.is_dir(path) else "file"


def _report_of(fs: FileSystem, folder: str, names: Sequence[str]) -> bytes | None:
    if REPORT not in names:
        return None
    try:
        return fs.read_text(f"{folder}/{REPORT}").encode("utf-8")
    except Exception:  # unreadable: not a report of ours
        return None


def check_output(fs: FileSystem, out: str, shown: str, overwrite: bool) -> None:
    """Refuse (UsageError) an output path that is not ours to replace, and its staging
    folder if it is not ours to clear. Nothing is touched."""
    kind = _kind(fs, out)
    names = fs.list_names(out) if kind == "dir" else []
    why = output_refusal(shown, kind, names, _report_of(fs, out, names), overwrite)
    if why is None:
        staging = out + STAGING_SUFFIX
        kind = _kind(fs, staging)
        names = fs.list_names(staging) if kind == "dir" else []
        why = staging_refusal(local_part(staging) or staging, kind, names, _report_of(fs, staging, names))
    if why is not None:
        raise UsageError(why)


def check_index(fs: FileSystem, path: str, shown: str) -> None:
    """Refuse (UsageError) an index path that holds something else than an index."""
    kind = _kind(fs, path)
    why = index_refusal(shown, kind, fs.list_names(path) if kind == "dir" else [])
    if why is not None:
        raise UsageError(why)


# --- leases -----------------------------------------------------------------------------------


def lease_files(fs: FileSystem, path: str) -> tuple[LeaseFiles, str]:
    """The file operations for a lease at `path` (resolved) and the path they take: the OS's
    for a local path (O_EXCL), Hadoop's otherwise."""
    local = local_part(path)
    if local is not None:
        return LocalFiles(), local
    return HadoopFiles(fs), path


@contextlib.contextmanager
def output_lease(fs: FileSystem, out: str, shown: str) -> Iterator[Lease]:
    """The lease on the output `out` (resolved), held for the block: `<output>.neardup-lock`."""
    files, where = lease_files(fs, out + LEASE_SUFFIX)
    _parent_made(fs, out + LEASE_SUFFIX, where)
    with held(files, where, f"output {shown}") as lease:
        yield lease


@contextlib.contextmanager
def index_lease(fs: FileSystem, path: str, shown: str) -> Iterator[Lease]:
    """The lease on the index at `path` (resolved), held for the block: `_neardup-lock` in it."""
    files, where = lease_files(fs, f"{path}/{INDEX_LEASE}")
    _parent_made(fs, f"{path}/{INDEX_LEASE}", where)
    with held(files, where, f"index {shown}") as lease:
        yield lease


def _parent_made(fs: FileSystem, lease: str, where: str) -> None:
    """The folder the lease file goes in, made if missing (the run would make it anyway).
    `lease`: its resolved path; `where`: the path its file operations take."""
    if local_part(lease) is not None:
        try:
            os.makedirs(os.path.dirname(where), exist_ok=True)
        except OSError as e:
            why = (e.strerror or str(e)).lower()
            raise StorageError(f"cannot make the folder {os.path.dirname(where)}: {why}") from e
    else:
        fs.mkdirs(lease.rsplit("/", 1)[0])
