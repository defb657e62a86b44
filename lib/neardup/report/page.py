"""report.json's dict and the gathered `Summary` -> report.html, one self-contained page.

Everything the page shows is inline: the CSS below, the charts as SVG in data: URIs
(their ids stay apart, and an image cannot fetch anything), and every text escaped.
There is no script. Texts were capped when collected (`summary.TEXT_CHARS`), so the page
stays small whatever the documents' sizes.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping
from typing import Any

from neardup.report import charts
from neardup.report.diff import escape, word_diff
from neardup.report.summary import SNIPPET_CHARS, TEXT_CHARS, Cluster, Doc, Summary

COUNT_LABELS = {
    "input": "input rows",
    "malformed": "malformed lines",
    "rejected": "rejected",
    "exact_duplicates": "exact duplicates (removed)",
    "signed": "signed documents",
    "candidate_pairs": "candidate pairs (LSH)",
    "verified_pairs": "verified pairs",
    "clustered": "documents in clusters (exact copies counted once)",
    "clusters": "clusters of duplicates",
    "largest_cluster": "largest cluster",
    "near_duplicates": "near duplicates (removed)",
    "unique": "unique documents",
    "kept": "kept documents",
    "matched_index": "removed in favour of indexed documents (--against)",
}
GUARD_LABELS = {
    "enabled": "enabled",
    "threshold": "threshold",
    "rounds": "rounds",
    "failing_per_round": "documents below the threshold, per round",
    "scored_pairs": "pairs scored afresh",
    "clusters_split": "clusters split",
    "documents_rehomed": "documents re-homed",
    "released": "released (kept alone after the last round)",
    "largest_cluster_before": "largest cluster before",
    "largest_cluster_after": "largest cluster after",
    "seconds": "seconds",
}

CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, Arial, sans-serif;
       color: #222; margin: 0 auto; padding: 0 24px 48px; max-width: 1200px; }
h1 { font-size: 22px; margin: 24px 0 4px; }
h2 { font-size: 18px; margin: 32px 0 8px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
h3 { font-size: 15px; margin: 20px 0 6px; }
.meta, .note { color: #555; }
nav a { margin-right: 12px; color: #3b6ea5; }
code { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 13px; }
table { border-collapse: collapse; margin: 8px 0; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f4f4f4; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.row { display: flex; flex-wrap: wrap; gap: 24px; align-items: flex-start; }
figure { margin: 8px 0; }
figure img { width: 100%; max-width: 720px; height: auto; display: block; }
figcaption { color: #555; font-size: 13px; }
td.snippet { max-width: 760px; }
.pair { display: grid; grid-template-columns: 1fr 1fr; gap: 12px; margin: 6px 0 14px; }
.doc { border: 1px solid #ddd; border-radius: 4px; min-width: 0; }
.doc h4 { margin: 0; padding: 4px 8px; font-size: 13px; background: #f4f4f4; font-weight: 600; }
.text { white-space: pre-wrap; overflow-wrap: anywhere; padding: 6px 8px; max-height: 18em;
        overflow: auto; font-size: 13px; }
del { background: #fbd3d0; text-decoration: line-through; }
ins { background: #cdeccf; text-decoration: none; }
.cut { color: #888; font-style: italic; }
pre.config { background: #f7f7f7; padding: 8px; overflow: auto; font-size: 12px; }
"""


def _num(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, list | tuple):
        return ", ".join(_num(x) for x in v)
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        return f"{v:,.3f}".rstrip("0").rstrip(".") if v != int(v) else f"{v:,.1f}"
    return escape(str(v))


def _figure(fig_id: str, svg: bytes, title: str, caption: str = "") -> str:
    data = base64.b64encode(svg).decode("ascii")
    text = escape(title) + (f" {escape(caption)}" if caption else "")
    return (
        f'<figure id="{fig_id}"><img src="data:image/svg+xml;base64,{data}" alt="{escape(title)}">'
        f"<figcaption>{text}</figcaption></figure>"
    )


def _table(table_id: str, head: list[str], rows: list[list[str]], numeric: set[int], wide: int = -1) -> str:
    """A table; columns in `numeric` right-aligned, column `wide` a text column."""

    def cell(i: int, c: str) -> str:
        cls = "num" if i in numeric else "snippet" if i == wide else ""
        return f'<td class="{cls}">{c}</td>' if cls else f"<td>{c}</td>"

    th = "".join(f"<th>{h}</th>" for h in head)
    body = "".join("<tr>" + "".join(cell(i, c) for i, c in enumerate(r)) + "</tr>" for r in rows)
    return f'<table id="{table_id}"><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>'


def _cut_note(doc: Doc, shown: int) -> str:
    if doc.chars <= shown:
        return ""
    return f'<span class="cut"> … (first {shown:,} of {doc.chars:,} characters)</span>'


