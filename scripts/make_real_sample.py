#!/usr/bin/env python3
"""Build the shipped sample (data/sample/corpus.jsonl.gz) from real text that may be redistributed.

    python scripts/make_real_sample.py --venv /path/to/venv [--venv ...] \\
        --out data/sample/corpus.jsonl.gz --provenance data/sample/PROVENANCE.md

The documents, each with where it came from and the licence it is under:

- `licence-text`: the licence texts in /usr/share/common-licenses (licence texts are
  copied verbatim everywhere; none is edited here);
- `debian-copyright`, `debian-doc`: every /usr/share/doc/*/copyright, and the README* and
  NEWS* beside it, of the installed packages of Debian's main archive (the package that owns
  the file, from dpkg's lists, must be in apt's lists of deb.debian.org main), so under
  DFSG-free licences; the licence recorded is that of the copyright file's `Files: debian/*`
  stanza, else of `Files: *`, else the first one it names;
- `python-metadata`, `python-licence`, `python-readme`: each installed distribution's
  METADATA (its description, usually its README) and the LICENSE, LICENCE, COPYING, NOTICE,
  AUTHORS and README files listed in its RECORD, for distributions whose licence (their
  License-Expression, else License, else classifiers, else their licence file) is
  permissive: MIT, BSD, Apache-2.0, PSF-2.0, ISC and the like (`PERMISSIVE`);
- `jar-licence`, `jar-notice`: META-INF/LICENSE* and NOTICE* of the jars such a
  distribution ships (pyspark's), for jars whose own licence is permissive;
- `edited`: seeded edits of some of the above that are permissively licensed (not of licence
  texts): rewrapped lines, another copyright line, a paragraph removed, words replaced, a
  paragraph appended, the end cut off. `variant_of` names the original, `variant` the edit.

Files that are not UTF-8, empty, or longer than --max-chars are left out. The inputs are
read in sorted order and everything random comes from --seed, so one machine gives one
file, byte for byte (the gzip header has no name or time). Another machine has other
packages, so it gives another corpus: the shipped file is the record, this script its
provenance.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import random
import re
import subprocess
import sys
import textwrap
import zipfile
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

import pyarrow as pa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "testkit"))  # the writer: test support the wheel does not ship

from neardup_testkit.synth import write_jsonl_gz  # noqa: E402

COMMON_LICENSES = Path("/usr/share/common-licenses")
DEBIAN_DOC = Path("/usr/share/doc")
DPKG_STATUS = Path("/var/lib/dpkg/status")
DPKG_INFO = Path("/var/lib/dpkg/info")
APT_LISTS = Path("/var/lib/apt/lists")

# Licences that allow redistribution with a notice and no further condition on this use.
PERMISSIVE = frozenset(
    {
        *("MIT", "MIT-0", "MIT-CMU", "BSD", "BSD-2-Clause", "BSD-3-Clause", "0BSD", "Apache-2.0"),
        *("PSF-2.0", "ISC", "Zlib", "Unlicense", "CC0-1.0", "HPND"),
    }
)
# Files of a distribution that are documents here (by name, case-insensitive).
FILE_KINDS = (
    (re.compile(r"(?i)^(licen[cs]e|copying|notice|authors)"), "python-licence"),
    (re.compile(r"(?i)^readme"), "python-readme"),
)
JAR_FILE = re.compile(r"(?i)^META-INF/(LICEN[CS]E|NOTICE)[^/]*$")
TEXT_SUFFIXES = ("", ".txt", ".md", ".rst", ".markdown")

# A licence named by its text: the earliest match in the text wins.
TEXT_RULES = (
    (r"(?i)Apache (\(Software\) )?License,? Version 2\.0", "Apache-2.0"),
    (r"Permission is hereby granted, free of charge, to any\s+person obtaining", "MIT"),
    (r"Redistribution and use in source and binary forms", "BSD"),
    (r"Permission to use, copy, modify, and(/or)? distribute this software for any\s+purpose", "ISC"),
    (r"Permission to use, copy, modify, (and )?distribute,? (and sell )?this software and its", "HPND"),
    (r"PYTHON SOFTWARE FOUNDATION LICENSE", "PSF-2.0"),
    (r"This is free and unencumbered software released into the public domain", "Unlicense"),
    (r"CC0 1\.0 Universal", "CC0-1.0"),
    (r"This software is provided 'as-is', without any express or implied", "Zlib"),
    (r"Mozilla Public License,?\s+(v\.|Version)\s*2\.0", "MPL-2.0"),
    (r"Eclipse Public License", "EPL"),
    (r"(?i)COMMON DEVELOPMENT AND DISTRIBUTION LICENSE", "CDDL"),
    (r"(?i)GNU (Lesser|Library) General Public License", "LGPL"),
    (r"(?i)GNU General Public License", "GPL"),
)
BSD3 = re.compile(r"(?i)neither the names? of|names of (its|the) contributors|name of the copyright holder")
# A short License field or a classifier, as a licence name.
NAME_RULES = (
    (r"(?i)^(MIT|MIT License|Expat)$", "MIT"),
    (r"(?i)^(BSD|BSD License|BSD-like)$", "BSD"),
    (r"(?i)^(BSD[- ]?3[- ]Clause( License)?|3-Clause BSD License|New BSD License)$", "BSD-3-Clause"),
    (r"(?i)^(BSD[- ]?2[- ]Clause( License)?|Simplified BSD License)$", "BSD-2-Clause"),
    (r"(?i)^(Apache([- ]2\.0| License 2\.0| License, Version 2\.0| Software License)?)$", "Apache-2.0"),
    (r"(?i)^(MIT|Your choice of MIT) (-?or-?) Apache( License)?[- ]2\.0$", "MIT OR Apache-2.0"),
    (r"(?i)^ISC( License)?( \(ISCL\))?$", "ISC"),
    (r"(?i)^(PSF|PSF-2\.0|Python Software Foundation License)$", "PSF-2.0"),
    (r"(?i)^(The )?Unlicense( \(Unlicense\))?$", "Unlicense"),
    (r"(?i)^Mozilla Public License 2\.0.*|^MPL[- ]2\.0$", "MPL-2.0"),
)
NOT_PROSE = re.compile(r"\s{2,}|\s*([-*+•]|\d+[.)]|#|=|\||[\w-]+:\s)")
COPYRIGHT_LINE = re.compile(r"(?im)^.*(?:copyright|\(c\)|©).*$")
YEAR = re.compile(r"\b(19[7-9]\d|20[0-2]\d)\b")
LATEST_YEAR = 2026


@dataclass(frozen=True)
class Doc:
    text: str
    kind: str
    source: str  # where the text was read: a path, or jar!entry
    package: str  # the package (Debian, PyPI or jar) it belongs to, with its version
    licence: str  # the licence it may be redistributed under
    variant_of: int | None = None  # for an edited copy: the row (later: id) of its original
    variant: str | None = None  # for an edited copy: what was done


# --------------------------------------------------------------------------- licences


def licence_of_text(text: str) -> str | None:
    """The licence whose wording comes first in `text`, or None."""
    found = []
    for pattern, name in TEXT_RULES:
        m = re.search(pattern.replace(" ", r"\s+"), text)
        if m:
            found.append((m.start(), name))
    if not found:
        return None
    name = min(found)[1]
    if name == "BSD":
        return "BSD-3-Clause" if BSD3.search(text) else "BSD-2-Clause"
    return name


def licence_of_name(name: str) -> str | None:
    name = " ".join(name.split())
    for pattern, spdx in NAME_RULES:
        if re.match(pattern, name):
            return spdx
    return None


def is_permissive(expression: str) -> bool:
    """An SPDX-like expression any of whose OR-alternatives is all permissive."""
    for alternative in re.split(r"\s+OR\s+", expression.replace("(", "").replace(")", "")):
        terms = [re.sub(r"\s+WITH\s+\S+", "", t).strip() for t in re.split(r"\s+AND\s+", alternative)]
        if all(_spdx_case(t) in PERMISSIVE for t in terms):
            return True
    return False


def _spdx_case(term: str) -> str:
    """Debian's short names (`BSD-3-clause`, `Expat`) as SPDX ids."""
    by_lower = {p.lower(): p for p in PERMISSIVE} | {"expat": "MIT"}
    return by_lower.get(term.lower(), term)


