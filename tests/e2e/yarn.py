"""Hadoop's own minicluster: HDFS and YARN in one JVM, for the end-to-end tier's YARN tests.

`MiniHadoopClusterManager` (in hadoop-mapreduce-client-jobclient's test jar) is Hadoop's
documented command-line minicluster: a NameNode, a DataNode, a ResourceManager, NodeManagers
and a job history server in one JVM. Its jars come from Maven Central (`mvn`, into ~/.m2); the
classpath is built once per stamp of the artifact list and kept in the user's cache.

    python tests/e2e/yarn.py fetch     # the artifacts and the classpath (.ci/run's install part)

Choices, each for a reason seen here:
- Hadoop 3.5.0, the Hadoop pyspark 4.3 is built against (hadoop-client-api 3.5.0); its CLI
  minicluster starts on Java 17 without --add-opens (3.4.x's web apps do not).
- JUnit 5 (Hadoop 3.5.0's own version) and JUnit 4 on the classpath: the test jars' utilities
  load them, and a test jar's test-scoped dependencies are not transitive.
- Every port of the cluster is chosen free here and passed: `-rmport` alone leaves the
  scheduler, tracker, admin and web ports at their defaults (8030...), which a second cluster
  on the machine would collide with.
- Small containers: 128 MB minimum allocation, memory and virtual-memory checks off (the tests
  are not about YARN's enforcement, and a JVM's virtual size trips the ratio check).
- The disk check off but for 64 MB free: a shared disk over 90% full (a CI run saw it) made the
  node UNHEALTHY, and a submit waited in ACCEPTED until the test's timeout. A node that still
  comes up unhealthy fails the start, with its reason.
- The client's HADOOP_CONF_DIR is written here, a few site files: the minicluster's own dump
  (-writeConfig) holds its unresolved defaults, not the addresses it listens on.
- Containers run in sessions of their own (the NodeManager starts them with setsid) and outlive
  the cluster's JVM: `stop` kills every process whose working directory is under the cluster's
  directory, the JVM's process group last, and says which it had to kill.
"""

from __future__ import annotations

import contextlib
import getpass
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from short_jvm import SHORT_LIVED_JVM

HADOOP_VERSION = "3.5.0"
ARTIFACTS = [
    ("org.apache.hadoop", "hadoop-minicluster", HADOOP_VERSION, None),
    # MiniHadoopClusterManager is in the jobclient's test jar.
    ("org.apache.hadoop", "hadoop-mapreduce-client-jobclient", HADOOP_VERSION, "test-jar"),
    ("org.junit.jupiter", "junit-jupiter-api", "5.13.3", None),  # hadoop-project 3.5.0's version
    ("junit", "junit", "4.13.2", None),
]
MAIN_CLASS = "org.apache.hadoop.mapreduce.MiniHadoopClusterManager"
NODEMANAGERS = 1  # one node holds the application master and two executors: a start is shorter
NODE_MEMORY_MB = 6144  # what the node advertises; nothing enforces it (checks off)
START_TIMEOUT = 240  # seconds; 10-15 s here on 2 cores, longer on a loaded machine
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "neardup-tests"
# CI sets this: a minicluster whose artifacts cannot be had fails the tests instead of skipping.
REQUIRED_ENV = "NEARDUP_REQUIRE_YARN"


class Unavailable(Exception):
    """The minicluster's artifacts cannot be had here (no mvn, no Maven Central): a reason to
    skip, unless REQUIRED_ENV is set."""


class StartFailed(Exception):
    """The minicluster did not come up: the reason and its log's tail."""


def pom() -> str:
    deps = []
    for group, artifact, version, kind in ARTIFACTS:
        typed = f"<type>{kind}</type>" if kind else ""
        deps.append(
            f"<dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
            f"<version>{version}</version>{typed}</dependency>"
        )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>\n'
        "<groupId>neardup.tests</groupId><artifactId>minicluster</artifactId><version>1</version>\n"
        "<packaging>pom</packaging><dependencies>\n" + "\n".join(deps) + "\n</dependencies></project>\n"
    )


