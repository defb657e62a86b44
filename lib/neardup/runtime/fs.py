"""File operations through Hadoop's FileSystem API, so every scheme Spark can write
(file:, hdfs:, s3a:, abfss:, dbfs:) works the same for existence checks, atomic
publication (rename) and the small files (report.json, _SUCCESS) the job writes.

Two spellings of a path meet here. Hadoop's `Path(String)`, which every reader, writer and
call below takes, reads its argument literally: `/data/a b%41` is that file. Spark names
the files it read as URIs instead (`DataFrame.inputFiles()`, `input_file_name()`):
`file:///data/a%20b%2541`. Handed back to a `Path(String)` such a name is another file,
so every name Spark gives passes through `from_uri` (or `from_uri_column`) first.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import Any, NamedTuple
from urllib.parse import unquote

from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F

from neardup.errors import StorageError
from neardup.runtime.failures import storage_reason
from neardup.runtime.java import java_class
from neardup.runtime.localpaths import why_not_made


def from_uri(uri: str) -> str:
    """A file as Spark names it (a URI: `file:///a%20b%2541+c`) -> as Hadoop's Path and the
    user write it (`file:///a b%41+c`). Java's URI escapes `%` itself (as %25), so decoding
    every escape once is exact; `+` is a plus in a path (not a space, as in a query)."""
    return unquote(uri, errors="strict")


def from_uri_column(uri: Column) -> Column:
    """`from_uri` in the JVM, for a column of `input_file_name()`s. Spark's url_decode
    is Java's URLDecoder, which reads `+` as a space: a plus is escaped before it."""
    return F.url_decode(F.replace(uri, F.lit("+"), F.lit("%2B")))


@contextlib.contextmanager
def _writing(path: str) -> Iterator[None]:
    """A write the storage refuses (full, read-only, not ours) -> a StorageError naming
    `path`; any other failure as it is."""
    try:
        yield
    except StorageError:
        raise
    except Exception as e:
        reason = storage_reason(str(e))
        if reason is None:
            raise
        raise StorageError(f"cannot write {path}: {reason}") from e


class Listed(NamedTuple):
    """A file found by `FileSystem.list_files`."""

    path: str  # qualified, as the file system names it
    size: int  # bytes


class FileSystem:
    """A thin wrapper over org.apache.hadoop.fs.FileSystem for one path's scheme."""

    def __init__(self, spark: SparkSession, jfs: Any) -> None:
        self._spark = spark
        self._fs = jfs

    @classmethod
    def for_path(cls, spark: SparkSession, path: str) -> FileSystem:
        jvm: Any = spark._jvm
        jsc: Any = spark._jsc
        conf = jsc.hadoopConfiguration()
        return cls(spark, java_class(jvm, "org.apache.hadoop.fs.Path")(path).getFileSystem(conf))

    def _path(self, path: str) -> Any:
        jvm: Any = self._spark._jvm
        return java_class(jvm, "org.apache.hadoop.fs.Path")(path)

    def qualify(self, path: str) -> str:
        return str(self._fs.makeQualified(self._path(path)).toString())

    def exists(self, path: str) -> bool:
        return bool(self._fs.exists(self._path(path)))

    def is_dir(self, path: str) -> bool:
        return bool(
            self._fs.exists(self._path(path)) and self._fs.getFileStatus(self._path(path)).isDirectory()
        )

    def list_names(self, path: str) -> list[str]:
        return sorted(str(s.getPath().getName()) for s in self._fs.listStatus(self._path(path)))

    def delete(self, path: str) -> None:
        if self.exists(path):
            with _writing(path):
                self._fs.delete(self._path(path), True)

    def mkdirs(self, path: str) -> None:
        with _writing(path):
            made = self._fs.mkdirs(self._path(path))
        if not made:  # Hadoop's local file system says no more than this
            raise StorageError(f"cannot create folder {path}: {why_not_made(path)}")

    def rename(self, src: str, dst: str) -> None:
        with _writing(dst):
            moved = self._fs.rename(self._path(src), self._path(dst))
        if not moved:
            raise StorageError(f"cannot move {src} to {dst}")

    def write_bytes(self, path: str, data: bytes) -> None:
        with _writing(path):
            out = self._fs.create(self._path(path), True)
            try:
                out.write(bytearray(data))
            finally:
                out.close()  # where a full disk shows: the bytes are flushed here

    def check_writable(self, folder: str) -> None:
        """Make `folder` and write, read back and delete a small file in it: a read-only or
        full file system is a StorageError naming it before any Spark job (a run that
        would fail only when it writes, minutes later)."""
        self.mkdirs(folder)
        probe = f"{folder}/.neardup-probe-{uuid.uuid4().hex}"
        self.write_bytes(probe, b"neardup can write here\n")
        self.delete(probe)

    def read_text(self, path: str) -> str:
        """A small UTF-8 file's content (report.json)."""
        jvm: Any = self._spark._jvm
        stream = self._fs.open(self._path(path))
        try:
            return str(java_class(jvm, "org.apache.commons.io.IOUtils").toString(stream, "UTF-8"))
        finally:
            stream.close()

    def stat(self, path: str) -> tuple[str, int, int]:
        """(path, size in bytes, modification time in ms)."""
        st = self._fs.getFileStatus(self._path(path))
        return path, int(st.getLen()), int(st.getModificationTime())

    def data_size(self, path: str) -> int:
        """Bytes of the files under `path`, recursively (Hadoop's local checksum files, which
        its listings hide, left out: other schemes have none)."""
        files = self._fs.listFiles(self._path(path), True)
        total = 0
        while files.hasNext():
            total += int(files.next().getLen())
        return total

    def list_files(self, path: str) -> list[Listed]:
        """Every file under `path`, recursively, in one listing (a flat one on object stores;
        Hadoop's local checksum files hidden, as its listings do)."""
        files = self._fs.listFiles(self._path(path), True)
        out = []
        while files.hasNext():
            st = files.next()
            out.append(Listed(str(st.getPath().toString()), int(st.getLen())))
        return out

    def is_empty_dir(self, path: str) -> bool:
        """A directory with no data files (names starting with _ or . are metadata)."""
        return self.is_dir(path) and not [n for n in self.list_names(path) if not n.startswith(("_", "."))]

    # --- for leases (runtime/lease.py) ---

    def create_new(self, path: str, data: bytes) -> bool:
        """Create `path` holding `data` only if no file is there: False if one is.
        `create(path, overwrite=false)` is atomic on HDFS; on object stores a check, then
        a put."""
        try:
            out = self._fs.create(self._path(path), False)
        except Exception:
            if self.exists(path):
                return False
            raise
        try:
            out.write(bytearray(data))
        finally:
            out.close()
        return True

    def moved(self, src: str, dst: str) -> bool:
        """Rename `src` to `dst`; False where Hadoop did not (`src` gone, `dst` there)."""
        return bool(self._fs.rename(self._path(src), self._path(dst)))

    def resolved(self, path: str) -> str:
        """`path` qualified, with the links of its deepest existing ancestor resolved
        (FileSystem.resolvePath, which follows symlinks where the file system has them)."""
        jpath = self._fs.makeQualified(self._path(path))
        rest: list[str] = []
        while jpath is not None and not self._fs.exists(jpath):
            rest.append(str(jpath.getName()))
            jpath = jpath.getParent()
        if jpath is None:
            return self.qualify(path)
        base = str(self._fs.resolvePath(jpath).toString()).rstrip("/")
        return "/".join([base, *reversed(rest)])
