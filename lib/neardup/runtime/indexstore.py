"""The persistent index on disk: its layout, its manifest, and atomic commits.

    <index>/
      _manifest/v00000001.json, v00000002.json, ...   one per committed version, never rewritten
      segments/v00000002-<uuid>/                      one per `index build` / `index add`
        keys/band=<b>/part-*.parquet                  (_band_key: long, _n: long), sorted by _n
        docs/part-*.parquet                           (_n: long, _id: the id type)
        signatures/part-*.parquet                     (_n, _sig), only if built for signature verification

Readers read the highest `vNNNNNNNN.json` and only the segments it lists. A writer writes a
new segment under a fresh directory (named after the version it will commit, so nothing
lists it yet), then commits by writing the next manifest to a temporary name and renaming
it to `vNNNNNNNN.json`: one rename, atomic on HDFS and local file systems, a single object
put on object stores. A crash before the rename leaves the index exactly as it was (an
unlisted segment, which the next writer deletes); after it, the new version is complete.
One writer at a time: a second one that reaches the same version is refused at commit.

The manifest records what band keys depend on (the signing parameters under their config
keys, and the band keys of two probe texts, so a neardup whose hashing differs is noticed
even when every parameter matches), the id type, and per segment its own data files (each
one's path in the segment, size and row count, from its Parquet footer: what a listing is
compared with before the index is used, runtime/indexfiles.py) and where its texts are: the
input path, format, columns and every file's name, size and modification time. Exact
verification against the index reads candidates' texts from there (docs/design.md says what
is read). Manifests of format 1 list no segment files (`Segment.files` is None).
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession

from neardup import __version__
from neardup import columns as C
from neardup.errors import IndexDamagedError, IndexRefusedError, NeardupError, UsageError
from neardup.kernels.signatures import SignParams, band_keys_of, sign_batch
from neardup.runtime.failures import java_cause
from neardup.runtime.fs import FileSystem

FORMAT = "neardup-index"
FORMAT_VERSION = 2  # 2: segments list their files; 1 (read, never written): they do not
READABLE_VERSIONS = (1, 2)
MANIFESTS = "_manifest"
SEGMENTS = "segments"
KEYS, DOCS, SIGNATURES = "keys", "docs", "signatures"
_MANIFEST_NAME = re.compile(r"v(\d{8})\.json")
_SEGMENT_NAME = re.compile(r"v(\d{8})-[0-9a-f]{32}")

# What band keys depend on: SignParams' fields under their config keys, in the order a
# difference is reported.
PARAM_KEYS = {
    "lowercase": "normalize.lowercase",
    "strip_punctuation": "normalize.strip_punctuation",
    "unit": "shingle.unit",
    "ngram": "shingle.ngram",
    "char_ngram": "shingle.char_ngram",
    "method": "minhash.method",
    "num_perm": "minhash.num_perm",
    "seed": "minhash.seed",
    "bands": "lsh.bands",
    "rows": "lsh.rows",
}
# Signed with the index's parameters when it is made and again when it is used: equal
# parameters with other band keys mean another neardup's hashing. One text long enough for
# word shingles, with what normalization folds (full-width letters, a ligature, accents,
# case, a dash, runs of spaces); one short enough for character shingles.
PROBES = (
    "Ｔｈｅ  quick brown fox — jumps over the lazy dog: naïve café, ÉTÉ 2024, ﬁne print!",
    "tiny text",
)


def index_params(p: SignParams) -> dict[str, Any]:
    """The signing parameters under their config keys (as the manifest records them)."""
    values = asdict(p)
    return {key: values[name] for name, key in PARAM_KEYS.items()}


def probe_keys(p: SignParams) -> list[list[int]]:
    """The band keys of PROBES under `p`, computed by the job's own signing kernel."""
    n = len(PROBES)
    batch = pa.RecordBatch.from_arrays(
        [pa.array(range(n), pa.int64()), pa.array(PROBES, pa.string()), pa.nulls(n, pa.int64())],
        names=[C.DOC_ID, C.TEXT, C.RANK],
    )
    rows, keys = band_keys_of(sign_batch(batch, p, False).column(C.BAND_KEYS))
    assert len(rows) == n  # every probe has text to sign
    out: list[list[int]] = keys.tolist()
    return out


