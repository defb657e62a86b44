"""The daemon's path: Spark's zips of pyspark and py4j dropped only where they are the
installed package's own, on real directories and files."""

from __future__ import annotations

import zipfile
from pathlib import Path

from neardup.runtime.pydaemon import without_spark_zips


def _package(root: Path, name: str) -> Path:
    (root / name).mkdir(parents=True)
    (root / name / "__init__.py").write_text("")
    return root / name


def _zip(path: Path) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("pyspark/__init__.py", "")
    return str(path)


def test_the_packages_own_zips_leave_the_path(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    pyspark = _package(site, "pyspark")
    _package(site, "py4j")
    own = [_zip(pyspark / "python/lib/pyspark.zip"), _zip(pyspark / "python/lib/py4j-src.zip")]
    elsewhere = _zip(tmp_path / "spark-dist/python/lib/pyspark.zip")
    stdlib = _zip(tmp_path / "python311.zip")
    path = [*own, elsewhere, str(site), stdlib]
    assert without_spark_zips(path) == [elsewhere, str(site), stdlib]


def test_the_zips_stay_where_the_package_cannot_replace_them(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    pyspark = _package(site, "pyspark")
    own = [_zip(pyspark / "python/lib/pyspark.zip"), _zip(pyspark / "python/lib/py4j-src.zip")]
    # No py4j beside pyspark: the zip's is the only one.
    assert without_spark_zips([*own, str(site)]) == [*own, str(site)]
    # No pyspark package at all (a Spark distribution's zips only).
    assert without_spark_zips([*own, str(tmp_path / "empty")]) == [*own, str(tmp_path / "empty")]
