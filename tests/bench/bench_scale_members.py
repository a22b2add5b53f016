"""The scale shape through `peloton up --jobmgrs N`, N = 1 and 2 (issue 24's "done when").

bench_scale's shape (10 jobs of N instances, every task 0.5 cpu for 1 s, on 10,000
simulated one-cpu hosts), but every daemon its own process, as `peloton up --jobmgrs N`
runs them (peloton/cluster/processes.py: a ZooKeeper it starts, the resource and host
managers - the simulated hosts live in the host manager - the placement engine and N
all-active job managers, members of 64 job partitions, over one SQLite store).  The jobs
are created through the Python client, job i through member i mod N, so each member
creates (and then drives) its share; each member gets its creates back to back, all
members at once.  Per N:

- `scale_members.jobmgrs_<N>.launches_per_s` (>= 3,750 with 2): tasks over the seconds
  from the first create to the last job's end;
- `...total_vs_ideal`: those seconds over the ideal ceil(tasks / 20,000);
- `...create_job_max_ms` (<= 1,000): the slowest CreateJob while the others are created;
- `...cpu_ms_per_task.<daemon>`: CPU (user + system) of each process over the run, per
  task, and `...cpu_ms_per_task.all` their sum;
- `...rss_mb.<daemon>`: each process's peak resident memory;
- `...machine_probe_us`: the machine's speed beside the run (tests/bench/common.py
  `cpu_probe_us`), before the cluster starts - once it is back near the fastest probe of
  this invocation, so one cluster's teardown does not slow the next one's start - and after;

then `scale_members.speedup_2_vs_1`: launches/s with 2 job managers over with 1.

Sizes: 10 x 10,000 by default (100,000 tasks), `BENCH_SCALE=full` 10 x 100,000
(1,000,000 tasks: tens of minutes for both clusters), smoke 10 x 50 on 100 hosts.  Without
ZooKeeper and Java it prints BENCH_SKIP.  Every process it starts is stopped by PID.
`BENCH_KEEP_DIR=DIR` keeps each cluster's data directory (configs, logs, store) under DIR;
`BENCH_JOBMGRS=2` runs only that cluster size (a targeted look; no speed-up line then).
"""

from __future__ import annotations

from peloton.common.geventsetup import setup

setup()

import os  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402

import psutil  # noqa: E402
from kazoo.client import KazooClient  # noqa: E402
from kazoo.exceptions import NoNodeError  # noqa: E402

from peloton.api.client import PelotonClient  # noqa: E402
from peloton.cluster.processes import ProcessCluster, ProcessesConfig  # noqa: E402
from peloton.common.leader import JOB_MANAGER  # noqa: E402
from peloton.common.membership import MEMBERS, PARTITIONS, role_path  # noqa: E402
from peloton.core.partitions import DEFAULT_PARTITIONS, assign  # noqa: E402
from tests.bench.bench_cluster import make_pool  # noqa: E402
from tests.bench.bench_scale import (  # noqa: E402
    BACKEND,
    HOSTS,
    INSTANCES,
    JOBS,
    SHAPE,
    TOTAL_TASKS,
    ShapeRun,
    run_shape,
)
from tests.bench.common import cpu_probe_us, load, report, scaled, skipped_without_zookeeper  # noqa: E402

SIZES = (1, 2)
#: A cluster starts once the probe is within this factor of the invocation's fastest, or
#: after SETTLE_S seconds regardless (not at all in the smoke run `make test` makes).
SETTLED = 1.1
SETTLE_S = scaled(60.0, smoke=0.0)
#: What the probe measured on this machine when it was quiet, for the reader of a run.
PROBE_REFERENCE = "3.85 us on the quiet machine of 2026-12-07 14:04 UTC"
#: At most this many job managers in one cluster (`BENCH_JOBMGRS`: each one its own process).
MAX_JOBMGRS = 8
ZK_ROOT = "/bench-scale-members"
#: Seconds the members may take to settle on the partitions after they serve.
SETTLE_TIMEOUT_S = 60.0
#: Seconds each cluster may take from the first create to the last job's end: both clusters
#: with their starts and stops stay within run.py's cap for this module.
SHAPE_DEADLINE_S = scaled(180, smoke=60, full=1200)


@dataclass(frozen=True)
class Measured:
    """One cluster's run: the shape, and each process's CPU seconds and peak RSS (MB)."""

    run: ShapeRun
    cpu_s: dict[str, float]
    rss_mb: dict[str, float]
    #: Partitions the members let go of during the run (a ZooKeeper session suspended under
    #: load, a handover): each pauses its jobs' work; 0 in a healthy run.
    released: int
    #: The machine's CPU seconds over the run: busy (every process, the kernel's own work
    #: included), this benchmark's client, and stolen by the hypervisor.
    machine_busy_s: float = 0.0
    client_s: float = 0.0
    steal_s: float = 0.0
    #: `cpu_probe_us` right before the cluster started and right after it stopped.
    probe_us: tuple[float, float] = (0.0, 0.0)