@dataclass(frozen=True)
class Texts:
    """Where a segment's documents' texts are: what exact verification reads back."""

    path: str  # the input as given to `index build`/`index add`, qualified
    format: str  # parquet | jsonl | csv
    id_col: str
    text_col: str
    files: tuple[tuple[str, int, int], ...]  # (file, size in bytes, modification time in ms)
    csv_header: bool = True


@dataclass(frozen=True)
class IndexFile:
    """One data file of a segment, as recorded when it was written."""

    path: str  # under the segment's directory: keys/band=0/part-....parquet
    size: int  # bytes
    rows: int  # from its Parquet footer

    @property
    def part(self) -> str:
        """keys, docs or signatures."""
        return self.path.split("/", 1)[0]


@dataclass(frozen=True)
class Segment:
    name: str  # directory under segments/
    documents: int  # indexed documents (input rows with a signature)
    input_rows: int  # rows of the input it was made from (the rest had no text to sign)
    texts: Texts
    # Every data file of keys/, docs/ and signatures/; None in a manifest of format 1.
    files: tuple[IndexFile, ...] | None = None


@dataclass(frozen=True)
class Manifest:
    version: int
    build_id: str  # new for each `index build` (with --overwrite too); part of dedup's fingerprints
    params: Mapping[str, Any]  # config key -> value (PARAM_KEYS)
    probe: list[list[int]]
    id_type: str  # Spark's simpleString of the id column's type
    signatures: bool  # segments hold signatures (verify.method signature)
    segments: tuple[Segment, ...]
    created: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%S%z"))
    neardup_version: str = __version__

    @property
    def documents(self) -> int:
        return sum(s.documents for s in self.segments)

    def digest(self, path: str) -> dict[str, Any]:
        """What a dedup run's fingerprints hold of the index (a rebuilt index at the same
        path has another build_id)."""
        return {"path": path, "build_id": self.build_id, "version": self.version}

    def to_json(self) -> str:
        d = asdict(self)
        return json.dumps({"format": FORMAT, "format_version": FORMAT_VERSION, **d}, indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str, where: str) -> Manifest:
        try:
            d = json.loads(text)
            if d.get("format") != FORMAT:
                raise IndexRefusedError(f"{where} is not a neardup index manifest")
            if d.get("format_version") not in READABLE_VERSIONS:
                raise IndexRefusedError(
                    f"{where} has index format version {d.get('format_version')}; this neardup "
                    f"{__version__} reads versions {', '.join(map(str, READABLE_VERSIONS))}: "
                    "rebuild the index"
                )
            segments = tuple(
                Segment(
                    s["name"],
                    int(s["documents"]),
                    int(s["input_rows"]),
                    Texts(**{**s["texts"], "files": tuple(tuple(f) for f in s["texts"]["files"])}),
                    None
                    if s.get("files") is None
                    else tuple(IndexFile(str(f["path"]), int(f["size"]), int(f["rows"])) for f in s["files"]),
                )
                for s in d["segments"]
            )
            return cls(
                version=int(d["version"]),
                build_id=str(d["build_id"]),
                params=dict(d["params"]),
                probe=[[int(k) for k in keys] for keys in d["probe"]],
                id_type=str(d["id_type"]),
                signatures=bool(d["signatures"]),
                segments=segments,
                created=str(d["created"]),
                neardup_version=str(d["neardup_version"]),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise IndexRefusedError(f"{where} is not a valid index manifest ({type(e).__name__}: {e})") from e


def check_compatible(manifest: Manifest, p: SignParams, path: str) -> None:
    """Refuse (one line, naming the first parameter that differs) an index whose band keys
    were made otherwise than this run's would be."""
    ours = index_params(p)
    for key, value in ours.items():
        theirs = manifest.params.get(key)
        if theirs != value:
            raise IndexRefusedError(
                f"index {path} was built with {key}={_shown(theirs)}, this run has {key}={_shown(value)}"
            )
    if manifest.probe != probe_keys(p):
        raise IndexRefusedError(
            f"index {path} was built by neardup {manifest.neardup_version}, whose hashing gives other "
            f"band keys than this neardup {__version__} with the same parameters; rebuild the index"
        )


def check_id_type(manifest: Manifest, id_type: str, path: str, what: str) -> None:
    if manifest.id_type != id_type:
        raise IndexRefusedError(
            f"index {path} holds ids of type {manifest.id_type}, {what}'s id column is {id_type}"
        )


def _shown(v: Any) -> str:
    return json.dumps(v) if isinstance(v, bool) or v is None else str(v)


class IndexStore:
    """One index directory on any file system Spark reaches."""

    def __init__(self, spark: SparkSession, path: str) -> None:
        self.fs = FileSystem.for_path(spark, path)
        self.path = self.fs.qualify(path.rstrip("/"))
        self.shown = path  # as the user wrote it, for messages

    def _manifests(self) -> str:
        return f"{self.path}/{MANIFESTS}"

    def segment_dir(self, name: str) -> str:
        return f"{self.path}/{SEGMENTS}/{name}"

    def versions(self) -> list[int]:
        if not self.fs.is_dir(self._manifests()):
            return []
        return sorted(
            int(m.group(1))
            for n in self.fs.list_names(self._manifests())
            if (m := _MANIFEST_NAME.fullmatch(n))
        )

    def current(self) -> Manifest | None:
        """The latest committed version, or None when there is no index here."""
        versions = self.versions()
        if not versions:
            return None
        name = f"{self._manifests()}/v{versions[-1]:08d}.json"
        try:
            text = self.fs.read_text(name)
        except Exception as e:  # Py4J's error: a checksum error, a read that failed
            raise IndexDamagedError(
                f"index {self.shown} is damaged: its manifest {name} cannot be read ({java_cause(e)[:200]})"
            ) from e
        return Manifest.from_json(text, f"index {self.shown} ({name})")

    def require(self) -> Manifest:
        found = self.current()
        if found is None:
            raise UsageError(f"there is no index at {self.shown} (neardup index build makes one)")
        return found

    @staticmethod
    def new_segment(version: int) -> str:
        """A fresh segment name for the version about to be committed."""
        return f"v{version:08d}-{uuid.uuid4().hex}"

    def commit(self, manifest: Manifest) -> None:
        """Make `manifest` the current version: its content goes to a temporary file, then
        one rename publishes it. Refused if another writer committed that version first."""
        final = f"{self._manifests()}/v{manifest.version:08d}.json"
        tmp = f"{self._manifests()}/_tmp-v{manifest.version:08d}-{uuid.uuid4().hex}.json"
        self.fs.write_bytes(tmp, manifest.to_json().encode("utf-8"))
        if self.fs.exists(final):
            self.fs.delete(tmp)
            raise NeardupError(
                f"index {self.shown}: another writer committed version {manifest.version} meanwhile; "
                "nothing of this run was added: run it again"
            )
        self.fs.rename(tmp, final)

    def discard(self, name: str) -> bool:
        """Delete the segment `name` that this writer wrote and failed to commit (its write
        or its commit failed, or another writer committed that version first), unless the
        current version lists it after all; whether it was deleted. Only a name of neardup's
        own pattern is ever deleted."""
        try:
            current = self.current()
        except NeardupError:  # a manifest not ours to read: delete nothing
            return False
        if not _SEGMENT_NAME.fullmatch(name) or (
            current is not None and name in {s.name for s in current.segments}
        ):
            return False
        where = self.segment_dir(name)
        if not self.fs.exists(where):
            return False
        self.fs.delete(where)
        return True

    def collect_garbage(self, manifest: Manifest) -> list[str]:
        """Delete what no committed version will ever list: segments and temporary
        manifests of versions up to the current one that it does not list (left by crashed
        or replaced writers). A writer still working on the next version is left alone."""
        gone = []
        listed = {s.name for s in manifest.segments}
        seg_root = f"{self.path}/{SEGMENTS}"
        for root, pattern in (
            (seg_root, _SEGMENT_NAME),
            (self._manifests(), re.compile(r"_tmp-v(\d{8})-.*")),
        ):
            if not self.fs.is_dir(root):
                continue
            for name in self.fs.list_names(root):
                m = pattern.fullmatch(name)
                if m and int(m.group(1)) <= manifest.version and name not in listed:
                    self.fs.delete(f"{root}/{name}")
                    gone.append(name)
        return gone

    def sizes(self, manifest: Manifest) -> dict[str, int]:
        """Bytes on disk of the current version's band keys, document numbers and ids, and
        signatures (Parquet files; the manifest is a few KB)."""
        out = {KEYS: 0, DOCS: 0, SIGNATURES: 0}
        for seg in manifest.segments:
            for part in out:
                where = f"{self.segment_dir(seg.name)}/{part}"
                if self.fs.exists(where):
                    out[part] += self.fs.data_size(where)
        return out
