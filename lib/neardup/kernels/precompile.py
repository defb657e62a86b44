"""Compile every kernel ahead of use, into the folder the wheel ships (numba_cache.py).

    python -m neardup.kernels.precompile OUT [--targets x86-64-v4,x86-64-v3,generic]
                                         [--if-stale] [--reuse DIR]

For each CPU target, a process of its own (numba's target is fixed per process) runs
`exercise()` with an empty cache directory and `NEARDUP_NUMBA_CPU` set to the target; the
cache files of all targets go into OUT (one index per kernel, holding every target's
entries), with ``manifest.json``: the cache key they were compiled under (the sources'
digest and the versions of what compiled code depends on), the targets and the files. OUT
is replaced whole (with --if-stale, only when OUT's manifest names another key or targets;
with --reuse DIR, by a copy of DIR where DIR holds this key's code for the targets).
The build (setup.py) runs it on the package's built copy, so the key is that of the files
installed; spark-submit.sh runs it for the zip it ships (scripts/build_zip.py --compiled).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pyarrow as pa

from neardup.kernels.numba_cache import CPU_ENV, ENV, LEVELS, MANIFEST, SHIPPED_ENV, X86_64, runs_here

# The psABI levels of x86-64, best first: a host runs the best one its CPU has. OPH signing
# (the default) runs as fast on any of them as on the host's own CPU; classic signing needs
# wide vectors (docs/performance.md, "Compiled code shipped with the wheel").
X86_TARGETS = ("x86-64-v4", "x86-64-v3", "generic")


def default_targets() -> tuple[str, ...]:
    """The levels of X86_TARGETS this machine's CPU runs (on another architecture, generic).
    Precompiling runs the code it compiles (`exercise`), so a level the building CPU lacks
    cannot be built on it: a machine without AVX-512 builds x86-64-v3 and generic, and a host
    with AVX-512 that installs its wheel runs the v3 code (as fast for OPH signing)."""
    if platform.machine().lower() not in X86_64:
        return ("generic",)
    return tuple(t for t in X86_TARGETS if runs_here(t))


def exercise() -> int:
    """Call every kernel the way the job's stages do (Arrow string and large_string input,
    read-only buffers as from Spark's batches, both shingle units and MinHash methods,
    signatures kept or not, exact verification, decontamination with its reference as the
    workers read it, tune's measuring): each numba specialization the job uses gets
    compiled. Returns a row count, so nothing is optimized away."""
    from neardup import columns as C
    from neardup.kernels.contamination import (
        DeconParams,
        build_reference,
        decontaminate_batch,
        reference_bytes,
        reference_from_bytes,
    )
    from neardup.kernels.hashing import shingle_hashes, text_hash128
    from neardup.kernels.measure import measure_pairs, sample_keys
    from neardup.kernels.scoring import score_groups
    from neardup.kernels.signatures import SignParams, sign_batch
    from neardup.kernels.similarity import jaccard_between, jaccard_of_pairs

    words = "the quick brown fox jumps over the lazy dog and runs far away from the farm"
    texts = [
        words,
        words.replace("lazy", "sleepy"),
        "  Ünïcödé\u00a0text\u3000with   wide spaces and\tTABS, and punctuation!  ",
        "short",
        "",
        None,
    ]
    n = 0
    # All-ASCII batches take normalization's fast path, on the input's own buffers.
    ascii_only = [t if t is None else t.encode("ascii", "replace").decode() for t in texts]
    kinds = (pa.string(), pa.large_string())
    for rows, kind, spark in itertools.product((texts, ascii_only), kinds, (False, True)):
        ids = pa.array(range(1, len(rows) + 1), pa.int64())
        batch = pa.record_batch({C.DOC_ID: ids, C.TEXT: pa.array(rows, kind)})
        if spark:  # read from an Arrow stream, as Spark hands batches over: read-only buffers
            batch = _from_stream(batch)
        arr = batch.column(C.TEXT)
        for unit in ("word", "char"):
            for method in ("oph", "classic"):
                for lowercase, strip in ((True, False), (False, True)):
                    p = SignParams(lowercase, strip, unit, 5, 5, 128, 1, method, 16, 8)
                    for keep in (False, True):
                        n += len(sign_batch(batch, p, keep))
                    n += len(sample_keys(batch, p))
                    group = pa.record_batch(
                        {C.GROUP: pa.array([1] * len(rows), pa.int64()), C.DOC_ID: ids, C.TEXT: arr}
                    )
                    n += sum(len(b) for b in score_groups([group], p, 0.0))
            offsets, hashes = shingle_hashes(arr.fill_null(""), unit, 3, 5, 7)
            n += len(jaccard_of_pairs(offsets, hashes, offsets[:-1] * 0, offsets[:-1] * 0))
            idx = pa.array([0, 1]).to_numpy()
            n += len(jaccard_between(offsets, hashes, offsets, hashes, idx, idx))
        n += len(text_hash128(arr))
        sign = SignParams(True, False, "word", 5, 5, 128, 1, "oph", 16, 8)
        for ngram, threshold, verify in ((3, 0.5, "exact"), (3, 0.5, "signature"), (0, 0.5, "exact")):
            params = DeconParams(sign, ngram=ngram, threshold=threshold, verify=verify)
            ref = reference_from_bytes(reference_bytes(build_reference(arr, params)))
            n += len(decontaminate_batch(batch, ref, params))
        n += len(measure_pairs(pa.chunked_array([arr, arr]), sign).left)
    return n


def _from_stream(batch: pa.RecordBatch) -> pa.RecordBatch:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return pa.ipc.open_stream(sink.getvalue()).read_next_batch()


def _compile(target: str, lib: Path, cache: Path) -> str:
    """Run `exercise()` for `target` in a process of its own; its cache key."""
    env = {
        **os.environ,
        CPU_ENV: target,
        ENV: str(cache),
        SHIPPED_ENV: "0",
        "PYTHONPATH": os.pathsep.join([str(lib), *filter(None, [os.environ.get("PYTHONPATH")])]),
    }
    env.pop("NUMBA_CPU_NAME", None)
    env.pop("NUMBA_CPU_FEATURES", None)
    code = (
        "from neardup.kernels import numba_cache, precompile\n"
        "precompile.exercise()\n"
        "done = numba_cache.install()\n"
        f"assert done['target'] == {target!r}, done\n"
        "print(numba_cache.cache_key())\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=900, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(f"precompiling for {target} failed:\n{proc.stderr[-4000:]}")
    return proc.stdout.split()[-1]


def build(out: Path, targets: tuple[str, ...] | None = None, lib: Path | None = None) -> dict[str, object]:
    """Compile the kernels of the package under `lib` (default: this one's) for `targets`
    into `out`; returns the manifest written there."""
    from neardup.kernels import numba_cache

    targets = targets or default_targets()
    lacking = [t for t in targets if t in LEVELS and not runs_here(t)]
    if lacking:
        # Its process would die of an illegal instruction, with nothing on stderr.
        raise RuntimeError(
            f"cannot precompile for {', '.join(lacking)} on this machine: its CPU lacks what they "
            "need, and precompiling runs the code it compiles (name only targets it runs, "
            f"as the default does: {','.join(default_targets())})"
        )
    lib = lib or Path(__file__).resolve().parents[2]
    with tempfile.TemporaryDirectory(prefix="neardup-precompile-") as tmp:
        cache = Path(tmp) / "cache"
        keys = {_compile(t, lib, cache) for t in targets}
        if len(keys) != 1:
            raise RuntimeError(f"the targets compiled under different keys: {sorted(keys)}")
        (key,) = keys
        (folder,) = [p for p in cache.iterdir() if p.name == f"neardup-{key}"]
        files = sorted(p.name for p in folder.iterdir() if p.suffix in (".nbi", ".nbc"))
        manifest: dict[str, object] = {
            "key": key,
            "environment": numba_cache.environment(),
            "targets": list(targets),
            "files": files,
        }
        staging = _staging(out)
        for name in files:
            shutil.copyfile(folder / name, staging / name)
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
        _place(staging, out)
    return manifest


def _staging(out: Path) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))


def _place(staging: Path, out: Path) -> None:
    """`staging` becomes `out`, replacing it; where another process (a second submit at
    the same time) placed its own first, that one stands: both hold the same key's code."""
    old = out.with_name(f"{staging.name}.old")
    try:
        if out.exists():
            out.rename(old)
        staging.rename(out)
    except OSError:
        pass
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)