def metadata_licence(metadata: str, licence_texts: list[str]) -> str | None:
    """A distribution's licence: License-Expression, else a short License field, else its
    licence classifiers (several: any of them), else the wording of its licence files."""
    head = metadata.split("\n\n", 1)[0]
    fields = re.findall(r"(?m)^([A-Za-z-]+): (.*)$", head)
    for key, value in fields:
        if key == "License-Expression":
            return value.strip()
    for key, value in fields:
        if key == "License" and (spdx := licence_of_name(value.strip())):
            return spdx
    classified = []
    for key, value in fields:
        if key == "Classifier" and value.startswith("License ::"):
            spdx = licence_of_name(value.rsplit("::", 1)[1].strip())
            if spdx and spdx not in classified:
                classified.append(spdx)
    if classified:
        return " OR ".join(classified)
    for text in licence_texts:
        if spdx := licence_of_text(text):
            return spdx
    return None


def debian_licence(text: str) -> str:
    """The licence of a Debian copyright file: its `Files: debian/*` stanza's, else
    `Files: *`'s, else the first one it names (machine-readable or not)."""
    stanzas: dict[str, str] = {}
    first = None
    for stanza in re.split(r"\n\s*\n", text):
        files = re.search(r"(?m)^Files:\s*((?:.*\n?)(?:[ \t]+.*\n?)*)", stanza)
        field = re.search(r"(?m)^License:[ \t]*(\S.*)$", stanza)
        if field is None:
            continue
        name = field.group(1).strip()
        words = name.split()
        if len(words) > 7 or (len(words) > 4 and not re.search(r"[\d-]", name)):
            # Not a short name but the licence's own first words.
            name = licence_of_text(stanza[field.start() :]) or "see text"
        first = first or name
        for pattern in files.group(1).split() if files else ():
            stanzas.setdefault(pattern, name)
    for pattern in ("debian/*", "*"):
        if pattern in stanzas:
            return stanzas[pattern]
    return first or licence_of_text(text) or "unstated (Debian main: DFSG-free)"