def _counts(report: Mapping[str, Any]) -> str:
    counts = report.get("counts") or {}
    rows = [
        [f"<code>{escape(k)}</code>", escape(COUNT_LABELS.get(str(k), str(k))), _num(v)]
        for k, v in counts.items()
        if v is not None
    ]
    return _table("counts-table", ["key", "what", "count"], rows, {2})


def _seconds(report: Mapping[str, Any]) -> tuple[str, dict[str, float]]:
    seconds = {k: float(v) for k, v in (report.get("seconds") or {}).items()}
    rows = [[f"<code>{escape(k)}</code>", f"{v:,.1f}"] for k, v in seconds.items()]
    stages = {k: v for k, v in seconds.items() if k != "total"}
    return _table("seconds-table", ["stage", "seconds"], rows, {1}), stages


def _largest(summary: Summary) -> str:
    if not summary.largest:
        return '<p class="note">No clusters of duplicates.</p>'
    rows = []
    for rank, c in enumerate(summary.largest, 1):
        text = c.kept.text
        snippet = (
            '<span class="cut">(text not found)</span>'
            if text is None
            else escape(text[:SNIPPET_CHARS]) + _cut_note(c.kept, min(SNIPPET_CHARS, len(text)))
        )
        rows.append([str(rank), f"<code>{escape(str(c.kept.id))}</code>", _num(c.size), snippet])
    return _table("largest-table", ["#", "kept id", "size", "kept text (start)"], rows, {0, 2}, wide=3)


def _doc_header(label: str, doc: Doc) -> str:
    size = "text not found" if doc.text is None else f"{doc.chars:,} characters"
    sim = "" if doc.similarity is None else f", similarity {doc.similarity:.3f}"
    return f"<h4>{escape(label)} <code>{escape(str(doc.id))}</code> ({size}{sim})</h4>"


def _pair(kept: Doc, removed: Doc) -> str:
    # The stage collects at most TEXT_CHARS characters; cut here too, as the diff is quadratic.
    a, b = (None if d.text is None else d.text[:TEXT_CHARS] for d in (kept, removed))
    if a is None or b is None:
        left, right = (escape(t if t is not None else "(text not found)") for t in (a, b))
    else:
        left, right = word_diff(a, b)
    left += _cut_note(kept, len(a or ""))
    right += _cut_note(removed, len(b or ""))
    status = removed.status.replace("_", " ")
    return (
        f'<div class="pair"><div class="doc kept">{_doc_header("kept", kept)}{_text(left)}</div>'
        f'<div class="doc removed">{_doc_header(status, removed)}{_text(right)}</div></div>'
    )


def _text(body: str) -> str:
    # dir="auto": a right-to-left text reads right to left.
    return f'<div class="text" dir="auto">{body}</div>'


def _sample(n: int, c: Cluster) -> str:
    shown = len(c.removed)
    head = (
        f'<h3 id="sample-{n}">Cluster of <code>{escape(str(c.kept.id))}</code>: {c.size:,} documents'
        f"{f', {shown} removed shown' if shown < c.size - 1 else ''}</h3>"
    )
    return f'<article class="sample">{head}{"".join(_pair(c.kept, d) for d in c.removed)}</article>'


def _samples(report: Mapping[str, Any], summary: Summary) -> str:
    cfg = (report.get("config") or {}).get("report") or {}
    if not summary.samples:
        return (
            '<p class="note">No sample clusters (no clusters of duplicates, '
            "or report.sample_clusters is 0).</p>"
        )
    intro = (
        f'<p class="note">{len(summary.samples)} clusters chosen by <code>report.seed</code> = '
        f"{escape(str(cfg.get('seed')))}: the kept document beside each removed one shown. "
        "Words only in the kept text are <del>struck</del>, words only in the removed text "
        f"<ins>marked</ins>; texts are cut at {TEXT_CHARS:,} characters.</p>"
    )
    return intro + "".join(_sample(i, c) for i, c in enumerate(summary.samples, 1))


def _guard_status(guard: Any) -> str:
    """One sentence on whether the guard ran: report.json's `guard` is absent (a run without
    a guard), a reason it could not run, or its figures (enabled false: only scored)."""
    if not isinstance(guard, Mapping) or "rounds" not in guard:
        reason = guard.get("reason") if isinstance(guard, Mapping) else None
        return "guard not run" + (f": {reason}" if reason else "")
    if not guard.get("enabled"):
        return "guard off (guard.enabled: false): removed documents were scored, none split off"
    return (
        f"guard on at threshold {guard.get('threshold')}: {_num(guard.get('clusters_split', 0))} "
        f"clusters split, {_num(guard.get('documents_rehomed', 0))} documents re-homed"
    )


