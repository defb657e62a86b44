"""Real text that nobody here wrote: the licences, copyright notices and package
descriptions already on a machine.

Every /usr/share/doc/*/copyright, every LICENSE*, LICENCE*, COPYING* and README* file, and
every *.dist-info/METADATA (a package's description, often its README) under the given
roots. Its near-duplicates are the kinds real corpora have: one licence with another
copyright line, one package's description across versions, and long files that quote a
licence among other text, which put dissimilar documents into one LSH bucket. Files are
read as UTF-8 (invalid bytes replaced) up to `max_bytes`; empty ones are left out; ids
follow the sorted paths, so one machine gives one corpus.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

PATTERNS = ("LICENSE*", "LICENCE*", "COPYING*", "README*")
SKIP_DIRS = frozenset({"proc", "sys", ".git", "node_modules", "__pycache__"})


def collect(roots: list[Path]) -> list[Path]:
    """The files of the corpus under `roots` (each walked once), sorted."""
    found: set[Path] = set(Path("/usr/share/doc").glob("*/copyright"))
    seen: set[Path] = set()
    for root in roots:
        if not root.is_dir() or root.resolve() in seen:
            continue
        seen.add(root.resolve())
        for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
            dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
            base = Path(dirpath)
            if base.name.endswith(".dist-info") and "METADATA" in filenames:
                found.add(base / "METADATA")
            for name in filenames:
                if any(Path(name).match(p) for p in PATTERNS):
                    found.add(base / name)
    return sorted(p for p in found if p.is_file() and not p.is_symlink())


def read(paths: list[Path], max_bytes: int = 2_000_000) -> tuple[list[str], list[str]]:
    """(texts, paths) of the files that read as non-empty text."""
    texts, kept = [], []
    for p in paths:
        try:
            text = p.read_bytes()[:max_bytes].decode("utf-8", errors="replace")
        except OSError:
            continue
        if text.strip():
            texts.append(text)
            kept.append(str(p))
    return texts, kept


def digest(texts: list[str]) -> str:
    """A short digest of the corpus, printed with figures measured on it."""
    return hashlib.sha256("\0".join(texts).encode()).hexdigest()[:16]