def classpath() -> str:
    """The minicluster's classpath: from the cache while every jar it names exists, else
    resolved by mvn (offline first, from ~/.m2; then from Maven Central) and cached."""
    where = CACHE / f"minicluster-{hashlib.sha256(pom().encode()).hexdigest()[:16]}"
    cached = where / "classpath.txt"
    if cached.exists():
        text = cached.read_text().strip()
        if text and all(Path(p).exists() for p in text.split(os.pathsep)):
            return text
    if shutil.which("mvn") is None:
        raise Unavailable("mvn is not on PATH: Hadoop's minicluster comes from Maven Central")
    where.mkdir(parents=True, exist_ok=True)
    (where / "pom.xml").write_text(pom())
    partial = where / f"classpath.{os.getpid()}.partial"
    log = where / "mvn.log"
    for offline in (["-o"], []):
        cmd = ["mvn", *offline, "-q", "-B", "dependency:build-classpath", f"-Dmdep.outputFile={partial}"]
        with open(log, "ab") as sink:
            proc = subprocess.run(cmd, cwd=where, stdout=sink, stderr=subprocess.STDOUT, timeout=1200)
        if proc.returncode == 0 and partial.exists():
            partial.replace(cached)  # whole or absent, even with two test sessions at once
            return cached.read_text().strip()
    tail = log.read_text(errors="replace")[-2000:]
    raise Unavailable(f"mvn could not resolve hadoop-minicluster {HADOOP_VERSION} ({log}):\n{tail}")


def free_ports(n: int) -> list[int]:
    """n distinct ports free on 127.0.0.1 now (held together while chosen)."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(n)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in socks]


def _site(path: Path, props: dict[str, str]) -> None:
    body = "".join(f"  <property><name>{k}</name><value>{v}</value></property>\n" for k, v in props.items())
    path.write_text(f'<?xml version="1.0"?>\n<configuration>\n{body}</configuration>\n')


def _cwd(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return ""


def _cwd_under(pid: int, root: Path) -> bool:
    where = _cwd(pid)
    return bool(where) and Path(where).is_relative_to(root)


def cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


@dataclass
class MiniCluster:
    root: Path  # everything of this cluster: its data, the containers' directories, logs
    conf_dir: Path  # HADOOP_CONF_DIR for clients
    fs: str  # hdfs://localhost:PORT
    webhdfs: str  # http://localhost:PORT/webhdfs/v1
    proc: subprocess.Popen[bytes]
    log: Path
    started_in: float  # seconds

    # --- processes ---------------------------------------------------------------------------

    def processes(self) -> list[int]:
        """Every live process of this cluster: the JVM and the containers (their working
        directories are under `root`), with their children (Python workers)."""
        pids = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]
        return [pid for pid in pids if pid != os.getpid() and _cwd_under(pid, self.root)]

    def app_processes(self, app_id: str) -> list[int]:
        """The live processes of an application's containers (their working directories are
        the containers')."""
        return [pid for pid in self.processes() if app_id in _cwd(pid)]

    def executor_jvms(self, app_id: str) -> dict[str, tuple[int, str]]:
        """Executor id -> (pid of its JVM, container id) for the application's live executors,
        from the containers' command lines."""
        found = {}
        for pid in self.processes():
            args = cmdline(pid)
            if "org.apache.spark.executor.YarnCoarseGrainedExecutorBackend" not in args:
                continue
            if args[args.index("--app-id") + 1] != app_id:
                continue
            (log_dir,) = (a for a in args if a.startswith("-Dspark.yarn.app.container.log.dir="))
            found[args[args.index("--executor-id") + 1]] = (pid, Path(log_dir).name)
        return found

    def _log_dirs(self) -> list[Path]:
        """The NodeManagers' log directories (each has a directory per application)."""
        return sorted(self.root.glob("run/target/test/data/*/yarn-*/*-logDir-nm-*"))

    def applications(self) -> set[str]:
        """The ids of the applications that have run a container so far."""
        return {p.name for d in self._log_dirs() for p in d.glob("application_*")}

    def driver_log(self, app_id: str) -> str:
        """A cluster-mode driver's output: its container's (the application master's, the
        first) stdout and stderr. The containers' logs stay where they ran (no aggregation)."""
        texts = []
        for d in self._log_dirs():
            for name in ("stdout", "stderr"):
                for f in d.glob(f"{app_id}/container_*_01_000001/{name}"):
                    texts.append(f.read_text(errors="replace"))
        return "\n".join(texts)

    def stop(self) -> list[str]:
        """Kill the containers' process groups, then the cluster's JVM's; wait until none is
        left. The command lines of the container processes that were still alive."""
        leftover = []
        for pid in self.processes():
            if pid == self.proc.pid:
                continue
            leftover.append(" ".join(cmdline(pid))[:200])
            with contextlib.suppress(OSError):
                os.killpg(os.getpgid(pid), signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=60)
        deadline = time.monotonic() + 30
        while (alive := self.processes()) and time.monotonic() < deadline:
            for pid in alive:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.2)
        assert not alive, f"processes of the minicluster outlived it: {alive}"
        return leftover

    # --- clients -----------------------------------------------------------------------------

    def env(self) -> dict[str, str]:
        """What a client (spark-submit, a Spark session, the Hadoop shell) needs."""
        return {"HADOOP_CONF_DIR": str(self.conf_dir), "SPARK_LOCAL_IP": "127.0.0.1"}

    def url(self, path: str) -> str:
        """hdfs://localhost:PORT/path."""
        return f"{self.fs}/{path.lstrip('/')}"

    # --- HDFS over WebHDFS (plain HTTP, no JVM) --------------------------------------------

    def _http(self, method: str, path: str, op: str, data: bytes | None = None, **params: str) -> Any:
        query = urllib.parse.urlencode({"op": op, "user.name": getpass.getuser(), **params})
        url = f"{self.webhdfs}/{path.lstrip('/')}?{query}"
        req = urllib.request.Request(url, data=data, method=method)
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.read()

    def put(self, local: Path, path: str) -> None:
        """A local file (or a directory's files, recursively) onto HDFS at `path`."""
        if local.is_dir():
            for child in sorted(local.iterdir()):
                self.put(child, f"{path}/{child.name}")
            return
        # Two steps, as WebHDFS writes: the NameNode names a DataNode, the data goes there.
        where = json.loads(self._http("PUT", path, "CREATE", noredirect="true", overwrite="true"))
        req = urllib.request.Request(where["Location"], data=local.read_bytes(), method="PUT")
        with urllib.request.urlopen(req, timeout=60):
            pass

    def list(self, path: str) -> dict[str, str]:
        """name -> type (FILE, DIRECTORY) of a directory's entries; {} if it does not exist."""
        try:
            listed = json.loads(self._http("GET", path, "LISTSTATUS"))
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return {}
            raise
        return {s["pathSuffix"]: s["type"] for s in listed["FileStatuses"]["FileStatus"]}

    def exists(self, path: str) -> bool:
        try:
            self._http("GET", path, "GETFILESTATUS")
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return False
            raise
        return True

    def read(self, path: str) -> bytes:
        return bytes(self._http("GET", path, "OPEN"))

    def get(self, path: str, local: Path) -> Path:
        """A file or directory of HDFS copied to `local`, recursively."""
        try:
            status = json.loads(self._http("GET", path, "GETFILESTATUS"))["FileStatus"]
        except urllib.error.HTTPError as e:
            if e.code == 404:
                raise FileNotFoundError(self.url(path)) from e
            raise
        if status["type"] == "FILE":
            local.parent.mkdir(parents=True, exist_ok=True)
            local.write_bytes(self.read(path))
            return local
        local.mkdir(parents=True, exist_ok=True)
        for name in self.list(path):
            self.get(f"{path}/{name}", local / name)
        return local


