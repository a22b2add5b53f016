"""A real `peloton up` (and extra `peloton agent`s) in subprocesses, for end-to-end tests.

Every server binds 127.0.0.1 on free ports, lives in the test's temporary
directory and is stopped by PID (SIGTERM, or SIGKILL for crash tests).
The typed client and the CLI talk to it exactly as a user would.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from peloton.api.client import PelotonClient
from tests.harness import task_ports
from tests.harness.procs import PELOTON, OutputTail, free_port, stop

READY_TIMEOUT = 60.0
#: Fresh-port attempts of a first start whose port another process took meanwhile.
PORT_RETRIES = 2


class UpCluster:
    """One `peloton up` process plus optional separate agents."""

    def __init__(self, base: Path, *, agents: int = 1, extra: Sequence[str] = ()) -> None:
        self.base = base
        self.agents = agents
        self.extra = list(extra)
        self.jobmgr_port, self.resmgr_port = free_port(), free_port()
        self.hostmgr_port, self.aurora_port = free_port(), free_port()
        self.ui_port = free_port()
        # Task ports of this cluster, apart from any other cluster running on the machine
        # and from the kernel's ephemeral ports (task_ports.py says why); held until close().
        self.port_block = task_ports.claim()
        self.port_base = self.port_block.base
        self.proc: subprocess.Popen[str] | None = None
        self.tail: OutputTail | None = None
        self.extra_agents: list[tuple[subprocess.Popen[str], OutputTail]] = []
        self._client: PelotonClient | None = None
        self._started = False  # served once: a restart keeps its ports

    # -- lifecycle -------------------------------------------------------------------
    def start(self) -> UpCluster:
        """Start (or restart) `peloton up` and wait until it serves.  On a first start, a
        port taken by something else between `free_port()` and the bind (any process on a
        shared machine may draw it as an ephemeral port) is not a failure of the code under
        test: fresh ports are drawn and it is started again, at most PORT_RETRIES times.  A
        restart keeps its ports (clients and tests hold them)."""
        for attempt in range(PORT_RETRIES + 1):
            try:
                return self._start_once()
            except AssertionError:
                taken = self.proc is not None and self.proc.poll() is not None and \
                    self.tail is not None and any("is in use" in line
                                                  for line in list(self.tail.lines))
                if self._started or not taken or attempt == PORT_RETRIES:
                    raise
                self.proc = None
                self.jobmgr_port, self.resmgr_port = free_port(), free_port()
                self.hostmgr_port, self.aurora_port = free_port(), free_port()
                self.ui_port = free_port()
        raise AssertionError("unreachable")

    def _start_once(self) -> UpCluster:
        args = [PELOTON, "up", "--jobmgr-port", str(self.jobmgr_port),
                "--resmgr-port", str(self.resmgr_port), "--hostmgr-port", str(self.hostmgr_port),
                "--aurora-port", str(self.aurora_port), "--ui-port", str(self.ui_port),
                "--data-dir", str(self.base / "data"),
                "--agents", str(self.agents), "--agent-ports",
                f"{self.port_base}-{self.port_base + 999}", *self.extra]
        self.proc = subprocess.Popen(args, cwd=self.base, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1"},
                                     start_new_session=True)
        self.tail = OutputTail(self.proc)
        self.tail.wait_for("press Ctrl-C to stop", READY_TIMEOUT)
        self._started = True
        return self

    def stop(self) -> int:
        """SIGTERM `peloton up` and wait for it; returns its exit code."""
        code = 0
        if self.proc is not None:
            code = stop(self.proc, signal.SIGTERM, timeout=30)
            self.proc = None
        return code

    def kill9(self) -> None:
        """Crash `peloton up` (its task supervisors live on)."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(10)
            self.proc = None

    def close(self) -> None:
        """Stop everything this harness started, tasks included."""
        for proc, _ in self.extra_agents:
            stop(proc, signal.SIGTERM, timeout=20)
        self.extra_agents.clear()
        self.stop()
        if self._client is not None:
            self._client.close()
            self._client = None
        _kill_sandbox_processes(self.base)
        remove_relocated_sandboxes(self.base)
        self.port_block.release()

    # -- extra agents -------------------------------------------------------------------
    def add_agent(self, name: str, *args: str) -> subprocess.Popen[str]:
        """Start a separate `peloton agent` joining this cluster."""
        work = self.base / "agents" / name
        first = self.port_base + 1000 + 100 * len(self.extra_agents)
        ports = [] if "--ports" in args else ["--ports", f"{first}-{first + 99}"]
        proc = subprocess.Popen([PELOTON, "agent", "--name", name, "--hostmgr",
                                 f"127.0.0.1:{self.hostmgr_port}", "--work-dir", str(work),
                                 *ports, *args], cwd=self.base, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self.extra_agents.append((proc, OutputTail(proc)))
        return proc

    # -- clients ---------------------------------------------------------------------------
    @property
    def client(self) -> PelotonClient:
        """A typed client connected to this cluster."""
        if self._client is None:
            self._client = PelotonClient(jobmgr=f"127.0.0.1:{self.jobmgr_port}",
                                         resmgr=f"127.0.0.1:{self.resmgr_port}",
                                         hostmgr=f"127.0.0.1:{self.hostmgr_port}",
                                         caller="peloton-e2e", timeout=20.0)
        return self._client

    def cli(self, *args: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """Run the `peloton` CLI against this cluster."""
        cmd = [PELOTON, "-m", f"127.0.0.1:{self.jobmgr_port}", "-v",
               f"127.0.0.1:{self.resmgr_port}", "-u", f"127.0.0.1:{self.hostmgr_port}", *args]
        result = subprocess.run(cmd, cwd=self.base, capture_output=True, text=True,
                                timeout=timeout)
        if check and result.returncode != 0:
            raise AssertionError(f"{' '.join(args)} exited {result.returncode}:\n"
                                 f"{result.stdout}\n{result.stderr}")
        return result

    def log(self) -> str:
        """What `peloton up` printed so far."""
        return "\n".join(self.tail.lines) if self.tail else ""


def eventually(check: Callable[[], Any], timeout: float, what: str, interval: float = 0.2) -> Any:
    """Poll `check` until it returns something truthy (returned) or `timeout` passes."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last: {last!r}")


def task_pids(base: Path) -> dict[str, int]:
    """run id -> task pid of every run an agent under `base` started (from run.json)."""
    out = {}
    for record in base.rglob("sandboxes/*/run.json"):
        try:
            doc = json.loads(record.read_text())
            out[record.parent.name] = int(doc["pid"])
        except (ValueError, OSError, KeyError):
            continue
    return out


def alive(pid: int) -> bool:
    """Is process `pid` still running (not a zombie)?"""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def remove_relocated_sandboxes(base: Path) -> None:
    """Remove sandboxes agents under `base` kept outside it (/var/lib/peloton/sandboxes/...,
    where they go when a test's temporary directory is closed to the tasks' users)."""
    import shutil

    for link in base.rglob("sandboxes"):
        if link.is_symlink():
            target = link.resolve()
            if target.parent.name == "sandboxes" and target.parent.parent.name == "peloton":
                shutil.rmtree(target, ignore_errors=True)
                # and their persistent volumes and fetched files, kept beside them
                # (peloton/agent/volumes.py, remote_volumes.py)
                for beside in (".volumes", ".remote"):
                    shutil.rmtree(target.with_name(target.name + beside), ignore_errors=True)


def _kill_sandbox_processes(base: Path) -> None:
    """Kill every task process group started under `base` (best effort, for cleanup)."""
    for pid in task_pids(base).values():
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            continue
