"""`peloton up --jobmgrs N`: a one-machine cluster of daemon processes with N job managers.

Where plain `peloton up` runs every daemon in one process, this runs each as its own
`peloton <daemon> --config FILE` process, as a real deployment does, so one machine can
show all-active job managers (docs/design/all-active-jobmgr.md): the resource manager,
the host manager, the placement engine, N job managers that are members of the job
partitions (`jobmgr.partitions`, member ids `jobmgr-1` ...), and the local agents (none
with a simulated host backend, `backend: sim:...`, which lives in the host manager).  They
find each other through ZooKeeper: the one given (`--zk`), else a standalone ZooKeeper
started here from the Debian jars (/usr/share/java/zookeeper.jar, `apt-get install
zookeeper`), its data under the data directory.

Configs and logs go to `<data dir>/procs/`.  Start order: ZooKeeper, resource and host
managers, placement, the job managers, then the agents; each daemon is waited for until
it serves.  Stop (Ctrl-C, SIGTERM) is the reverse, each process by PID with SIGTERM (a
job manager hands its partitions over before it exits), then SIGKILL after a grace.
The Aurora bridge and the web UI of plain `peloton up` are not run in this mode.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from peloton.core.errors import FailedPrecondition, InvalidArgument, Unavailable
from peloton.core.partitions import DEFAULT_PARTITIONS

#: How long a daemon may take to serve after it was started (seconds).
READY_TIMEOUT = 60.0
#: How long a process may take to exit after SIGTERM before it is killed (seconds).
STOP_GRACE = 15.0
ZOOKEEPER_JARS = (Path("/usr/share/java/zookeeper.jar"), Path("/usr/share/java/slf4j-simple.jar"))


@dataclass(frozen=True)
class ProcessesConfig:
    """What `peloton up --jobmgrs N` runs."""

    jobmgrs: int
    host: str = "127.0.0.1"
    #: The first job manager's port (the others': free ports), the resource and host
    #: managers' ports (0: free ports).
    jobmgr_port: int = 5392
    resmgr_port: int = 5394
    hostmgr_port: int = 5391
    store: str = ""
    data_dir: Path = Path(".peloton")
    agents: int = 1
    #: The host manager's backend (`peloton up --backend`): "local" (the agents above
    #: register with it) or e.g. "sim:10000:1:1" (simulated hosts inside the host manager
    #: process, for benchmarks; no agents are started then).
    backend: str = "local"
    #: ZooKeeper to use; empty: start one.
    zk: str = ""
    zk_root: str = "/peloton"
    partitions: int = DEFAULT_PARTITIONS
    session_timeout: float = 10.0


@dataclass
class _Proc:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path


@dataclass
class ProcessCluster:
    """The running processes, newest last; `start()` then `stop()`."""

    config: ProcessesConfig
    procs: list[_Proc] = field(default_factory=list)
    #: Where each daemon serves: name -> host:port.
    addresses: dict[str, str] = field(default_factory=dict)
    zk: str = ""

    def start(self) -> None:
        """Start everything in order (see the module docstring); on a failure stop what
        started and re-raise."""
        cfg = self.config
        if cfg.jobmgrs < 1:
            raise InvalidArgument("--jobmgrs must be at least 1", field="jobmgrs")
        base = (cfg.data_dir / "procs").resolve()
        base.mkdir(parents=True, exist_ok=True)
        store = cfg.store or f"sqlite:///{(cfg.data_dir / 'state.db').resolve()}"
        try:
            self.zk = cfg.zk or self._zookeeper(base)
            common = {"storage": {"url": store, "bootstrap": True},
                      "election": {"zk_servers": self.zk.split(","), "root": cfg.zk_root,
                                   "session_timeout": cfg.session_timeout},
                      "logging": {"level": "INFO"}}
            self._daemon(base, "resmgr", "resmgr", cfg.resmgr_port, common)
            self._daemon(base, "hostmgr", "hostmgr", cfg.hostmgr_port,
                         {**common, "backend": cfg.backend})
            self._daemon(base, "placement", "placement", 0, common)
            for i in range(1, cfg.jobmgrs + 1):
                name = f"jobmgr-{i}"
                self._daemon(base, "jobmgr", name, cfg.jobmgr_port if i == 1 else 0, {
                    **common, "jobmgr": {"partitions": cfg.partitions, "member_id": name}})
            for i in range(cfg.agents if cfg.backend.strip() == "local" else 0):
                self._agent(base, f"agent-{i}")
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop every process, newest first (SIGTERM, then SIGKILL after a grace)."""
        while self.procs:
            p = self.procs.pop()
            _terminate(p.proc)

    # -- the parts -------------------------------------------------------------------------
    def _spawn(self, base: Path, name: str, cmd: list[str]) -> _Proc:
        log = base / f"{name}.log"
        with log.open("ab") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=base,
                                    start_new_session=True,
                                    env={**os.environ, "PYTHONUNBUFFERED": "1"})
        started = _Proc(name, proc, log)
        self.procs.append(started)
        return started

    def _daemon(self, base: Path, role: str, name: str, port: int,
                sections: dict[str, object]) -> None:
        port = port or _free_port(self.config.host)
        doc: dict[str, object] = {"grpc": {"host": self.config.host, "port": port}, **sections}
        path = base / f"{name}.yaml"
        path.write_text(yaml.safe_dump(doc))
        started = self._spawn(base, name, [*_peloton(), role, "--config", str(path)])
        _wait_for_line(started, "serving gRPC on", READY_TIMEOUT)
        self.addresses[name] = f"{self.config.host}:{port}"

    def _agent(self, base: Path, name: str) -> None:
        cfg = self.config
        cmd = [*_peloton(), "agent", "--name", name, "--work-dir", str(base / "agents" / name),
               "--hostmgr", self.addresses["hostmgr"], "--zkservers", self.zk,
               "--zkroot", cfg.zk_root, "--kill-tasks-on-exit"]
        _wait_for_line(self._spawn(base, name, cmd), "serving on", READY_TIMEOUT)

    def _zookeeper(self, base: Path) -> str:
        missing = [str(j) for j in ZOOKEEPER_JARS if not j.exists()]
        java = shutil.which("java")
        if missing or java is None:
            raise FailedPrecondition(
                "--jobmgrs needs ZooKeeper: pass --zk H:P, or install ZooKeeper and Java "
                f"(apt-get install zookeeper; missing: {', '.join(missing) or 'java'})")
        port = _free_port("127.0.0.1")
        data = base / "zookeeper"
        data.mkdir(exist_ok=True)
        conf = base / "zoo.cfg"
        conf.write_text("\n".join([
            "tickTime=500", f"dataDir={data}", f"clientPort={port}",
            "clientPortAddress=127.0.0.1", "admin.enableServer=false",
            "4lw.commands.whitelist=ruok,srvr", "maxClientCnxns=200", ""]))
        zk = self._spawn(base, "zookeeper", [
            java, "-Xmx128m", "-XX:+UseSerialGC", "-cp",
            os.pathsep.join(str(j) for j in ZOOKEEPER_JARS),
            "org.apache.zookeeper.server.quorum.QuorumPeerMain", str(conf)])
        _wait(lambda: zk.proc.poll() is not None or "Mode:" in _four_letters(port, "srvr"),
              READY_TIMEOUT, "ZooKeeper")
        if zk.proc.poll() is not None:
            raise Unavailable(f"ZooKeeper exited with {zk.proc.returncode}; see {zk.log}")
        return f"127.0.0.1:{port}"


