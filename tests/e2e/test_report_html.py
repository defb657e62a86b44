"""report.html of the README's first command, as a browser shows it: headless Chromium
(Debian's package, /usr/bin/chromium) loads the page from disk, dumps its DOM and takes a
screenshot. The tables are compared with report.json and with clusters/ and the input
counted here in plain Python; the page must make no request."""

from __future__ import annotations

import base64
import gzip
import json
import os
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from cli_process import SAMPLE, neardup

from neardup.report.summary import TEXT_CHARS
from report_dom import Node, external_references, parse, sample_pairs

CHROMIUM = os.environ.get("NEARDUP_CHROMIUM", "/usr/bin/chromium")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _chromium(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    if not Path(CHROMIUM).exists():
        # .ci/run installs it: there its absence is a failure, not a skip.
        message = f"{CHROMIUM} is not installed (apt-get install chromium)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    profile = tmp / f"profile-{len(list(tmp.glob('profile-*')))}"  # a fresh one per start
    profile.mkdir()
    return subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture(scope="module")
def page(
    sample_run: tuple[Path, subprocess.CompletedProcess[str]], tmp_path_factory: pytest.TempPathFactory
) -> dict:
    out, proc = sample_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    tmp = tmp_path_factory.mktemp("chromium")
    url = (out / "report.html").as_uri()
    dumped = _chromium(tmp, "--dump-dom", url)
    assert dumped.returncode == 0 and "</html>" in dumped.stdout, dumped.stderr[-3000:]
    shot = tmp / "report.png"
    taken = _chromium(tmp, f"--screenshot={shot}", "--window-size=1280,4000", url)
    assert taken.returncode == 0 and shot.exists(), taken.stderr[-3000:]
    if target := os.environ.get("NEARDUP_REPORT_SCREENSHOT"):
        shutil.copyfile(shot, target)  # to look at it
    return {
        "out": out,
        "html": (out / "report.html").read_text("utf-8"),
        "dom": parse(dumped.stdout),
        "report": json.loads((out / "report.json").read_text()),
        "shot": shot,
    }


def _table(root: Node, ident: str) -> list[list[str]]:
    table = root.by_id(ident)
    assert table is not None and table.tag == "table", ident
    return table.table_rows()


def _input_texts() -> dict[int, str]:
    with gzip.open(SAMPLE, "rt", encoding="utf-8") as f:
        return {d["id"]: d["text"] for d in map(json.loads, f)}


def _in_dom(text: str) -> str:
    """Text as the page's DOM holds it: CR LF and CR are LF in HTML, and the page shows
    control characters other than tab and line breaks (a licence's form feeds) as U+FFFD."""
    return re.sub(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]", "\ufffd", re.sub(r"\r\n?", "\n", text))


def test_tables_match_report_json_and_clusters(page: dict) -> None:
    root, report = page["dom"], page["report"]
    counts = {k: v for k, v in report["counts"].items() if v is not None}
    assert {r[0]: int(r[2].replace(",", "")) for r in _table(root, "counts-table")} == counts
    assert [r[0] for r in _table(root, "counts-table")] == list(counts)
    seconds = {r[0]: float(r[1].replace(",", "")) for r in _table(root, "seconds-table")}
    assert seconds == {k: round(v, 1) for k, v in report["seconds"].items()}
    assert "report" in seconds

    # The ten largest clusters, counted here from clusters/: size desc, then kept id.
    rows = pq.read_table(page["out"] / "clusters").to_pylist()
    sizes = Counter(r["cluster_id"] for r in rows if r["cluster_id"] is not None)
    top = sorted(((k, n) for k, n in sizes.items() if n > 1), key=lambda kv: (-kv[1], kv[0]))[:10]
    shown = _table(root, "largest-table")
    assert [(int(r[1]), int(r[2])) for r in shown] == top
    assert [r[0] for r in shown] == [str(i) for i in range(1, 11)]
    texts = _input_texts()
    for r in shown:
        assert r[3].startswith(_in_dom(texts[int(r[1])][:200])), r[1]


def test_figures_have_titles(page: dict) -> None:
    figures = {f.attrs["id"]: f for f in page["dom"].find_all("figure")}
    want = {"fig-seconds", "fig-s-curve", "fig-similarity", "fig-sizes", "fig-removed-similarity"}
    assert set(figures) == want
    for ident, fig in figures.items():
        (img,) = fig.find_all("img")
        (caption,) = fig.find_all("figcaption")
        title = img.attrs.get("alt", "")
        assert title and caption.text().startswith(title), ident
        svg = base64.b64decode(img.attrs["src"].removeprefix("data:image/svg+xml;base64,")).decode()
        assert svg.lstrip().startswith("<?xml") and "<svg" in svg and "</svg>" in svg, ident
    assert "18 bands x 5 rows" in figures["fig-s-curve"].text()
    report = page["report"]
    # Every verified pair: verify's and the stars stage's (the sample's licences make stars).
    candidates, further = report["counts"]["verified_pairs"], report["stars"]["verified_pairs"]
    caption = f"({candidates + further:,} pairs: {candidates:,} of the candidates and {further:,} of further"
    assert further and caption in figures["fig-similarity"].text()
    rows = pq.read_table(page["out"] / "clusters").to_pylist()
    scored = sum(1 for r in rows if not r["kept"] and r["similarity"] is not None)
    assert f"({scored:,} removed documents;" in figures["fig-removed-similarity"].text()


def test_samples_show_kept_and_removed_texts(page: dict) -> None:
    rows = {r["id"]: r for r in pq.read_table(page["out"] / "clusters").to_pylist()}
    texts = _input_texts()
    samples = sample_pairs(page["dom"])
    assert len(samples) == page["report"]["config"]["report"]["sample_clusters"]
    for heading, pairs in samples:
        kept = int(re.match(r"Cluster of (\d+): (\d+) documents", heading).group(1))  # type: ignore[union-attr]
        size = sum(1 for r in rows.values() if r["cluster_id"] == kept)
        assert heading.startswith(f"Cluster of {kept}: {size} documents") and rows[kept]["kept"]
        assert 1 <= len(pairs) <= min(3, size - 1)
        for p in pairs:
            removed = int(p.removed_header.split()[2])
            assert rows[removed]["cluster_id"] == kept and not rows[removed]["kept"]
            assert p.removed_header.startswith(rows[removed]["status"].replace("_", " "))
            # The texts up to the page's cut and a note of it, the differing words marked.
            for text, shown in ((texts[kept], p.kept_text), (texts[removed], p.removed_text)):
                cut = len(text) > TEXT_CHARS
                note = f" … (first {TEXT_CHARS:,} of {len(text):,} characters)" if cut else ""
                assert shown == _in_dom(text[:TEXT_CHARS]) + note
            kept_cut, removed_cut = texts[kept][:TEXT_CHARS], texts[removed][:TEXT_CHARS]
            assert all(w in _in_dom(kept_cut).split() for d in p.deleted for w in d.split())
            assert all(w in _in_dom(removed_cut).split() for i in p.inserted for w in i.split())
            # Marks where the shown words differ (a near duplicate's may differ past the cut only).
            assert bool(p.deleted or p.inserted) == (kept_cut.split() != removed_cut.split())


def test_guard_section_shows_report_json_s_guard(page: dict) -> None:
    guard = page["report"]["guard"]
    status = page["dom"].by_id("guard-status")
    assert guard["enabled"] and status is not None
    assert status.text() == (
        f"guard on at threshold {guard['threshold']}: {guard['clusters_split']:,} clusters split, "
        f"{guard['documents_rehomed']:,} documents re-homed"
    )
    shown = {r[0]: r[2] for r in _table(page["dom"], "guard-table")}
    assert list(shown) == list(guard)
    for key, value in guard.items():
        if isinstance(value, bool):
            assert shown[key] == ("yes" if value else "no"), key
        elif isinstance(value, int):
            assert int(shown[key].replace(",", "")) == value, key
        elif isinstance(value, float):
            assert abs(float(shown[key].replace(",", "")) - value) < 0.01, key
        elif isinstance(value, list):
            assert shown[key] == ", ".join(f"{v:,}" for v in value), key


def test_the_page_makes_no_request(page: dict) -> None:
    html = page["html"]
    assert external_references(parse(html)) == [] and external_references(page["dom"]) == []
    # No address in any tag or style outside the SVGs' base64 (whose XML namespaces are names,
    # not requests). The documents' own text may name addresses (licences do): text, not links.
    markup = re.findall(r"<style>.*?</style>|<[^>]*>", re.sub(r"base64,[A-Za-z0-9+/=]+", "", html), re.S)
    assert not [m for m in markup if re.search(r"(?i)(https?:)?//[a-z0-9]", m)]
    for src in re.findall(r'src="data:image/svg\+xml;base64,([^"]+)"', html):
        svg = base64.b64decode(src).decode()
        assert not re.search(r'href="(?!#)', svg) and "url(http" not in svg


def test_screenshot_shows_the_page(page: dict) -> None:
    from PIL import Image  # matplotlib's own dependency

    with Image.open(page["shot"]) as im:
        assert im.size == (1280, 4000)
        dark = sum(im.convert("L").resize((64, 200)).histogram()[:160])
    # Text, tables and charts: a blank or unstyled error page would have next to no ink.
    assert dark > 200, dark


def test_without_matplotlib_the_job_stops_before_it_starts(tmp_path: Path) -> None:
    shadow = tmp_path / "shadow" / "matplotlib"  # first on the path: `import matplotlib` fails
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('hidden by the test')\n")
    out = tmp_path / "out"
    proc = neardup(
        "dedup", "--input", str(SAMPLE), "--output", str(out), env={"PYTHONPATH": str(shadow.parent)}
    )
    errors = [line for line in proc.stderr.splitlines() if line.startswith("neardup: error:")]
    assert proc.returncode == 2 and len(errors) == 1, proc.stderr[-2000:]
    assert "report.html needs matplotlib" in errors[0] and "report.html=false" in errors[0]
    assert "Traceback" not in proc.stderr and "stage read" not in proc.stderr and not out.exists()
