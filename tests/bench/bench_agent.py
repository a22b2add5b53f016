"""Issue 5 benchmark 10(a): tasks of /bin/true through one real agent, beside the
machine's own fork/exec rate; plus the simulated backend's launch rate.

- forkexec.*: /bin/true started with posix_spawn and waited for, from this
  process before anything else runs, one at a time and two in flight.
- agent.*: 10,000 runs of /bin/true (argv, no shell, no memory limit)
  launched through a LocalBackend (this process, gevent) to a real
  `peloton agent` process, in batches with a bounded number in flight; the
  clock stops when the last terminal update arrived.  Every update is
  acknowledged, as the host manager would.  A second, shorter run adds a
  64 MB memory limit (a cgroup per task where the machine has one).
- sim.*: 50,000 one-second tasks on 900 one-cpu simulated hosts driven by a
  manual clock: how fast the simulation itself launches and completes runs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from peloton.core.model.resources import Resources
from peloton.core.model.sched import LaunchSpec
from peloton.core.model.task import CommandSpec, TaskSpec
from peloton.core.states import TaskState
from peloton.hostmgr.backends.base import BackendHost, StatusUpdate
from tests.bench.common import report
from tests.harness.procs import PELOTON, OutputTail, free_port, stop

if TYPE_CHECKING:
    from peloton.hostmgr.backends.local import LocalBackend

TASKS = int(os.environ.get("BENCH_AGENT_TASKS", "10000"))
WORK_ROOT = Path(__file__).resolve().parents[2] / ".peloton" / "bench"
SHM = Path("/dev/shm") if Path("/dev/shm").is_dir() else None
LIMITED_TASKS = max(1, TASKS // 5)
#: Runs launched but not yet ended; the agent keeps its pipeline full with this many.
IN_FLIGHT = 256
BATCH = 64
DEADLINE_S = 150


def forkexec_rate(count: int, in_flight: int) -> float:
    """/bin/true per second, started with posix_spawn, `in_flight` at a time."""
    running: set[int] = set()
    started = done = 0
    t0 = time.perf_counter()
    while done < count:
        while started < count and len(running) < in_flight:
            running.add(os.posix_spawn("/bin/true", ["true"], {}))
            started += 1
        pid, _ = os.wait()
        running.discard(pid)
        done += 1
    return count / (time.perf_counter() - t0)


def bench_sim() -> None:
    """50,000 one-second tasks on 900 one-cpu simulated hosts, on a manual clock."""
    from peloton.hostmgr.backends.sim import SimBackend
    from peloton.hostmgr.backends.sim_clock import ManualClock

    clock = ManualClock()
    backend = SimBackend(hosts=900, clock=clock, task_secs=1.0)
    free: list[str] = []
    finished = [0]

    class Listener:
        """The host manager's part: acknowledge everything, reuse a host once its task ended."""

        def host_up(self, host: BackendHost) -> None:
            free.append(host.hostname)

        def host_gone(self, hostname: str, reason: str) -> None:
            pass

        def host_seen(self, hostname: str) -> None:
            pass

        def status_update(self, update: StatusUpdate) -> None:
            backend.acknowledge([update])
            if update.state.terminal:
                free.append(update.hostname)
                finished[0] += 1

        def status_updates(self, updates: Sequence[StatusUpdate]) -> None:
            for update in updates:
                self.status_update(update)

    backend.start(Listener())
    clock.run_due()
    spec = TaskSpec(command=CommandSpec("/bin/true"))
    job = str(uuid.uuid4())
    total, launched = 50_000, 0
    t0 = time.perf_counter()
    while finished[0] < total:
        hosts, free[:] = free[:], []
        for host in hosts[: total - launched]:
            backend.launch(host, [LaunchSpec(f"{job}-{launched}-1", spec)])
            launched += 1
        clock.advance(1.0)
    wall = time.perf_counter() - t0
    report("sim.launches_per_s", total / wall, "launches/s", ">=1000",
           f"50,000 x 1 s tasks on 900 one-cpu hosts; {clock.now():.0f} s simulated in {wall:.1f} s")


class _Counter:
    """The host manager's part: counts runs that ended, acknowledges every update in batches."""

    def __init__(self, backend: LocalBackend) -> None:
        self.backend = backend
        self.cond = threading.Condition()
        self.ended: set[str] = set()  # re-deliveries must not count twice
        self.failed: list[str] = []
        self.unacked: list[StatusUpdate] = []
        self.hosts: list[str] = []

    def host_up(self, host: BackendHost) -> None:
        with self.cond:
            self.hosts.append(host.hostname)
            self.cond.notify_all()

    def host_gone(self, hostname: str, reason: str) -> None:
        print(f"host gone: {hostname}: {reason}", file=sys.stderr)

    def host_seen(self, hostname: str) -> None:
        pass  # heartbeats: nothing to count

    def status_updates(self, updates: Sequence[StatusUpdate]) -> None:
        for update in updates:
            self.status_update(update)

    def status_update(self, update: StatusUpdate) -> None:
        with self.cond:
            self.unacked.append(update)
            if update.state.terminal and update.run_id not in self.ended:
                self.ended.add(update.run_id)
                if update.state is not TaskState.SUCCEEDED:
                    self.failed.append(update.message)
                self.cond.notify_all()
            if len(self.unacked) < 256 and not update.state.terminal:
                return
            batch, self.unacked = self.unacked, []
        self.backend.acknowledge(batch)


