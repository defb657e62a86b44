"""GraphFrames on the command line: the whole job from a local copy of its jars where no
repository can serve them (an air-gapped cluster), and the one line a run without its
Python package gets."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from cli_process import ROOT, SAMPLE, neardup

from brute_force import Result, read_result
from graphframes_env import graphframes_jars, need_graphframes
from neardup.runtime.packages import GRAPHFRAMES_VERSION

# Ivy settings whose only repository is a folder that does not exist: any package asked of
# spark.jars.packages fails to resolve, as on a cluster that reaches no repository (without
# them Spark would look in ~/.m2, where CI installs the jars, and on Maven Central).
NO_REPOSITORY = """<ivysettings>
  <settings defaultResolver="nowhere"/>
  <resolvers>
    <filesystem name="nowhere">
      <ivy pattern="/nonexistent/[organisation]/[module]/[revision]/ivy.xml"/>
      <artifact pattern="/nonexistent/[organisation]/[module]/[revision]/[artifact].[ext]"/>
    </filesystem>
  </resolvers>
</ivysettings>
"""


def test_whole_job_from_local_jars_gives_the_brute_force_clusters(
    chains_corpus: tuple[Path, Result], tmp_path: Path
) -> None:
    """`--set components.backend=graphframes` with GraphFrames' two jars on spark.jars (under
    names of the user's own) and no repository: neardup must not ask spark.jars.packages for
    them, and the clusters/ are the brute-force ones. The corpus is the tier's hundred
    documents of drifting chains (components of up to nine), not the sample: GraphFrames'
    rounds on the sample's graph took 103 s of CPU, twice a default run of it."""
    coordinate = need_graphframes()
    jars = []
    for i, jar in enumerate(graphframes_jars(coordinate)):
        jars.append(tmp_path / f"cluster-lib-{i}.jar")
        shutil.copyfile(jar, jars[-1])
    settings = tmp_path / "ivysettings.xml"
    settings.write_text(NO_REPOSITORY)
    inp, want = chains_corpus
    out = tmp_path / "gf"
    proc = neardup(
        "dedup",
        "--input",
        str(inp),
        "--output",
        str(out),
        "--set",
        "components.backend=graphframes",
        "--set",
        "report.html=false",
        "--conf",
        "spark.jars=" + ",".join(str(j) for j in jars),
        "--conf",
        f"spark.jars.ivySettings={settings}",
        "--conf",
        f"spark.jars.ivy={tmp_path / 'ivy'}",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "stage components" in proc.stderr and "components_backend=graphframes" in proc.stderr
    assert read_result(out) == want


def test_without_graphframes_py_one_line(tmp_path: Path) -> None:
    """A Python without GraphFrames' package: `--set components.backend=graphframes` ends
    with exit 2 and one line naming the extra to install, before any JVM starts. The Python
    is a virtual environment of its own whose site-packages links every entry of the test
    venv's but graphframes-py's (a copy would be an install of a minute)."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    theirs = Path(sysconfig.get_paths()["purelib"])
    (ours,) = (venv / "lib").glob("python3*/site-packages")
    for entry in theirs.iterdir():
        if not entry.name.startswith(("graphframes", "graphframes_py")):
            (ours / entry.name).symlink_to(entry)
    python = str(venv / "bin" / "python")
    check = subprocess.run([python, "-c", "import neardup, pyspark; import graphframes"], capture_output=True)
    assert b"No module named 'graphframes'" in check.stderr, check.stderr[-2000:]

    out = tmp_path / "out"
    args = ["dedup", "--input", str(SAMPLE), "--output", str(out), "--set", "components.backend=graphframes"]
    proc = subprocess.run(
        [python, "-m", "neardup", *args], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stderr.splitlines() == [
        f"neardup: error: components.backend=graphframes needs GraphFrames' Python package "
        f"(graphframes-py {GRAPHFRAMES_VERSION}), which is not installed: pip install 'neardup[graphframes]'"
    ]
    assert proc.stdout == "" and not out.exists()
