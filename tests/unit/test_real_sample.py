"""The shipped sample (data/sample/corpus.jsonl.gz: real text, scripts/make_real_sample.py)
and the script that builds it.

The sample is checked against what data/sample/README.md and PROVENANCE.md say of it:
its columns, that every document carries its provenance and a licence that allows
redistribution (reviewed by hand: a rebuilt sample with another licence fails here until
someone looks), that edited copies name their original and what was changed, and that
PROVENANCE.md's tables are the file's counts. The script is run on a small tree made
here: what it keeps and leaves out, and that it writes the same bytes twice.
"""

from __future__ import annotations

import gzip
import json
import re
import zipfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import script_module
from neardup_testkit.reference import normalize

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "data" / "sample" / "corpus.jsonl.gz"
PROVENANCE = ROOT / "data" / "sample" / "PROVENANCE.md"
COLUMNS = ["id", "text", "date", "quality", "kind", "source", "package", "licence", "variant_of", "variant"]
KINDS = {
    "licence-text": "/usr/share/common-licenses/",
    "debian-copyright": "/usr/share/doc/",
    "debian-doc": "/usr/share/doc/",
    "python-metadata": "/site-packages/",
    "python-licence": "/site-packages/",
    "python-readme": "/site-packages/",
    "jar-licence": ".jar!META-INF/",
    "jar-notice": ".jar!META-INF/",
}
# Licences of the Python distributions and jars in the sample, and of the documents edited
# (Debian's spellings too), each one reviewed: they allow redistribution and modification.
PERMISSIVE = {
    *("MIT", "MIT-0", "MIT-CMU", "Expat", "Apache-2.0", "BSD", "BSD-2-Clause", "BSD-3-Clause"),
    *("BSD-2-clause", "BSD-3-clause", "0BSD", "PSF-2.0", "ISC", "Unlicense", "Zlib", "HPND"),
    *("MIT OR Apache-2.0", "Apache-2.0 OR MIT", "Apache-2.0 OR BSD-3-Clause", "Apache-2.0 OR BSD-2-Clause"),
    *("BSD OR Apache-2.0", "PSF-2.0 OR BSD", "MIT AND PSF-2.0"),
    "BSD-3-Clause AND 0BSD AND MIT AND Zlib AND CC0-1.0",
    "BSD-2-Clause AND Apache-2.0 WITH LLVM-exception",
}
EDITS = (
    r"lines rewrapped at \d+ characters",
    r"a copyright line replaced by another document's",
    r"paragraph \d+ of \d+ removed",
    r"\d+ of \d+ words replaced by other words of the text",
    r"a paragraph of another document appended",
    r"cut after \d+ of \d+ characters",
)


