"""report.html: what a run found, as one self-contained page.

`summary` holds the driver-side figures the Spark stage `neardup.stages.report` gathers;
`page.render` turns report.json's dict and that summary into HTML, with charts from
`charts` (matplotlib, SVG) and word diffs from `diff`. Nothing here imports pyspark.
"""