def _current(out: Path, targets: tuple[str, ...]) -> bool:
    """Whether `out` holds this package's kernels compiled under its key for `targets`."""
    from neardup.kernels import numba_cache

    try:
        manifest = json.loads((out / MANIFEST).read_text())
    except (OSError, ValueError):
        return False
    return manifest.get("key") == numba_cache.cache_key() and manifest.get("targets") == list(targets)


def _copy_if_current(folder: Path, out: Path, targets: tuple[str, ...]) -> bool:
    """Copy `folder` to `out` if it holds this package's kernels under its key for `targets`
    (the key names the sources and the compiler's versions: the code is what a compile here
    would give)."""
    if folder.resolve() == out.resolve() or not _current(folder, targets):
        return False
    staging = _staging(out)
    shutil.copytree(folder, staging, dirs_exist_ok=True)
    _place(staging, out)
    return True


def _installed_copy(out: Path, targets: tuple[str, ...]) -> bool:
    """Copy the compiled code of an installed neardup wheel to `out` if it is this key's (a
    Docker image: the package installed from the same sources as the tree that submits)."""
    from importlib import metadata

    # Every installation on the path: a source tree's egg-info (lib/, after a build) comes first.
    installed = metadata.distributions(name="neardup")
    folders = [Path(str(d.locate_file("neardup/kernels/_compiled"))) for d in installed]
    return any(_copy_if_current(f, out, targets) for f in folders)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path)
    p.add_argument("--targets", help="comma-separated LLVM CPU names (default: %(default)s)",
                   default=",".join(default_targets()))  # fmt: skip
    p.add_argument("--lib", type=Path, help="the folder holding the neardup package to compile")
    p.add_argument("--if-stale", action="store_true", help="keep OUT if it holds this key's code")
    p.add_argument("--reuse", type=Path, metavar="DIR",
                   help="copy DIR (compiled before, e.g. spark-submit.sh's build/compiled) to OUT "
                        "if it holds this key's code for the targets; else compile")  # fmt: skip
    args = p.parse_args(argv)
    targets = tuple(t for t in args.targets.split(",") if t)
    reuse = args.if_stale and args.lib is None
    if reuse and (_current(args.out, targets) or _installed_copy(args.out, targets)):
        return
    if args.reuse is not None and _copy_if_current(args.reuse, args.out, targets):
        print(f"precompile: copied {args.reuse} into {args.out} (the same key and targets)")
        return
    manifest = build(args.out, targets, args.lib)
    print(f"precompiled {len(manifest['files'])} files for {', '.join(manifest['targets'])} "  # type: ignore[arg-type]
          f"into {args.out} (key {manifest['key']})")  # fmt: skip


if __name__ == "__main__":
    main()
