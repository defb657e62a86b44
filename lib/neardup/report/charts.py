"""The report's charts: matplotlib figures saved as SVG.

Figures are made with `matplotlib.figure.Figure`, never pyplot: no backend is selected and
no global state changes, so rendering inside a notebook (Databricks) leaves the user's
matplotlib as it was. Text is drawn as paths (the page needs no font) and the SVG ids are
salted with a constant, so the same data gives the same bytes.
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, cast

import matplotlib
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullFormatter

from neardup.kernels.bands import candidate_probability
from neardup.report.summary import BINS, Histogram

COLOR = "#3b6ea5"
_MARGIN_LEFT, _MARGIN_RIGHT, _MARGIN_TOP, _MARGIN_BOTTOM = 0.95, 0.3, 0.4, 0.55
MARK = "#c0392b"
_RC = {
    "svg.fonttype": "path",
    "svg.hashsalt": "neardup-report",
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "axes.axisbelow": True,
    "grid.color": "#e3e3e3",
    "grid.linewidth": 0.6,
}


@contextmanager
def _style() -> Iterator[None]:
    # cast: matplotlib's stubs type rc keys as literals, which vary between its versions.
    with matplotlib.rc_context(cast(Any, _RC)):
        yield


def _new(width: float = 7.0, height: float = 3.0) -> tuple[Figure, Axes]:
    """A figure of one axes with fixed margins, in inches: wide enough for every label these
    charts draw (stage names, seven-digit counts, a rotated axis label). Constrained layout
    fitted them exactly, but its solver took 0.5 s of the 0.8 s the five charts took."""
    fig = Figure(figsize=(width, height))
    fig.subplots_adjust(
        left=_MARGIN_LEFT / width,
        right=1 - _MARGIN_RIGHT / width,
        top=1 - _MARGIN_TOP / height,
        bottom=_MARGIN_BOTTOM / height,
    )
    ax: Axes = fig.subplots()
    return fig, ax


def _svg(fig: Figure, title: str) -> bytes:
    out = io.BytesIO()
    fig.savefig(out, format="svg", metadata={"Title": title, "Date": None, "Creator": None})
    return out.getvalue()


def seconds_chart(seconds: Mapping[str, float], title: str) -> bytes:
    """Horizontal bars: wall seconds of each stage, in run order, top to bottom."""
    names = list(seconds)
    with _style():
        fig, ax = _new(height=0.9 + 0.24 * max(len(names), 1))
        ax.barh(range(len(names)), [seconds[n] for n in names], color=COLOR)
        ax.set_yticks(range(len(names)), names)
        ax.invert_yaxis()
        ax.set_xlabel("seconds")
        ax.grid(axis="y", visible=False)
        ax.set_title(title)
        return _svg(fig, title)


def s_curve_chart(bands: int, rows: int, threshold: float, verify_threshold: float, title: str) -> bytes:
    """P(candidate | s) = 1 - (1 - s^r)^b on a fine grid, the threshold marked with its P."""
    xs = np.linspace(0.0, 1.0, 501)
    with _style():
        fig, ax = _new()
        ax.plot(xs, candidate_probability(xs, bands, rows), color=COLOR, linewidth=1.8)
        p = float(candidate_probability(threshold, bands, rows))
        ax.axvline(
            threshold,
            color=MARK,
            linestyle="--",
            linewidth=1,
            label=f"lsh.threshold {threshold:g}: P = {p:.4f}",
        )
        ax.plot([threshold], [p], "o", color=MARK)
        if verify_threshold != threshold:
            ax.axvline(
                verify_threshold,
                color="#555555",
                linestyle=":",
                linewidth=1,
                label=f"verify.threshold {verify_threshold:g}",
            )
        # Upper left: the curve is near 0 there for any sensible threshold.
        ax.legend(loc="upper left", frameon=False)
        ax.set_xlim(0, 1)
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel("Jaccard similarity of a pair")
        ax.set_ylabel("P(the pair is a candidate)")
        ax.set_title(title)
        return _svg(fig, title)


def similarity_histogram(hist: Histogram, threshold: float | None, xlabel: str, title: str) -> bytes:
    """Bars of `hist` from the lowest non-empty bin or the threshold's, whichever is lower, to
    1; the threshold a dashed line (named in the figure's caption, as a legend would hide bars)."""
    width = 1.0 / BINS
    low_bins = [*hist.counts, BINS - 1]
    if threshold is not None:
        low_bins.append(min(int(threshold * BINS), BINS - 1))
    lo = min(low_bins)
    with _style():
        fig, ax = _new()
        bins = sorted(hist.counts)
        ax.bar(
            [b * width for b in bins],
            [hist.counts[b] for b in bins],
            width=width,
            align="edge",
            color=COLOR,
            edgecolor="white",
            linewidth=0.4,
        )
        if threshold is not None:
            ax.axvline(threshold, color=MARK, linestyle="--", linewidth=1.2)
        # One empty bin of margin on the left, so a line at the lowest bin stays visible.
        ax.set_xlim(max(lo - 1, 0) * width, 1.0)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("count")
        ax.set_title(title)
        return _svg(fig, title)


def sizes_chart(sizes: Mapping[int, int], title: str) -> bytes:
    """Clusters of each size on log-log axes; size 1 is the documents without a duplicate."""
    xs = sorted(sizes)
    with _style():
        fig, ax = _new()
        ax.plot(xs, [sizes[x] for x in xs], "o-", color=COLOR, markersize=5, linewidth=0.8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        # Plain numbers (1, 10, 100,000), not 10^5 or 1e+05; a few sizes are each labelled.
        plain = FuncFormatter(lambda v, _pos: f"{v:,.0f}" if v >= 1 else f"{v:g}")
        ax.yaxis.set_major_formatter(plain)
        ax.xaxis.set_major_formatter(plain)
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.xaxis.set_minor_formatter(NullFormatter())
        if len(xs) <= 12:
            ax.set_xticks(xs, [f"{x:,}" for x in xs])
        if xs:
            ax.set_xlim(0.8, max(xs) * 1.25)
            ax.set_ylim(0.8, max(sizes.values()) * 1.5)
        ax.set_xlabel("cluster size (documents)")
        ax.set_ylabel("clusters")
        ax.set_title(title)
        return _svg(fig, title)
