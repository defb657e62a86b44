"""File operations through Hadoop's FileSystem API, so every scheme Spark can write
(file:, hdfs:, s3a:, abfss:, dbfs:) works the same for existence checks, atomic
publication (rename) and the small files (report.json, _SUCCESS) the job writes.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from pyspark.sql import SparkSession

from neardup.runtime.java import java_class


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
            self._fs.delete(self._path(path), True)

    def mkdirs(self, path: str) -> None:
        self._fs.mkdirs(self._path(path))

    def rename(self, src: str, dst: str) -> None:
        if not self._fs.rename(self._path(src), self._path(dst)):
            raise OSError(f"could not move {src} to {dst}")

    def write_bytes(self, path: str, data: bytes) -> None:
        out = self._fs.create(self._path(path), True)
        try:
            out.write(bytearray(data))
        finally:
            out.close()

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