def run(config: ProcessesConfig, announce: Callable[[str], None] = print) -> None:
    """Start the cluster, serve until SIGINT/SIGTERM, then stop it."""
    cluster = ProcessCluster(config)
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set())
                for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        cluster.start()
        announce(f"peloton up: {config.jobmgrs} job managers "
                 f"({', '.join(cluster.addresses[f'jobmgr-{i}'] for i in range(1, config.jobmgrs + 1))}), "
                 f"resource manager {cluster.addresses['resmgr']}, host manager "
                 f"{cluster.addresses['hostmgr']}, ZooKeeper {cluster.zk} (root "
                 f"{config.zk_root}); logs in {(config.data_dir / 'procs').resolve()}")
        announce(f"peloton up: ready; try `peloton -z {cluster.zk} --zkroot {config.zk_root} "
                 "job list`")
        while not stop.wait(0.5):
            if any(p.proc.poll() is not None for p in cluster.procs):
                gone = [p.name for p in cluster.procs if p.proc.poll() is not None]
                announce(f"peloton up: {', '.join(gone)} exited; stopping (see its log)")
                break
    finally:
        cluster.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        announce("peloton up: stopped")


def _peloton() -> list[str]:
    """How to run the `peloton` command (the script beside this interpreter, else -m)."""
    script = Path(sys.executable).with_name("peloton")
    return [str(script)] if script.exists() else [sys.executable, "-m", "cli.entry"]


def _terminate(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(STOP_GRACE)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def _wait(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() >= deadline:
            raise Unavailable(f"{what} did not start within {timeout:.0f}s")
        time.sleep(0.1)


def _wait_for_line(p: _Proc, needle: str, timeout: float) -> None:
    def seen() -> bool:
        if p.proc.poll() is not None:
            raise Unavailable(f"{p.name} exited with {p.proc.returncode}; see {p.log}")
        return needle in p.log.read_text(errors="replace")

    _wait(seen, timeout, f"{p.name} (log: {p.log})")


def _free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _four_letters(port: int, word: str) -> str:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as sock:
            sock.sendall(word.encode())
            chunks = []
            while chunk := sock.recv(4096):
                chunks.append(chunk)
            return b"".join(chunks).decode(errors="replace")
    except OSError:
        return ""