# --------------------------------------------------------------------------- sources


def read_text(data: bytes, max_chars: int) -> str | None:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if not text.strip() or len(text) > max_chars or "\0" in text:
        return None
    return text


def debian_packages(status: Path, info: Path, lists: Path) -> tuple[dict[str, str], dict[str, str], set[str]]:
    """(installed package -> version, file path -> the installed package that owns it,
    the packages of Debian's main archive in the apt lists of deb.debian.org)."""
    versions: dict[str, str] = {}
    if status.exists():
        for entry in status.read_text("utf-8", errors="replace").split("\n\n"):
            name = re.search(r"(?m)^Package: (\S+)", entry)
            version = re.search(r"(?m)^Version: (\S+)", entry)
            if name and version:
                versions[name.group(1)] = version.group(1)
    owners: dict[str, str] = {}
    for listing in sorted(info.glob("*.list")):
        package = listing.stem.split(":")[0]
        for line in listing.read_text("utf-8", errors="replace").splitlines():
            if line.startswith("/usr/share/doc/"):
                owners.setdefault(line, package)
    main: set[str] = set()
    for packages in sorted(lists.glob("*debian.org_*_main_binary-*_Packages*")):
        # apt-helper reads the lists however apt compressed them (lz4, gz, xz or none).
        listed = subprocess.run(
            ["/usr/lib/apt/apt-helper", "cat-file", str(packages)], capture_output=True, text=True, check=True
        ).stdout
        main.update(re.findall(r"(?m)^Package: (\S+)", listed))
    return versions, owners, main


def licence_texts(root: Path, max_chars: int) -> list[Doc]:
    docs = []
    for path in sorted(root.iterdir()) if root.is_dir() else []:
        if path.is_file() and not path.is_symlink():
            text = read_text(path.read_bytes(), max_chars)
            if text is not None:
                package, licence = "base-files (Debian)", "licence text: verbatim copies permitted"
                docs.append(Doc(text, "licence-text", str(path), package, licence))
    return docs


