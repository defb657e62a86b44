"""report.html: what a run found, as one self-contained page.

`summary` holds the driver-side figures the Spark stage `neardup.stages.report_figures` gathers;
`page.render` turns report.json's dict and that summary into HTML, with charts from
`charts` (matplotlib, SVG) and word diffs from `diff`. Nothing here imports pyspark.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from neardup.errors import UsageError

if TYPE_CHECKING:
    from neardup.config import Config


def check_renderer(cfg: Config) -> None:
    """report.html is drawn with matplotlib on the driver: say so before any work, not after."""
    if not cfg.report.html:
        return
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UsageError(
            "report.html needs matplotlib on the driver: pip install matplotlib, or --set report.html=false"
        ) from None
