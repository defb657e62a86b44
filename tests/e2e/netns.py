"""Hosts for cluster tests: Linux network namespaces joined by one bridge (iproute2, root).

Each host is a namespace with its own address, ports and loopback, so a process that
advertises the wrong address (localhost, the machine's own name) cannot be reached from
the others, as on a real network. The file system stays shared (`ip netns exec` changes
only the network), which stands for the shared storage a cluster reads and writes.

Everything made here is undone by `Network.close`, in reverse order, also after a setup
that failed half way; names carry a random tag so parallel runs never collide.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

NETNS_ETC = Path("/etc/netns")


def unsupported() -> str | None:
    """Why namespaces cannot be made here, or None."""
    if not sys.platform.startswith("linux"):
        return "network namespaces need Linux"
    if os.geteuid() != 0:
        return "network namespaces need root (ip netns add)"
    if shutil.which("ip") is None:
        return "iproute2 is not installed (no ip command)"
    return None


def _run(*argv: str) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, argv, proc.stdout, proc.stderr)
    return proc.stdout


def _remove(*argv: str) -> None:
    """Remove something that may not have been made (a setup that failed half way)."""
    subprocess.run(argv, capture_output=True, timeout=30, check=False)


def _free_subnet() -> str:
    """A 10.x.y /24 that no address or route of this machine uses yet."""
    used = _run("ip", "-4", "-o", "addr") + _run("ip", "-4", "route")
    for _ in range(100):
        prefix = f"10.{secrets.randbelow(150) + 100}.{secrets.randbelow(256)}"
        if not re.search(rf"\b{re.escape(prefix)}\.", used):
            return prefix
    raise RuntimeError("no free 10.x.y.0/24 subnet found")


def _die_with_parent() -> list[str]:
    """A prefix that makes the command get SIGTERM if the test process dies (even by
    SIGKILL), so no JVM outlives it unseen inside a namespace (util-linux's setpriv; the
    signal survives the execs of ip netns exec and spark-class)."""
    return ["setpriv", "--pdeathsig", "TERM"] if shutil.which("setpriv") else []


@dataclass(frozen=True)
class Host:
    namespace: str
    ip: str


class Network:
    """A bridge whose address (<subnet>.1) is this machine's side, and hosts behind it."""

    def __init__(self) -> None:
        self.tag = secrets.token_hex(3)
        self.subnet = _free_subnet()
        self.gateway = f"{self.subnet}.1"
        self.bridge = f"nd{self.tag}br"
        self.hosts: list[Host] = []
        self._undo = contextlib.ExitStack()
        self._procs: list[subprocess.Popen[bytes]] = []
        self._undo.callback(_remove, "ip", "link", "del", self.bridge)
        try:
            _run("ip", "link", "add", self.bridge, "type", "bridge")
            _run("ip", "addr", "add", f"{self.gateway}/24", "dev", self.bridge)
            _run("ip", "link", "set", self.bridge, "up")
        except BaseException:
            self.close()
            raise

    def add_host(self) -> Host:
        """A namespace with a veth pair into the bridge, at the next address; its names
        resolve through its own /etc/hosts only (no DNS server is reachable from it, and
        a lookup would wait for one)."""
        i = len(self.hosts)
        host = Host(f"neardup-{self.tag}-{i}", f"{self.subnet}.{i + 2}")
        outside, inside = f"nd{self.tag}h{i}", f"nd{self.tag}n{i}"
        etc = NETNS_ETC / host.namespace
        self._undo.callback(shutil.rmtree, etc, ignore_errors=True)
        etc.mkdir(parents=True)
        (etc / "nsswitch.conf").write_text("hosts: files\n")
        (etc / "hosts").write_text(f"127.0.0.1 localhost\n{host.ip} {socket.gethostname()}\n")
        self._undo.callback(_remove, "ip", "netns", "del", host.namespace)
        self._undo.callback(self._kill_namespace_processes, host.namespace)
        _run("ip", "netns", "add", host.namespace)
        _run("ip", "link", "add", outside, "type", "veth", "peer", "name", inside)
        _run("ip", "link", "set", inside, "netns", host.namespace)
        _run("ip", "link", "set", outside, "master", self.bridge)
        _run("ip", "link", "set", outside, "up")
        inns = ("ip", "netns", "exec", host.namespace, "ip")
        _run(*inns, "addr", "add", f"{host.ip}/24", "dev", inside)
        _run(*inns, "link", "set", inside, "up")
        _run(*inns, "link", "set", "lo", "up")
        self.hosts.append(host)
        return host

    def popen(self, host: Host, argv: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
        """Start `argv` inside `host`, its output to `log`; stopped by `close`."""
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [*_die_with_parent(), "ip", "netns", "exec", host.namespace, *argv],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        if not self._procs:
            self._undo.callback(self._stop_processes)
        self._procs.append(proc)
        return proc

    def _stop_processes(self) -> None:
        for p in reversed(self._procs):
            p.terminate()
        for p in self._procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def _kill_namespace_processes(self, namespace: str) -> None:
        """Whatever still runs in the namespace (executors, Python workers) would keep it
        alive after `ip netns del`: kill it by process id."""
        for _ in range(20):
            try:
                pids = [int(p) for p in _run("ip", "netns", "pids", namespace).split()]
            except subprocess.CalledProcessError:
                return
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.5)

    def close(self) -> None:
        self._undo.close()

    def __enter__(self) -> Network:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