def run_agent_batch(backend: LocalBackend, counter: _Counter, host: str, count: int,
                    mem_mb: float) -> float:
    """Launch `count` runs of /bin/true with at most IN_FLIGHT unfinished; runs per second."""
    spec = TaskSpec(command=CommandSpec("/bin/true", shell=False), resources=Resources(mem_mb=mem_mb))
    job = str(uuid.uuid4())
    base = len(counter.ended)  # every earlier run has ended: the rest are ours
    launched = finished = 0
    t0 = time.perf_counter()
    deadline = time.monotonic() + DEADLINE_S
    while finished < count:
        # Wait until a batch fits under IN_FLIGHT again, or (all launched) until all ended.
        need = count if launched >= count else launched - IN_FLIGHT + BATCH
        with counter.cond:
            until = time.monotonic() + 5
            while len(counter.ended) - base < need and time.monotonic() < until:
                counter.cond.wait(1)
            finished = len(counter.ended) - base
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {finished} of {count} runs ended within {DEADLINE_S} s")
        if launched < count and launched - finished <= IN_FLIGHT - BATCH:
            n = min(BATCH, count - launched)
            backend.launch(host, [LaunchSpec(f"{job}-{i}-1", spec) for i in range(launched, launched + n)])
            launched += n
    return count / (time.perf_counter() - t0)


def start_agent(work: Path, hostmgr: str) -> tuple[subprocess.Popen[str], OutputTail]:
    proc = subprocess.Popen([PELOTON, "agent", "--name", "bench", "--hostmgr", hostmgr,
                             "--port", str(free_port()), "--work-dir", str(work)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    tail = OutputTail(proc)
    tail.wait_for("serving on", 60)
    return proc, tail


def bench_agent(seq: float, two: float) -> None:
    from peloton.api.grpc_server import GrpcServer
    from peloton.hostmgr.backends.local import LocalBackend

    server = GrpcServer("127.0.0.1:0")
    backend = LocalBackend(heartbeat_secs=1.0, heartbeat_timeout_secs=30)
    backend.register_on(server)
    server.start()
    counter = _Counter(backend)
    backend.start(counter)
    hostmgr = f"127.0.0.1:{server.port}"
    # Under the repo's .peloton/ rather than /tmp: a directory other programs churn files
    # in makes every inode allocation slower (see supervisor.c), which is not our cost.
    WORK_ROOT.mkdir(parents=True, exist_ok=True)
    disk = Path(tempfile.mkdtemp(prefix="bench-agent-", dir=WORK_ROOT))
    runs: dict[str, float] = {}
    isolation = "?"
    try:
        for label, work in (("disk", disk), ("tmpfs", SHM)):
            if work is None:
                continue
            work = Path(tempfile.mkdtemp(prefix="bench-agent-", dir=work)) if label == "tmpfs" else work
            proc, tail = start_agent(work, hostmgr)
            try:
                with counter.cond:
                    counter.hosts.clear()
                    if not counter.cond.wait_for(lambda: "bench" in counter.hosts, 60):
                        raise RuntimeError("the agent did not register within 60 s")
                runs[label] = run_agent_batch(backend, counter, "bench", TASKS, 0.0)
                if label == "disk":
                    runs["limited"] = run_agent_batch(backend, counter, "bench", LIMITED_TASKS, 64.0)
                    isolation = next((ln.split("(", 1)[1].split(";")[0] for ln in tail.lines
                                      if "serving on" in ln and "(" in ln), "?")
            finally:
                stop(proc)
            shutil.rmtree(work, ignore_errors=True)
    finally:
        backend.stop()
        server.stop(0)
    rate = runs["disk"]
    note = (f"{TASKS} x /bin/true (argv, no limit), {IN_FLIGHT} in flight, batches of {BATCH}, "
            f"work dir on disk; {len(counter.failed)} not SUCCEEDED")
    report("agent.tasks_per_s", rate, "tasks/s", f">={0.5 * seq:.0f}", note + "; target: 50% of sequential")
    report("agent.ratio_vs_forkexec_seq", rate / seq, "ratio", ">=0.5")
    report("agent.ratio_vs_forkexec_2", rate / two, "ratio", "", "vs 2 in flight")
    report("agent.tasks_per_s_mem_limit", runs["limited"], "tasks/s", "",
           f"{LIMITED_TASKS} x /bin/true with a 64 MB limit ({isolation}), work dir on disk")
    if "tmpfs" in runs:
        report("agent.tasks_per_s_tmpfs", runs["tmpfs"], "tasks/s", "",
               "same as agent.tasks_per_s with the work dir on tmpfs: no disk inode cost")


def main() -> None:
    """Baseline first (before gevent or threads exist), then the backends."""
    seq = forkexec_rate(3000, 1)
    two = forkexec_rate(3000, 2)
    report("forkexec.sequential_per_s", seq, "execs/s", "", "/bin/true via posix_spawn + wait")
    report("forkexec.two_in_flight_per_s", two, "execs/s", "", "/bin/true, 2 in flight")
    bench_sim()
    from peloton.common import geventsetup

    geventsetup.setup()
    bench_agent(seq, two)


if __name__ == "__main__":
    main()