def _guard(report: Mapping[str, Any], summary: Summary, verify_t: float) -> str:
    guard = report.get("guard")
    parts = [f'<p id="guard-status" class="note">{escape(_guard_status(guard))}</p>']
    if isinstance(guard, Mapping) and "rounds" in guard:
        rows = [
            [f"<code>{escape(str(k))}</code>", escape(GUARD_LABELS.get(str(k), str(k))), _num(v)]
            for k, v in guard.items()
        ]
        parts.append(_table("guard-table", ["key", "what", "value"], rows, {2}))
    h = summary.removed_similarity
    if h is not None and h.total:
        title = "Removed documents' similarity to their kept document"
        line = guard.get("threshold") if isinstance(guard, Mapping) and guard.get("enabled") else None
        t = float(line) if line is not None else verify_t
        svg = charts.similarity_histogram(h, t, "Jaccard similarity to the kept document", title)
        missing = f"; {h.missing:,} without one" if h.missing else ""
        what = "guard.threshold" if line is not None else "verify.threshold"
        caption = f"({h.total:,} removed documents{missing}; dashed line: {what} {t:g})"
        parts.append(_figure("fig-removed-similarity", svg, title, caption))
    return "".join(parts)


def _section(sec_id: str, title: str, body: str) -> str:
    return f'<section id="{sec_id}"><h2>{escape(title)}</h2>{body}</section>'


def render(report: Mapping[str, Any], summary: Summary) -> str:
    """The whole page as a string."""
    cfg = report.get("config") or {}
    lsh = cfg.get("lsh") or {}
    threshold = float(lsh.get("threshold", 0.8))
    verify = cfg.get("verify") or {}
    verify_t = float(verify.get("threshold") or threshold)
    b, r = int(report["bands"]["bands"]), int(report["bands"]["rows"])

    counts_table = _counts(report)
    seconds_table, stages = _seconds(report)
    t_seconds = "Seconds per stage"
    fig_seconds = _figure("fig-seconds", charts.seconds_chart(stages, t_seconds), t_seconds)

    t_curve = f"S-curve: P(candidate) with {b} bands x {r} rows"
    fig_curve = _figure(
        "fig-s-curve",
        charts.s_curve_chart(b, r, threshold, verify_t, t_curve),
        t_curve,
        "(P(s) = 1 - (1 - s^r)^b; the dashed line is lsh.threshold)",
    )

    t_sim = "Similarity of verified pairs"
    h = summary.edge_similarity
    # The chart holds the further centres' edges too; the counts table's verified_pairs not.
    further = int((report.get("stars") or {}).get("verified_pairs") or 0)
    parts = f": {h.total - further:,} of the candidates and {further:,} of further centres" if further else ""
    unscored = f"; {h.missing:,} not scored (verify.method none)" if h.missing else ""
    caption = f"({h.total:,} pairs{parts}{unscored}; dashed line: verify.threshold {verify_t:g})"
    fig_sim = _figure(
        "fig-similarity",
        charts.similarity_histogram(h, verify_t, f"similarity ({verify.get('method', 'exact')})", t_sim),
        t_sim,
        caption,
    )

    t_sizes = "Cluster sizes (log-log)"
    fig_sizes = _figure(
        "fig-sizes",
        charts.sizes_chart(summary.sizes, t_sizes),
        t_sizes,
        "(number of clusters of each size; size 1: documents without a duplicate)",
    )

    sections: list[tuple[str, str, Callable[[], str]]] = [
        ("counts", "Counts", lambda: counts_table),
        ("seconds", "Seconds", lambda: f'<div class="row">{seconds_table}{fig_seconds}</div>'),
        ("s-curve", "LSH S-curve", lambda: fig_curve),
        ("similarity", "Verified similarities", lambda: fig_sim),
        ("sizes", "Cluster sizes", lambda: fig_sizes),
        ("largest", "The largest clusters", lambda: _largest(summary)),
        ("samples", "Sample clusters", lambda: _samples(report, summary)),
        ("guard", "Over-merge guard", lambda: _guard(report, summary, verify_t)),
    ]
    nav = "".join(f'<a href="#{sid}">{escape(title)}</a>' for sid, title, _ in sections)
    body = "".join(_section(sid, title, make()) for sid, title, make in sections)
    meta = (
        f"input <code>{escape(str(report.get('input')))}</code> · output "
        f"<code>{escape(str(report.get('output')))}</code> · neardup "
        f"{escape(str(report.get('neardup_version')))} · run {escape(str(report.get('run_id')))}"
    )
    config = escape(json.dumps(cfg, indent=2, sort_keys=True, default=str))
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>neardup report</title><style>{CSS}</style></head><body>"
        f'<h1>neardup report</h1><p class="meta">{meta}</p><nav>{nav}</nav>{body}'
        f'<section id="config"><h2>Configuration</h2><details><summary>resolved config (report.json)'
        f'</summary><pre class="config">{config}</pre></details></section>'
        "</body></html>\n"
    )
