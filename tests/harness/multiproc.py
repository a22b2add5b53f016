"""A multi-process cluster for integration tests: each daemon its own `peloton <daemon>`.

Every process binds 127.0.0.1 on a free port, shares one SQLite file
(created up front, so no two processes race to create the schema) and, with
a ZooKeeper, elects leaders under a root of the test's own.  Job managers lead alone
with standbys here (`jobmgr.partitions: 0`, what these failover tests exercise) unless a
test passes its own `jobmgr` section (the all-active members' tests do); the product's
default with ZooKeeper is members of 64 partitions.  Processes are
stopped by PID (SIGTERM, or SIGKILL for crash tests); task processes the
agents started are killed at the end.  The CLI runs with `-z`, so it finds
every leader the way an operator's would.  Without a ZooKeeper each role's
first process gets a port chosen up front, which the others' `peers` section
and the CLI's -m/-v/-u name.
"""

from __future__ import annotations

import os
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml

from peloton.common.leader import LeaderId, leader_path
from peloton.storage import StoreOptions, open_store
from tests.harness.cluster import _kill_sandbox_processes
from tests.harness.procs import PELOTON, OutputTail, free_port, stop

READY_TIMEOUT = 30.0
ROLES = {"jobmgr": "jobmanager", "resmgr": "resourcemanager", "hostmgr": "hostmanager"}


@dataclass
class Daemon:
    """One daemon process."""

    role: str
    name: str
    port: int
    proc: subprocess.Popen[str]
    tail: OutputTail

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def log(self) -> str:
        return "\n".join(self.tail.lines)