def debian_docs(
    root: Path, packages: tuple[dict[str, str], dict[str, str], set[str]], max_chars: int
) -> tuple[list[Doc], list[str]]:
    """Each package's copyright file, then its README* and NEWS* (gzip ones unpacked), under
    the licence its copyright file gives, for packages of Debian's main archive (so under a
    DFSG-free licence); and a line for each package left out."""
    versions, owners, main = packages
    docs: list[Doc] = []
    skipped: list[str] = []
    for copyright_path in sorted(root.glob("*/copyright")):
        folder = copyright_path.parent
        if copyright_path.is_symlink() or folder.is_symlink() or not copyright_path.is_file():
            continue
        name = owners.get(f"/usr/share/doc/{folder.name}/copyright", folder.name)
        if name not in main:
            skipped.append(f"{name} (Debian package, not from Debian's main archive)")
            continue
        try:
            notice = copyright_path.read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            continue
        licence = debian_licence(notice)
        package = f"{name} {versions[name]} (Debian)" if name in versions else f"{name} (Debian)"
        if (text := read_text(notice.encode(), max_chars)) is not None:
            docs.append(Doc(text, "debian-copyright", str(copyright_path), package, licence))
        for path in sorted([*folder.glob("README*"), *folder.glob("NEWS*")]):
            if path.is_symlink() or not path.is_file():
                continue
            data = path.read_bytes()
            if path.suffix == ".gz":
                data = gzip.decompress(data)
            if (text := read_text(data, max_chars)) is not None:
                docs.append(Doc(text, "debian-doc", str(path), package, licence))
    return docs, skipped


def site_packages(venv: Path) -> Path:
    found = sorted(venv.glob("lib/python3*/site-packages"))
    if not found:
        raise SystemExit(f"{venv}: no lib/python3*/site-packages")
    return found[0]


def _record_files(dist_info: Path) -> list[str]:
    record = dist_info / "RECORD"
    if not record.exists():
        return []
    rows = csv.reader(io.StringIO(record.read_text("utf-8", errors="replace")))
    return sorted({row[0] for row in rows if row and not row[0].startswith("..")})


def python_docs(venv: Path, max_chars: int) -> tuple[list[Doc], list[str]]:
    """The documents of the permissively licensed distributions in `venv`, and a line for
    each distribution left out and why."""
    site = site_packages(venv)
    label = f"{venv.name}/site-packages"
    docs: list[Doc] = []
    skipped: list[str] = []
    for dist_info in sorted(site.glob("*.dist-info")):
        metadata_path = dist_info / "METADATA"
        if not metadata_path.exists():
            continue
        metadata = metadata_path.read_text("utf-8", errors="replace")
        name = re.search(r"(?m)^Name: (.+)$", metadata)
        version = re.search(r"(?m)^Version: (.+)$", metadata)
        if not (name and version):
            continue
        package = f"{name.group(1).strip()} {version.group(1).strip()} (PyPI)"
        files: list[tuple[str, str, bytes]] = []  # (kind, relative path, bytes)
        jars: list[str] = []
        for rel in _record_files(dist_info):
            path = site / rel
            base = Path(rel).name
            if rel.endswith(".jar"):
                jars.append(rel)
                continue
            for pattern, kind in FILE_KINDS:
                if pattern.match(base) and Path(base).suffix.lower() in TEXT_SUFFIXES and path.is_file():
                    files.append((kind, rel, path.read_bytes()))
                    break
        own = [read_text(b, 10**9) or "" for kind, rel, b in files if kind == "python-licence"]
        licence = metadata_licence(metadata, own)
        if licence is None or not is_permissive(licence):
            skipped.append(f"{package}: licence {licence or 'not found'}")
            continue
        if (text := read_text(metadata.encode(), max_chars)) is not None:
            docs.append(Doc(text, "python-metadata", f"{label}/{dist_info.name}/METADATA", package, licence))
        for kind, rel, data in files:
            if (text := read_text(data, max_chars)) is not None:
                docs.append(Doc(text, kind, f"{label}/{rel}", package, licence))
        for rel in jars:
            docs.extend(_jar_docs(site / rel, f"{label}/{rel}", package, max_chars, skipped))
    return docs, skipped


def _jar_docs(jar: Path, label: str, shipped_by: str, max_chars: int, skipped: list[str]) -> list[Doc]:
    with zipfile.ZipFile(jar) as z:
        entries = sorted(n for n in z.namelist() if JAR_FILE.match(n))
        texts = [(n, t) for n in entries if (t := read_text(z.read(n), 10**9)) is not None]
    licence = None
    for n, t in texts:  # the jar's own licence: its LICENSE's wording, else its NOTICE's
        if "LICEN" in n.upper():
            licence = licence_of_text(t)
            break
    if licence is None and any("Apache Software Foundation" in t for _, t in texts):
        licence = "Apache-2.0"
    package = f"{jar.name} (in {shipped_by.removesuffix(' (PyPI)')})"
    if licence is None or not is_permissive(licence):
        if texts:
            skipped.append(f"{package}: licence {licence or 'not found'}")
        return []
    return [
        Doc(t, "jar-licence" if "LICEN" in n.upper() else "jar-notice", f"{label}!{n}", package, licence)
        for n, t in texts
        if len(t) <= max_chars
    ]


