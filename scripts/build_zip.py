"""Zip the neardup package for spark-submit --py-files (used by spark-submit.sh and the Airflow DAG).

    python scripts/build_zip.py OUT.zip [--compiled DIR]

Writes lib/neardup's .py files, its packaged YAML defaults and py.typed, with paths relative
to lib/ (so the zip's top level is `neardup/`), in sorted order, without __pycache__. With
--compiled, DIR's files (the kernels compiled ahead of use by `python -m
neardup.kernels.precompile DIR`, as the wheel ships them) go in as
neardup/kernels/_compiled/: executors then load the kernels instead of compiling them. OUT's
folder is created if missing; the zip is written next to OUT, under a name of its own (two
submits from one checkout at once each write theirs), and renamed into place, so a reader
never sees a partial file. Standard library only: any Python 3 runs it."""

from __future__ import annotations

import os
import sys
import tempfile
import zipfile

LIB = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib")


def build_zip(out: str, lib: str = LIB, compiled: str | None = None) -> str:
    folder = os.path.dirname(os.path.abspath(out))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(out) + ".", suffix=".tmp", dir=folder)
    os.close(fd)
    try:
        _write(tmp, lib, compiled)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # as a file opened for writing would be (mkstemp's is 0600)
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return out


def _write(tmp: str, lib: str, compiled: str | None) -> None:
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for root, dirs, files in os.walk(os.path.join(lib, "neardup")):
            dirs[:] = sorted(d for d in dirs if d not in ("__pycache__", "_compiled"))
            for f in sorted(files):
                if f.endswith((".py", ".yaml", ".typed")):
                    path = os.path.join(root, f)
                    z.write(path, os.path.relpath(path, lib))
        if compiled:
            for f in sorted(os.listdir(compiled)):
                z.write(os.path.join(compiled, f), f"neardup/kernels/_compiled/{f}")


if __name__ == "__main__":
    args = sys.argv[1:]
    if len(args) == 3 and args[1] == "--compiled":
        build_zip(args[0], compiled=args[2])
    elif len(args) == 1:
        build_zip(args[0])
    else:
        sys.exit("usage: build_zip.py OUT.zip [--compiled DIR]")