class MultiCluster:
    """Daemons, agents and the CLI of one cluster; see the module docstring."""

    def __init__(self, base: Path, zk: str = "", root: str = "/peloton",
                 session_timeout: float = 3.0, store_url: str = "",
                 jobmgr_partitions: int = 0) -> None:
        self.base = base
        self.jobmgr_partitions = jobmgr_partitions
        self.zk = zk
        self.root = root
        self.session_timeout = session_timeout
        self.db = base / "state.db"
        #: Every daemon's store: the shared SQLite file, or `store_url` (e.g. a PostgreSQL
        #: database the test owns, so it can kill and restart the server mid-test).
        self.store_url = store_url or f"sqlite:///{self.db}"
        store = open_store(self.store_url, StoreOptions(bootstrap=True))
        store.close()
        self.daemons: list[Daemon] = []
        self.agents: list[subprocess.Popen[str]] = []
        #: The port of each role's first process (what `peers` and the CLI use without ZooKeeper).
        self.ports = {role: free_port() for role in ("jobmgr", "resmgr", "hostmgr", "placement")}

    def config(self, role: str, name: str, port: int, **sections: object) -> Path:
        """Write one daemon's YAML config."""
        doc: dict[str, object] = {
            "grpc": {"host": "127.0.0.1", "port": port},
            "storage": {"url": self.store_url},
            "peers": {"call_timeout": 10, "resmgr": [f"127.0.0.1:{self.ports['resmgr']}"],
                      "hostmgr": [f"127.0.0.1:{self.ports['hostmgr']}"]},
            "logging": {"level": "INFO"},
        }
        if self.zk:
            doc["election"] = {"zk_servers": [self.zk], "root": self.root,
                               "session_timeout": self.session_timeout}
        if role == "jobmgr":
            # A member's session is its own setting; the tests' sessions apply to both kinds.
            doc["jobmgr"] = {"partitions": self.jobmgr_partitions,
                             "member_session_timeout": self.session_timeout,
                             **dict(sections.pop("jobmgr", None) or {})}  # type: ignore[call-overload]
        if role == "hostmgr":
            doc["hostmgr"] = {"recovery_grace": 1.0}
            doc["agents"] = {"heartbeat_secs": 0.5, "heartbeat_timeout_secs": 5.0}
        doc.update(sections)
        path = self.base / f"{name}.yaml"
        path.write_text(yaml.safe_dump(doc))
        return path

    def spawn(self, role: str, name: str = "", args: tuple[str, ...] = (),
              **sections: object) -> Daemon:
        """Start `peloton <role> --config ... *args` (returns at once; `ready()` waits)."""
        name = name or role
        first = not any(d.role == role for d in self.daemons)
        port = self.ports[role] if first else free_port()
        config = self.config(role, name, port, **sections)
        proc = subprocess.Popen([PELOTON, role, "--config", str(config), *args], cwd=self.base,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"},
                                start_new_session=True)
        daemon = Daemon(role, name, port, proc, OutputTail(proc))
        self.daemons.append(daemon)
        return daemon

    @staticmethod
    def ready(*daemons: Daemon) -> None:
        """Wait until each daemon serves gRPC."""
        for daemon in daemons:
            daemon.tail.wait_for("serving gRPC on", READY_TIMEOUT)

    def agent(self, name: str, *args: str) -> subprocess.Popen[str]:
        """Start `peloton agent`, finding the host manager leader through ZooKeeper."""
        hostmgrs = ",".join(d.address for d in self.daemons if d.role == "hostmgr")
        cmd = [PELOTON, "agent", "--name", name, "--work-dir", str(self.base / "agents" / name),
               "--hostmgr", hostmgrs, "--cpus", "2", "--mem-mb", "2048", *args]
        if self.zk:
            cmd += ["--zkservers", self.zk, "--zkroot", self.root]
        proc = subprocess.Popen(cmd, cwd=self.base, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        OutputTail(proc).wait_for("serving on", READY_TIMEOUT)
        self.agents.append(proc)
        return proc

    def cli(self, *args: str, check: bool = True,
            timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """Run the `peloton` CLI, discovering the leaders in ZooKeeper (if there is one)."""
        if self.zk:
            where = ["-z", self.zk, "--zkroot", self.root]
        else:
            where = [f"--{flag}=127.0.0.1:{self.ports[role]}"
                     for flag, role in (("jobmgr", "jobmgr"), ("resmgr", "resmgr"),
                                        ("hostmgr", "hostmgr"))]
        cmd = [PELOTON, *where, "-t", "20s", *args]
        result = subprocess.run(cmd, cwd=self.base, capture_output=True, text=True,
                                timeout=timeout)
        if check and result.returncode != 0:
            raise AssertionError(f"{' '.join(args)} exited {result.returncode}:\n"
                                 f"{result.stdout}\n{result.stderr}\n" + self.logs())
        return result

    def leader(self, role: str) -> LeaderId | None:
        """The leader ID published for `role` (None when there is none)."""
        from kazoo.client import KazooClient

        zk = KazooClient(hosts=self.zk)
        zk.start(10)
        try:
            path = leader_path(self.root, ROLES[role])
            if zk.exists(path) is None:
                return None
            data, _ = zk.get(path)
            alive = [c for c in zk.get_children(path) if c.startswith("candidate_")]
            return LeaderId.from_json(data) if data and alive else None
        finally:
            zk.stop()
            zk.close()

    def kill9(self, daemon: Daemon) -> None:
        """Crash one daemon (no goodbye to ZooKeeper: its session must time out)."""
        stop(daemon.proc, signal.SIGKILL)

    def logs(self, lines: int = 25) -> str:
        """The last lines of every daemon's output, for failure messages."""
        return "\n".join(f"--- {d.name}\n" + "\n".join(d.tail.lines[-lines:])
                         for d in self.daemons)

    def close(self) -> None:
        """Stop agents, then daemons, then every task process."""
        for proc in self.agents:
            stop(proc, signal.SIGTERM, timeout=10)
        for daemon in reversed(self.daemons):
            stop(daemon.proc, signal.SIGTERM, timeout=10)
        _kill_sandbox_processes(self.base)