# --------------------------------------------------------------------------- edited copies


def at_most_copies(docs: list[Doc], most: int) -> list[Doc]:
    """The documents but for copies of a text (equal once lowercased and with runs of
    whitespace as one space: what the job calls exact duplicates) after the first `most`.
    Every jar and package carries the Apache License; a hundred copies would be half of the
    duplicates."""
    seen: Counter[str] = Counter()
    kept = []
    for d in docs:
        key = " ".join(d.text.lower().split())
        seen[key] += 1
        if seen[key] <= most:
            kept.append(d)
    return kept


def _paragraphs(text: str) -> list[str]:
    return [p for p in re.split(r"\n\s*\n", text) if p.strip()]


def _rewrap(text: str, rng: random.Random) -> tuple[str, str] | None:
    width = rng.randrange(56, 100)
    out = []
    for p in _paragraphs(text):
        lines = p.splitlines()
        # Running text is refilled; lists, tables, headers, fields and indented blocks are not.
        if len(lines) > 1 and not any(NOT_PROSE.match(ln) for ln in lines):
            out.append(
                textwrap.fill(" ".join(p.split()), width, break_long_words=False, break_on_hyphens=False)
            )
        else:
            out.append(p)
    new = "\n\n".join(out) + "\n"
    return (new, f"lines rewrapped at {width} characters") if new.split() == text.split() else None


def _holder(text: str, rng: random.Random, others: list[str]) -> tuple[str, str] | None:
    lines = [m for m in COPYRIGHT_LINE.finditer(text) if YEAR.search(m.group(0))]
    donors = [ln for o in others for ln in COPYRIGHT_LINE.findall(o) if YEAR.search(ln)]
    if not lines or not donors:
        return None
    target = lines[rng.randrange(len(lines))]
    donor = rng.choice(donors)
    line = donor if donor.strip() else target.group(0)
    if line.strip() == target.group(0).strip():
        return None
    new = text[: target.start()] + line.strip() + text[target.end() :]
    return new, "a copyright line replaced by another document's"


def _drop_paragraph(text: str, rng: random.Random) -> tuple[str, str] | None:
    paras = _paragraphs(text)
    if len(paras) < 4:
        return None
    i = rng.randrange(1, len(paras))
    return "\n\n".join(paras[:i] + paras[i + 1 :]) + "\n", f"paragraph {i + 1} of {len(paras)} removed"


def _replace_words(text: str, rng: random.Random) -> tuple[str, str] | None:
    words = re.split(r"(\s+)", text)
    slots = [i for i in range(0, len(words), 2) if words[i]]
    if len(slots) < 40:
        return None
    share = rng.choice((0.01, 0.02, 0.03, 0.05))
    chosen = rng.sample(slots, max(1, round(share * len(slots))))
    for i in chosen:
        words[i] = words[rng.choice(slots)]
    return "".join(words), f"{len(chosen)} of {len(slots)} words replaced by other words of the text"


def _append(text: str, rng: random.Random, others: list[str]) -> tuple[str, str] | None:
    paras = [p for o in others for p in _paragraphs(o) if 200 <= len(p) <= 1500]
    if not paras:
        return None
    new = text.rstrip("\n") + "\n\n" + rng.choice(paras).strip() + "\n"
    return new, "a paragraph of another document appended"


def _truncate(text: str, rng: random.Random) -> tuple[str, str] | None:
    share = rng.uniform(0.6, 0.95)
    cut = text.rfind("\n", 0, int(len(text) * share))
    if cut <= len(text) // 2:
        return None
    return text[: cut + 1], f"cut after {cut + 1} of {len(text)} characters"


EDITS = ("rewrap", "holder", "drop", "words", "append", "truncate")


def _edit(edit: str, text: str, rng: random.Random, others: list[str]) -> tuple[str, str] | None:
    if edit == "rewrap":
        return _rewrap(text, rng)
    if edit == "holder":
        return _holder(text, rng, others)
    if edit == "drop":
        return _drop_paragraph(text, rng)
    if edit == "words":
        return _replace_words(text, rng)
    if edit == "append":
        return _append(text, rng, others)
    return _truncate(text, rng)