def start(root: Path, classpath_text: str) -> MiniCluster:
    """A minicluster under `root` (formatted afresh), ready when its NodeManagers are
    running (healthy); StartFailed with the log's tail if it does not get there."""
    run = root / "run"  # its working directory: MiniDFSCluster and MiniYARNCluster put data under it
    run.mkdir(parents=True)
    log = root / "minicluster.log"
    (root / "log4j.properties").write_text(
        "log4j.rootLogger=INFO,file\n"
        "log4j.appender.file=org.apache.log4j.FileAppender\n"
        f"log4j.appender.file.File={log}\n"
        "log4j.appender.file.layout=org.apache.log4j.PatternLayout\n"
        "log4j.appender.file.layout.ConversionPattern=%d{ISO8601} %p %c{1}: %m%n\n"
    )
    nn, nn_http, rm, sched, tracker, admin, rm_web, jhs, jhs_web, jhs_admin = free_ports(10)
    settings = {
        "yarn.resourcemanager.scheduler.address": f"localhost:{sched}",
        "yarn.resourcemanager.resource-tracker.address": f"localhost:{tracker}",
        "yarn.resourcemanager.admin.address": f"localhost:{admin}",
        "yarn.resourcemanager.webapp.address": f"localhost:{rm_web}",
        "mapreduce.jobhistory.webapp.address": f"localhost:{jhs_web}",
        "mapreduce.jobhistory.admin.address": f"localhost:{jhs_admin}",
        "yarn.minicluster.yarn.nodemanager.resource.memory-mb": str(NODE_MEMORY_MB),
        "yarn.scheduler.minimum-allocation-mb": "128",
        "yarn.scheduler.capacity.maximum-am-resource-percent": "0.5",
        "yarn.nodemanager.pmem-check-enabled": "false",
        "yarn.nodemanager.vmem-check-enabled": "false",
        # A disk over 90% full (CI's machines share theirs; once 89% here) makes the node
        # UNHEALTHY and every application waits in ACCEPTED for ever: the tests need megabytes.
        "yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage": "100.0",
        "yarn.nodemanager.disk-health-checker.min-free-space-per-disk-mb": "64",
    }
    cmd = ["java", "-Xmx768m", *SHORT_LIVED_JVM, f"-Dlog4j.configuration=file:{root / 'log4j.properties'}"]
    cmd += ["-cp", classpath_text, MAIN_CLASS, "-format", "-datanodes", "1"]
    cmd += ["-nodemanagers", str(NODEMANAGERS), "-nnport", str(nn), "-nnhttpport", str(nn_http)]
    cmd += ["-rmport", str(rm), "-jhsport", str(jhs), "-writeDetails", str(root / "details.json")]
    for k, v in settings.items():
        cmd += ["-D", f"{k}={v}"]
    began = time.monotonic()
    with open(root / "stdout.log", "wb") as out:
        # A session of its own: its process group is killed at the end, whatever it started.
        proc = subprocess.Popen(cmd, cwd=run, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    conf = root / "conf"
    conf.mkdir()
    webhdfs = f"http://localhost:{nn_http}/webhdfs/v1"
    cluster = MiniCluster(root, conf, f"hdfs://localhost:{nn}", webhdfs, proc, log, 0)
    try:
        _wait_ready(cluster, began)
    except BaseException:
        cluster.stop()
        raise
    cluster.started_in = time.monotonic() - began
    _site(conf / "core-site.xml", {"fs.defaultFS": cluster.fs})
    _site(conf / "hdfs-site.xml", {"dfs.replication": "1", "dfs.namenode.rpc-address": f"localhost:{nn}"})
    _site(
        conf / "yarn-site.xml",
        {
            "yarn.resourcemanager.hostname": "localhost",
            "yarn.resourcemanager.address": f"localhost:{rm}",
            **{k: v for k, v in settings.items() if k.startswith("yarn.resourcemanager.")},
            "yarn.scheduler.minimum-allocation-mb": "128",
        },
    )
    return cluster


def _wait_ready(cluster: MiniCluster, began: float) -> None:
    # A node registers, then the ResourceManager says whether it can run containers.
    running, unhealthy = "Node Transitioned from NEW to RUNNING", "Node Transitioned from NEW to UNHEALTHY"
    while True:
        code = cluster.proc.poll()
        if code is not None:
            raise StartFailed(_why(cluster, f"its JVM exited with status {code}"))
        written = (cluster.root / "details.json").exists() and cluster.log.exists()
        text = cluster.log.read_text(errors="replace") if cluster.log.exists() else ""
        if unhealthy in text:  # no container would ever start on it
            why = [ln for ln in text.splitlines() if "failed" in ln.lower() or "unhealthy" in ln.lower()]
            raise StartFailed(_why(cluster, "its NodeManager is UNHEALTHY: " + " | ".join(why[-3:])[:2000]))
        if written and text.count(running) >= NODEMANAGERS:
            return
        if time.monotonic() - began > START_TIMEOUT:
            raise StartFailed(_why(cluster, f"its NodeManagers were not running after {START_TIMEOUT} s"))
        time.sleep(0.5)


def _why(cluster: MiniCluster, reason: str) -> str:
    """One message: the reason, then the tail of the JVM's output and of its log."""
    parts = [f"Hadoop's minicluster did not start: {reason}."]
    for f in (cluster.root / "stdout.log", cluster.log):
        if f.exists():
            lines = f.read_text(errors="replace").splitlines()[-25:]
            parts.append(f"--- the tail of {f}:\n" + "\n".join(lines))
    return "\n".join(parts)


if __name__ == "__main__":
    if sys.argv[1:] != ["fetch"]:
        sys.exit(f"usage: {sys.argv[0]} fetch")
    try:
        entries = classpath().split(os.pathsep)
    except Unavailable as e:
        sys.exit(f"yarn.py: {e}")
    print(f"yarn.py: hadoop-minicluster {HADOOP_VERSION}, {len(entries)} jars", file=sys.stderr)