@pytest.fixture(scope="module")
def rows() -> list[dict[str, Any]]:
    with gzip.open(SAMPLE, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def test_rows_have_the_columns_and_their_provenance(rows: list[dict[str, Any]]) -> None:
    assert SAMPLE.stat().st_size <= 3_000_000 and 2000 <= len(rows) <= 4000
    assert all(list(r) == COLUMNS for r in rows)
    ids = [r["id"] for r in rows]
    assert len(set(ids)) == len(ids) and min(ids) > 2**31 and ids != sorted(ids)
    for r in rows:
        assert 0 < len(r["text"]) <= 30_000 and r["text"].strip(), r["id"]
        assert r["date"] is None or re.fullmatch(r"(19[7-9]\d|20[0-2]\d)-01-01", r["date"]), r["id"]
        assert isinstance(r["quality"], float) and 0 <= r["quality"] <= 1, r["id"]
        assert r["package"] and r["licence"], r["id"]
        if r["kind"] == "edited":
            continue
        assert KINDS[r["kind"]] in r["source"], r["id"]
        assert r["variant_of"] is None and r["variant"] is None, r["id"]
        if r["kind"].startswith(("python-", "jar-")):
            assert r["licence"] in PERMISSIVE, r
    assert set(Counter(r["kind"] for r in rows)) == {*KINDS, "edited"}


def test_edited_copies_name_their_original_and_the_edit(rows: list[dict[str, Any]]) -> None:
    by_id = {r["id"]: r for r in rows}
    edited = [r for r in rows if r["kind"] == "edited"]
    assert edited
    for r in edited:
        original = by_id[r["variant_of"]]
        assert original["kind"] not in ("edited", "licence-text"), r["id"]
        assert [original[k] for k in ("source", "package", "licence")] == [
            r[k] for k in ("source", "package", "licence")
        ]
        assert r["licence"] in PERMISSIVE and r["text"] != original["text"], r["id"]
        (edit,) = [e for e in EDITS if re.fullmatch(e, r["variant"])]
        if edit == EDITS[0]:  # only the line breaks differ
            assert r["text"].split() == original["text"].split()
    assert {e for r in edited for e in EDITS if re.fullmatch(e, r["variant"])} == set(EDITS)


def test_exact_and_format_copies_are_in(rows: list[dict[str, Any]]) -> None:
    """Byte-identical copies (a licence in several packages, one copyright file for a
    source package's binaries) and copies that differ in line breaks or case only."""
    texts = Counter(r["text"] for r in rows)
    by_normalized: dict[str, set[str]] = {}
    for r in rows:
        by_normalized.setdefault(normalize(r["text"]), set()).add(r["text"])
    assert sum(n - 1 for n in texts.values()) > 100
    assert max(texts.values()) == 5  # --max-copies
    assert sum(len(v) > 1 for v in by_normalized.values()) > 10


def _table(markdown: str, heading: str) -> dict[str, int]:
    section = markdown.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    cells = re.findall(r"(?m)^\| (.+) \| ([\d,]+) \|$", section)
    return {k: int(n.replace(",", "")) for k, n in cells}


def test_provenance_md_counts_the_file(rows: list[dict[str, Any]]) -> None:
    markdown = PROVENANCE.read_text("utf-8")
    assert _table(markdown, "By kind") == Counter(r["kind"] for r in rows)
    assert _table(markdown, "By licence") == Counter(r["licence"] for r in rows)
    packages = re.findall(r"(?m)^\| (.+) \| (.+) \| ([\d,]+) \|$", markdown.split("## By package\n")[1])
    originals = Counter((r["package"], r["licence"]) for r in rows if r["kind"] != "edited")
    assert {(p, lic): int(n.replace(",", "")) for p, lic, n in packages} == originals
    assert f"{len(rows):,} documents, {sum(len(r['text']) for r in rows):,} characters." in markdown


# --------------------------------------------------------------------------- the script


@pytest.fixture(scope="module")
def script() -> Any:
    return script_module.load("make_real_sample")


MIT = (
    "Copyright (c) 2020 A. Person\n\nPermission is hereby granted, free of charge, to any person\n"
    "obtaining a copy of this software, to deal in the Software without restriction.\n"
)


def test_licence_names(script: Any) -> None:
    assert script.licence_of_text(MIT) == "MIT"
    bsd = "Redistribution and use in source and binary forms ... Neither the name of X nor"
    assert script.licence_of_text(bsd) == "BSD-3-Clause"
    assert script.licence_of_text("Redistribution and use in source and binary forms") == "BSD-2-Clause"
    # The first licence the text names: an Apache project's LICENSE quoting MIT later.
    assert script.licence_of_text("Apache License\n Version 2.0 ... " + MIT) == "Apache-2.0"
    assert script.licence_of_text("GNU General Public License version 2") == "GPL"
    assert script.licence_of_text("all rights reserved") is None
    assert script.is_permissive("MIT") and script.is_permissive("BSD-3-clause")
    assert script.is_permissive("BSD-2-Clause AND Apache-2.0 WITH LLVM-exception")
    assert script.is_permissive("GPL-2.0 OR MIT") and not script.is_permissive("MIT AND GPL-2.0")
    assert not script.is_permissive("MPL-2.0") and not script.is_permissive("GPL-2+")
    meta = "Metadata-Version: 2.1\nName: x\nLicense: MIT License\n\nThe description.\n"
    assert script.metadata_licence(meta, []) == "MIT"
    meta = "Name: x\nClassifier: License :: OSI Approved :: BSD License\n\nLicense: GPL\n"
    assert script.metadata_licence(meta, []) == "BSD"
    assert script.metadata_licence("Name: x\nLicense: see file\n\n", [MIT]) == "MIT"
    assert (
        script.metadata_licence("Name: x\nLicense-Expression: Apache-2.0\nLicense: MIT\n", []) == "Apache-2.0"
    )
    dep5 = (
        "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n\n"
        "Files: *\nCopyright: 2001 A\nLicense: GPL-2+\n\n"
        "Files: debian/*\nCopyright: 2010 B\nLicense: Expat\n"
    )
    assert script.debian_licence(dep5) == "Expat"
    assert script.debian_licence(dep5.replace("debian/*", "doc/*")) == "GPL-2+"
    prose = "Files: *\nCopyright: 2001 A\nLicense: Redistribution and use in source and binary forms, with\n"
    assert script.debian_licence(prose) == "BSD-2-Clause"


def _tree(root: Path) -> list[str]:
    """Common licences, an empty Debian, and an environment with a permissive distribution
    (METADATA, LICENSE, a vendored README, a jar) and a GPL one."""
    licences = root / "common-licenses"
    licences.mkdir()
    (licences / "MIT").write_text(MIT)
    (licences / "Apache-2.0").write_text("Apache License\nVersion 2.0, January 2004\n")
    (licences / "GPL").symlink_to("MIT")
    for name in ("doc", "dpkg-info", "apt-lists"):
        (root / name).mkdir()
    site = root / "env" / "lib" / "python3.11" / "site-packages"
    info = site / "good-1.0.dist-info"
    info.mkdir(parents=True)
    description = "\n\n".join(
        f"Paragraph {i} of the description of good, which is long enough." for i in range(9)
    )
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: good\nVersion: 1.0\nLicense: MIT\n\n{description}\n"
    )
    (info / "LICENSE").write_text(MIT + "\n" + description)
    (site / "good").mkdir()
    (site / "good" / "README.md").write_text("# good\n\nIt is good.\n")
    with zipfile.ZipFile(site / "good" / "lib.jar", "w") as jar:
        jar.writestr("META-INF/LICENSE", "Licensed under the Apache License, Version 2.0 (the License)\n")
        jar.writestr("META-INF/NOTICE", "Copyright 2024 The Apache Software Foundation\n")
        jar.writestr("org/Foo.class", b"\xca\xfe")
    record = [
        "good-1.0.dist-info/METADATA,,",
        "good-1.0.dist-info/LICENSE,,",
        "good/README.md,,",
        "good/lib.jar,,",
    ]
    (info / "RECORD").write_text("\n".join(record) + "\n")
    bad = site / "bad-2.0.dist-info"
    bad.mkdir()
    (bad / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: bad\nVersion: 2.0\nLicense: GPL\n\nA description.\n"
    )
    (bad / "LICENSE").write_text("GNU General Public License\n")
    (bad / "RECORD").write_text("bad-2.0.dist-info/METADATA,,\nbad-2.0.dist-info/LICENSE,,\n")
    return [
        *("--common-licenses", str(licences), "--debian-doc", str(root / "doc")),
        *("--dpkg-status", str(root / "no-status"), "--dpkg-info", str(root / "dpkg-info")),
        *("--apt-lists", str(root / "apt-lists"), "--venv", str(root / "env"), "--edited", "3"),
    ]


