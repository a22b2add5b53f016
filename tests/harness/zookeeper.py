"""A real ZooKeeper server for tests: Debian's 3.8 jars, standalone, on 127.0.0.1 and a free port.

The server runs in the foreground as `QuorumPeerMain` with a small zoo.cfg
and its data in a directory the caller owns, is ready when it answers the
four-letter word `ruok` with `imok`, and is stopped by PID.  Its data
directory survives `stop()`, so `restart()` brings back the same tree and
the same sessions (a client that reconnects within its session timeout
keeps its ephemeral nodes): that is how tests exercise a ZooKeeper outage.

`serverset_members` reads a ServerSet path as a Finagle client does.

`expire_session` ends a kazoo client's session from the server side, the
way kazoo's own test suite does: a second client attaches to the same
session id and password and closes it, so the first client sees LOST.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kazoo.exceptions import NoNodeError

from tests.harness.procs import REPO, free_port, stop, wait_for

JAVA_DIR = Path("/usr/share/java")
ZOOKEEPER_JAR = JAVA_DIR / "zookeeper.jar"
#: zookeeper.jar's manifest names its own dependencies; slf4j-simple gives its logs somewhere to go.
CLASSPATH = [ZOOKEEPER_JAR, JAVA_DIR / "slf4j-simple.jar"]
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"

#: A short tick lets tests use session timeouts of a few seconds (ZooKeeper allows 2 to 20 ticks
#: by default; the maximum is raised so daemons' production-like timeouts are accepted too).
TICK_MS = 250


def ensure_installed() -> None:
    """Install the Debian package through the project script if the jar is missing."""
    if ZOOKEEPER_JAR.exists():
        return
    subprocess.run([str(REPO / "scripts" / "ensure_system_packages.sh")], check=True)
    if not ZOOKEEPER_JAR.exists():
        raise RuntimeError(f"{ZOOKEEPER_JAR} is still missing after ensure_system_packages.sh")


def four_letter_word(port: int, word: str, timeout: float = 1.0) -> str:
    """Send a ZooKeeper four-letter command (ruok, srvr) and return the whole answer ('' on error)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
            sock.sendall(word.encode())
            chunks = []
            while chunk := sock.recv(4096):
                chunks.append(chunk)
            return b"".join(chunks).decode(errors="replace")
    except OSError:
        return ""


class ZooKeeperServer:
    """One standalone ZooKeeper process; `hosts` is the kazoo connection string."""

    def __init__(self, base_dir: Path, port: int | None = None) -> None:
        self.base_dir = base_dir
        self.port = port if port is not None else free_port()
        self.data_dir = base_dir / "data"
        self.log_path = base_dir / "zookeeper.log"
        self._proc: subprocess.Popen[str] | None = None

    @property
    def hosts(self) -> str:
        """`127.0.0.1:<port>`, what kazoo and the daemons' `zk_servers` take."""
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        """The server's PID while it runs."""
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    def _write_config(self) -> Path:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        cfg = self.base_dir / "zoo.cfg"
        cfg.write_text("\n".join([
            f"tickTime={TICK_MS}",
            f"dataDir={self.data_dir}",
            f"clientPort={self.port}",
            "clientPortAddress=127.0.0.1",
            "maxSessionTimeout=60000",
            "admin.enableServer=false",
            "4lw.commands.whitelist=ruok,srvr,stat",
            "maxClientCnxns=200",
            "",
        ]))
        return cfg

    def ruok(self) -> bool:
        """True when the server answers `imok`."""
        return four_letter_word(self.port, "ruok") == "imok"

    def start(self, timeout: float = 30.0) -> None:
        """Start the server (no-op if it runs) and wait until it is serving."""
        if self.pid is not None:
            return
        ensure_installed()
        cfg = self._write_config()
        java = shutil.which("java") or "/usr/bin/java"
        log = self.log_path.open("a")
        cmd = [java, "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
               "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
               "-Dzookeeper.jmx.log4j.disable=true",
               "-cp", os.pathsep.join(str(p) for p in CLASSPATH), MAIN_CLASS, str(cfg)]
        self._proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, text=True,
                                      cwd=self.base_dir, start_new_session=True)
        log.close()
        proc = self._proc
        try:
            wait_for(lambda: proc.poll() is not None or self._serving(), timeout,
                     f"ZooKeeper on {self.hosts}")
        except AssertionError:
            self.stop()
            raise
        if proc.poll() is not None:
            raise RuntimeError(f"ZooKeeper exited with {proc.returncode}: {self.log_tail()}")

    def _serving(self) -> bool:
        # `ruok` answers before the server accepts sessions; `srvr` only once it serves.
        return self.ruok() and "Mode:" in four_letter_word(self.port, "srvr")

    def stop(self) -> None:
        """Stop the server by PID (SIGTERM, then SIGKILL); keeps the data directory."""
        if self._proc is not None:
            stop(self._proc, timeout=10)
            self._proc = None

    def kill(self) -> None:
        """Crash the server by PID (SIGKILL: no clean shutdown); keeps the data directory,
        so `start()` brings back the same tree and unexpired sessions."""
        if self._proc is not None:
            stop(self._proc, signal.SIGKILL, timeout=10)
            self._proc = None

    def restart(self, timeout: float = 30.0) -> None:
        """Stop and start again on the same port with the same data."""
        self.stop()
        self.start(timeout)

    def log_tail(self, lines: int = 30) -> str:
        """The last lines of the server's log, for failure messages."""
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def expire_session(client: Any, hosts: str, timeout: float = 10.0) -> None:
    """Expire `client`'s ZooKeeper session from the server side and wait until it sees LOST.

    `client` is a started `kazoo.client.KazooClient`; it reconnects by itself
    afterwards with a new session (kazoo's default), as a daemon would.
    """
    from kazoo.client import KazooClient, KazooState

    lost: list[bool] = []

    def listener(state: str) -> None:
        if state == KazooState.LOST:
            lost.append(True)

    client.add_listener(listener)
    try:
        twin = KazooClient(hosts=hosts, client_id=client.client_id, timeout=timeout)
        twin.start(timeout)
        twin.stop()
        twin.close()
        wait_for(lambda: bool(lost), timeout, "the kazoo client to see its session expire")
    finally:
        client.remove_listener(listener)


@contextlib.contextmanager
def running_zookeeper(base_dir: Path) -> Iterator[ZooKeeperServer]:
    """A started server in `base_dir`, stopped by PID on exit."""
    server = ZooKeeperServer(base_dir)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def serverset_members(client: Any, path: str, prefix: str) -> dict[int, dict[str, Any]]:
    """shard -> member JSON (plus its node name under "node"), read as a ServerSet client does.

    A client lists the children, then reads each one; a member that leaves between the two
    (or a path removed after the listing) is simply not there, as for Finagle's client.
    """
    out: dict[int, dict[str, Any]] = {}
    try:
        children = client.get_children(path)
    except NoNodeError:
        return out
    for child in children:
        if not child.startswith(prefix):
            continue
        try:
            data, _ = client.get(f"{path}/{child}")
        except NoNodeError:
            continue
        doc = json.loads(data)
        doc["node"] = child
        out[int(doc["shard"])] = doc
    return out