def machine_cpu() -> tuple[float, float]:
    """(busy, stolen) CPU seconds of the whole machine since boot (/proc/stat)."""
    t = psutil.cpu_times()
    busy = t.user + t.nice + t.system + t.irq + t.softirq
    return float(busy), float(getattr(t, "steal", 0.0))


def peak_rss_mb(proc: psutil.Process) -> float:
    """The process's peak resident memory (VmHWM) in MB."""
    with open(f"/proc/{proc.pid}/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def cpu_s(proc: psutil.Process) -> float:
    times = proc.cpu_times()
    return float(times.user + times.system)


def wait_settled(zk: str, members: int) -> None:
    """Until every partition is claimed in ZooKeeper by the member the assignment names,
    with all `members` joined: a job manager serves before it holds its partitions, and a
    create meanwhile answers UNAVAILABLE (retryable) - not what this measures."""
    client = KazooClient(hosts=zk)
    client.start(timeout=15)
    try:
        want = assign([f"jobmgr-{i}" for i in range(1, members + 1)], DEFAULT_PARTITIONS)
        base = role_path(ZK_ROOT, JOB_MANAGER, PARTITIONS)
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        while time.monotonic() < deadline:
            try:  # the nodes appear as the members join and claim
                joined = len(client.get_children(role_path(ZK_ROOT, JOB_MANAGER, MEMBERS)))
                owners = [client.get(f"{base}/{p}")[0].decode() for p in range(want.count)]
            except NoNodeError:
                joined, owners = 0, []
            if joined == members and owners == list(want.owners):
                time.sleep(1.0)  # each owner's on-acquire (recovery of an empty partition)
                return
            time.sleep(0.2)
        raise TimeoutError(f"{members} job managers did not settle on the partitions "
                           f"within {SETTLE_TIMEOUT_S:.0f}s")
    finally:
        client.stop()
        client.close()


def releases(cluster: ProcessCluster) -> int:
    """Partitions the job managers have let go of so far (their logs say each)."""
    return sum(p.log.read_text(errors="replace").count("releasing partition")
               for p in cluster.procs if p.name.startswith("jobmgr-"))


def settled_probe(best: float) -> float:
    """`cpu_probe_us` once the machine is back near `best` (the fastest probe of this
    invocation), polled for at most SETTLE_S: a cluster stopped just before (its processes
    exiting, its multi-GB store deleted) must not slow the start of the next one. Returns
    the last probe, settled or not (the report shows it either way)."""
    deadline = time.monotonic() + SETTLE_S
    probe = cpu_probe_us()
    while probe > best * SETTLED and time.monotonic() < deadline:
        time.sleep(1.0)
        probe = cpu_probe_us()
    return probe


def measure(base: Path, members: int, best_probe: float) -> Measured:
    """Start `peloton up --jobmgrs <members>` on the simulated hosts, run the shape, stop it."""
    cluster = ProcessCluster(ProcessesConfig(
        jobmgrs=members, data_dir=base, agents=0, backend=BACKEND, jobmgr_port=0,
        resmgr_port=0, hostmgr_port=0, zk_root=ZK_ROOT))
    clients: list[PelotonClient] = []
    probe_before = settled_probe(best_probe)
    try:
        cluster.start()
        wait_settled(cluster.zk, members)
        procs = {p.name: psutil.Process(p.proc.pid) for p in cluster.procs}
        where = cluster.addresses
        clients = [PelotonClient(jobmgr=where[f"jobmgr-{i}"], resmgr=where["resmgr"],
                                 hostmgr=where["hostmgr"], timeout=120)
                   for i in range(1, members + 1)]
        pool = make_pool(clients[0], HOSTS)
        released0 = releases(cluster)  # the handover to a joining member is not counted
        cpu0 = {name: cpu_s(p) for name, p in procs.items()}
        (busy0, steal0), client0 = machine_cpu(), cpu_s(psutil.Process())
        run = run_shape(clients, pool, SHAPE_DEADLINE_S)
        (busy1, steal1), client1 = machine_cpu(), cpu_s(psutil.Process())
        cpu = {name: cpu_s(p) - cpu0[name] for name, p in procs.items()}
        rss = {name: peak_rss_mb(p) for name, p in procs.items()}
        released = releases(cluster) - released0
    finally:
        for client in clients:
            client.close()
        cluster.stop()
    return Measured(run, cpu, rss, released, busy1 - busy0, client1 - client0, steal1 - steal0,
                    (probe_before, cpu_probe_us()))


def report_members(members: int, m: Measured) -> float:
    """Print one cluster's lines; its launches/s."""
    name = f"scale_members.jobmgrs_{members}"
    run = m.run
    rate = run.launches_per_s()
    how = (f"`peloton up --jobmgrs {members}` (every daemon its own process, SQLite store, "
           f"{members} member{'s' if members > 1 else ''} of 64 partitions)")
    report(f"{name}.launches_per_s", rate, "launches/s", ">=3750" if members == 2 else "",
           f"{SHAPE}, {how}: {run.total_s:.1f} s from the first create to the last job's end "
           f"({run.ended()}; partitions released mid-run: {m.released}); {load()}")
    report(f"{name}.total_vs_ideal", run.total_s / run.ideal_s(), "x", "",
           f"ideal {run.ideal_s()} s = {run.tasks_done:,} tasks ended (of {TOTAL_TASKS:,}) / "
           f"{2 * HOSTS:,} slots one-second waves")
    report(f"{name}.create_job_max_ms", max(run.answers) * 1000, "ms", "<=1000",
           f"the slowest of {JOBS} CreateJob calls of {INSTANCES:,} instances, job i through "
           f"member i mod {members}, each member's back to back, members at once "
           f"(median {run.median_answer_ms():.0f} ms)")
    for proc, seconds in m.cpu_s.items():
        report(f"{name}.cpu_ms_per_task.{proc}", seconds / max(1, run.tasks_done) * 1000, "ms",
               note=f"CPU of the {proc} process from the first create to the last job's end "
                    "per task")
    report(f"{name}.cpu_ms_per_task.all", sum(m.cpu_s.values()) / max(1, run.tasks_done) * 1000, "ms",
           note=f"every process together ({sum(m.cpu_s.values()) / run.total_s:.2f} cores busy "
                f"on average of {psutil.cpu_count()})")
    for proc, mb in m.rss_mb.items():
        report(f"{name}.rss_mb.{proc}", mb, "MB", note=f"peak RSS of the {proc} process")
    # What else had the cores: CPU per task moves 10-20 % between runs of this shape, and a
    # run that shared the machine is told apart from one that did not only by this.
    other = max(0.0, m.machine_busy_s - sum(m.cpu_s.values()) - m.client_s)
    report(f"{name}.machine_other_cores", other / run.total_s, "cores",
           note=f"CPU of everything but the cluster's processes and this benchmark's client "
                f"(other processes, the kernel's own threads) over the run, in cores: the "
                f"machine {m.machine_busy_s / run.total_s:.2f} busy, the cluster "
                f"{sum(m.cpu_s.values()) / run.total_s:.2f}, the client "
                f"{m.client_s / run.total_s:.2f}; stolen by the hypervisor "
                f"{m.steal_s / run.total_s:.2f}")
    before, after = m.probe_us
    report(f"{name}.machine_probe_us", (before + after) / 2, "us",
           note=f"the machine's speed beside this run: a fixed mix of the daemons' kind of "
                f"Python (tests/bench/common.py cpu_probe_us) on one core, {before:.2f} us a "
                f"step right before the cluster started (once within {SETTLED:g} x the "
                f"invocation's fastest probe, or after {SETTLE_S:.0f} s) and {after:.2f} right "
                f"after it stopped; lower is faster ({PROBE_REFERENCE})")
    return rate


def sizes() -> tuple[int, ...]:
    """The cluster sizes to run: SIZES, or the one `BENCH_JOBMGRS` names."""
    chosen = os.environ.get("BENCH_JOBMGRS", "")
    if not chosen:
        return SIZES
    members = int(chosen)
    if not 1 <= members <= MAX_JOBMGRS:
        raise SystemExit(f"BENCH_JOBMGRS must be 1..{MAX_JOBMGRS}, not {chosen}")
    return (members,)


def main() -> None:
    if skipped_without_zookeeper("scale_members"):
        return
    rates: dict[int, float] = {}
    keep = os.environ.get("BENCH_KEEP_DIR", "")
    best_probe = cpu_probe_us()
    for members in sizes():
        if keep:  # the clusters' configs, logs and store are kept there, for a post-mortem
            m = measure(Path(tempfile.mkdtemp(prefix=f"jobmgrs-{members}-", dir=keep)), members,
                        best_probe)
        else:
            with tempfile.TemporaryDirectory() as tmp:
                m = measure(Path(tmp), members, best_probe)
        rates[members] = report_members(members, m)
        best_probe = min(best_probe, *m.probe_us)
    if 1 not in rates or 2 not in rates:
        return
    report("scale_members.speedup_2_vs_1", rates[2] / rates[1], "x",
           note=f"launches/s with 2 job managers ({rates[2]:,.0f}) over with 1 "
                f"({rates[1]:,.0f}); {load()}")


if __name__ == "__main__":
    main()