def edited_copies(docs: list[Doc], count: int, rng: random.Random) -> list[Doc]:
    """`count` edited copies of seeded permissively licensed documents (not licence texts)
    of 300 to 20,000 characters, the edits in turn; `variant_of` is the original's row."""
    eligible = [
        i
        for i, d in enumerate(docs)
        if d.kind != "licence-text" and is_permissive(d.licence) and 300 <= len(d.text) <= 20_000
    ]
    out: list[Doc] = []
    turn, misses = 0, 0
    while eligible and len(out) < count and turn < 20 * count:
        i = rng.choice(eligible)
        others = [docs[j].text for j in rng.sample(eligible, min(3, len(eligible))) if j != i]
        made = _edit(EDITS[turn % len(EDITS)], docs[i].text, rng, others)
        if made is not None and made[0] != docs[i].text:
            out.append(replace(docs[i], text=made[0], kind="edited", variant_of=i, variant=made[1]))
        else:
            misses += 1
            if misses < 50:  # another document; after 50, the next edit (this one fits none)
                continue
        turn, misses = turn + 1, 0
    return out


# --------------------------------------------------------------------------- rows


def date_of(text: str) -> str | None:
    """January 1 of the latest year a copyright line names (else the text), or None."""
    for scope in ("\n".join(COPYRIGHT_LINE.findall(text)), text):
        years = [int(y) for y in YEAR.findall(scope) if int(y) <= LATEST_YEAR]
        if years:
            return f"{max(years)}-01-01"
    return None


def quality_of(text: str) -> float:
    """The share of the non-blank characters that are letters (prose high, tables and
    markup lower), three decimals."""
    chars = [c for c in text if not c.isspace()]
    return round(sum(c.isalpha() for c in chars) / len(chars), 3) if chars else 0.0


def rows(docs: list[Doc], seed: int) -> list[dict[str, object]]:
    """The rows in the order they were read (as a crawl would write them; similar files
    often side by side, which gzip likes), with seeded sparse ids above 2^31 in a seeded
    order (not row numbers, not sorted, not int32) and `variant_of` as the original's id."""
    rng = random.Random(seed)
    ids = [3_000_000_000 + k for k in sorted(rng.sample(range(20 * len(docs)), len(docs)))]
    rng.shuffle(ids)
    out = []
    for i, d in enumerate(docs):
        out.append(
            {
                "id": ids[i],
                "text": d.text,
                "date": date_of(d.text),
                "quality": quality_of(d.text),
                "kind": d.kind,
                "source": d.source,
                "package": d.package,
                "licence": d.licence,
                "variant_of": None if d.variant_of is None else ids[d.variant_of],
                "variant": d.variant,
            }
        )
    return out


