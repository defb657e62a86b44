"""Zip the neardup package for spark-submit --py-files (used by spark-submit.sh and the Airflow DAG).

    python scripts/build_zip.py OUT.zip

Writes lib/neardup's .py files, its packaged YAML defaults and py.typed, with paths relative
to lib/ (so the zip's top level is `neardup/`), in sorted order, without __pycache__. OUT's
folder is created if missing; the zip is written next to OUT and renamed into place, so a
reader never sees a partial file. Standard library only: any Python 3 runs it."""

from __future__ import annotations

import os
import sys
import zipfile

LIB = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib")


def build_zip(out: str, lib: str = LIB) -> str:
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    tmp = out + ".tmp"
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for root, dirs, files in os.walk(os.path.join(lib, "neardup")):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for f in sorted(files):
                if f.endswith((".py", ".yaml", ".typed")):
                    path = os.path.join(root, f)
                    z.write(path, os.path.relpath(path, lib))
    os.replace(tmp, out)
    return out


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: build_zip.py OUT.zip")
    build_zip(sys.argv[1])