def test_the_script_keeps_permissive_text_with_its_provenance(script: Any, tmp_path: Path) -> None:
    args = _tree(tmp_path)
    first, second = tmp_path / "a.jsonl.gz", tmp_path / "b.jsonl.gz"
    assert script.main([*args, "--out", str(first), "--provenance", str(tmp_path / "P.md")]) == 0
    assert script.main([*args, "--out", str(second)]) == 0
    assert first.read_bytes() == second.read_bytes()
    with gzip.open(first, "rt", encoding="utf-8") as f:
        got = [json.loads(line) for line in f]
    originals = [
        (r["kind"], r["source"].removeprefix(str(tmp_path)), r["licence"]) for r in got if not r["variant"]
    ]
    licence_text = "licence text: verbatim copies permitted"
    assert originals == [
        ("licence-text", "/common-licenses/Apache-2.0", licence_text),
        ("licence-text", "/common-licenses/MIT", licence_text),
        ("python-metadata", "env/site-packages/good-1.0.dist-info/METADATA", "MIT"),
        ("python-licence", "env/site-packages/good-1.0.dist-info/LICENSE", "MIT"),
        ("python-readme", "env/site-packages/good/README.md", "MIT"),
        ("jar-licence", "env/site-packages/good/lib.jar!META-INF/LICENSE", "Apache-2.0"),
        ("jar-notice", "env/site-packages/good/lib.jar!META-INF/NOTICE", "Apache-2.0"),
    ]
    edited = [r for r in got if r["variant"]]
    assert len(edited) == 3 and all(r["kind"] == "edited" and r["licence"] == "MIT" for r in edited)
    provenance = (tmp_path / "P.md").read_text()
    assert "- bad 2.0 (PyPI): licence GPL" in provenance and "| good 1.0 (PyPI) | MIT | 3 |" in provenance
    with pytest.raises(SystemExit):
        script.main([*args, "--out", str(tmp_path / "c.json")])