def provenance(table: list[dict[str, object]], skipped: list[str], command: str) -> str:
    """PROVENANCE.md: where the documents come from and under which licences, by kind, by
    licence and by package, and what was left out for its licence."""
    kinds = Counter(str(r["kind"]) for r in table)
    licences = Counter(str(r["licence"]) for r in table)
    packages: dict[tuple[str, str], int] = Counter(
        (str(r["package"]), str(r["licence"])) for r in table if r["variant_of"] is None
    )
    chars = sum(len(str(r["text"])) for r in table)
    lines = [
        "# Provenance of corpus.jsonl.gz",
        "",
        "Every document is text that its authors allow to be redistributed, read from files",
        "installed on the machine that built the sample. Each row says where it came from:",
        "`kind`, `source` (the file; `jar!entry` inside a jar), `package` (with its version) and",
        "`licence` (the licence it may be redistributed under, as its package states it); an",
        "edited copy also has `variant_of` (its original's id) and `variant` (what was changed).",
        "",
        f"Written by `{command}`",
        "(its docstring says what it reads and how it decides).",
        f"{len(table):,} documents, {chars:,} characters.",
        "",
        "## Sources and their licences",
        "",
        "| kind | what | licence basis |",
        "|---|---|---|",
        "| licence-text | the licence texts of /usr/share/common-licenses (Debian's base-files) |"
        " licence texts are distributed verbatim with every package under them; none is edited |",
        "| debian-copyright | /usr/share/doc/PACKAGE/copyright of installed Debian packages |"
        " packages of Debian's main archive only (checked against apt's package lists), whose"
        " licences are all DFSG-free: redistribution allowed; `licence` is the copyright file's"
        " own stanza's (`Files: debian/*`, else `Files: *`) |",
        "| debian-doc | README* and NEWS* in the same folders (gzip ones unpacked) | as the"
        " package's copyright file |",
        "| python-metadata | each distribution's METADATA: its description, usually its README |"
        " permissive distributions only: License-Expression, else License, else the licence"
        " classifiers, else the wording of its licence file, must name MIT, BSD, Apache-2.0,"
        " PSF-2.0, ISC or a like licence |",
        "| python-licence, python-readme | LICENSE*, LICENCE*, COPYING*, NOTICE*, AUTHORS* and"
        " README* files the distribution's RECORD lists (vendored libraries' included) | the"
        " distribution's |",
        "| jar-licence, jar-notice | META-INF/LICENSE* and NOTICE* of the jars a distribution"
        " ships (pyspark's) | the jar's own licence, from its LICENSE's wording (else its NOTICE's),"
        " permissive only |",
        "| edited | a seeded edit of a permissively licensed document above (never of a licence"
        " text): lines rewrapped, a copyright line swapped, a paragraph removed, words replaced,"
        " a paragraph appended, the end cut off | the original's (all allow modification) |",
        "",
        "## By kind",
        "",
        "| kind | documents |",
        "|---|---|",
        *(f"| {k} | {n:,} |" for k, n in sorted(kinds.items())),
        "",
        "## By licence",
        "",
        "Debian's short names as the copyright files write them.",
        "",
        "| licence | documents |",
        "|---|---|",
        *(f"| {k} | {n:,} |" for k, n in sorted(licences.items(), key=lambda kv: (-kv[1], kv[0]))),
        "",
        "## By package",
        "",
        "Documents read from each package (edited copies not counted).",
        "",
        "| package | licence | documents |",
        "|---|---|---|",
        *(f"| {k} | {lic} | {n:,} |" for (k, lic), n in sorted(packages.items())),
        "",
        "## Left out for their licence or origin",
        "",
        "None of their files is in the corpus.",
        "",
        *(f"- {s}" for s in sorted(set(skipped))),
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", type=Path, action="append", default=[], help="an environment (repeatable)")
    parser.add_argument("--common-licenses", type=Path, default=COMMON_LICENSES)
    parser.add_argument("--debian-doc", type=Path, default=DEBIAN_DOC)
    parser.add_argument("--dpkg-status", type=Path, default=DPKG_STATUS)
    parser.add_argument("--dpkg-info", type=Path, default=DPKG_INFO)
    parser.add_argument("--apt-lists", type=Path, default=APT_LISTS)
    parser.add_argument("--max-chars", type=int, default=30_000, help="longer files are left out")
    parser.add_argument(
        "--max-copies", type=int, default=5, help="of one text (equal but for case and spaces): the first"
    )
    parser.add_argument("--edited", type=int, default=300, help="how many edited copies")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, required=True, help="*.jsonl.gz")
    parser.add_argument("--provenance", type=Path, help="where to write PROVENANCE.md")
    args = parser.parse_args(argv)
    if not args.out.name.endswith(".jsonl.gz"):
        parser.error(f"--out {args.out}: the name must end in .jsonl.gz")

    docs = licence_texts(args.common_licenses, args.max_chars)
    packages = debian_packages(args.dpkg_status, args.dpkg_info, args.apt_lists)
    found, skipped = debian_docs(args.debian_doc, packages, args.max_chars)
    docs += found
    for venv in args.venv or [Path(sys.prefix)]:
        found, left_out = python_docs(venv, args.max_chars)
        docs += found
        skipped += left_out
    docs = at_most_copies(docs, args.max_copies)
    docs += edited_copies(docs, args.edited, random.Random(args.seed))
    table = rows(docs, args.seed)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_jsonl_gz(pa.Table.from_pylist(table), args.out)  # byte for byte the same for the same rows
    if args.provenance:
        venvs = " ".join(f"--venv {v}" for v in args.venv)
        command = f"python scripts/make_real_sample.py {venvs} --seed {args.seed} --out {args.out}"
        args.provenance.write_text(provenance(table, skipped, command), "utf-8")
    kinds = Counter(str(r["kind"]) for r in table)
    print(
        f"{args.out}: {len(table)} documents ({', '.join(f'{k} {n}' for k, n in sorted(kinds.items()))}), "
        f"{args.out.stat().st_size} bytes",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
