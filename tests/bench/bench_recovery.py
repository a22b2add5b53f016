"""Job manager recovery (issue 16, item 2): a restart with many tasks stored, and a leader
failover through ZooKeeper.

(a) `recovery.jobmgr_restart_s` (<= 30 s): separate `peloton <daemon>` processes (resource
    manager, host manager with simulated hosts, placement, job manager; one SQLite file,
    no ZooKeeper) hold 10 jobs of N RUNNING tasks; the job manager is killed (-9) and a
    new one spawned, and the figure is the seconds from the spawn until it serves again:
    GetJob of a stored job answers and a new one-task job created then has its task
    RUNNING (goal-state engines, placement and launch work).  Recovery does not block
    serving (issue 24, item 4; peloton/jobmgr/recovery.py): the API opens once the
    active-job ids are read, the jobs load in the background and a call about one not
    loaded yet loads it first, so two more figures: `recovery.jobmgr_serving_s` (<= 10 s),
    the spawn until GetJob of a stored job answers with its stored config, and
    `recovery.jobmgr_recovered_s` (<= 30 s), the spawn until the job manager logs
    "recovery done" (every stored active job loaded and its runs handed back).  The
    store is filled the way users fill it: CreateJob over gRPC, then waiting until every
    task runs; the host manager and its simulated hosts live on, so the runs are still
    there.  The probe job has a pool of its own.  `recovery.jobmgr_restart_rss_mb` is the
    new job manager process's resident memory once recovery is done,
    `recovery.jobmgr_restart_ms_per_task` the full recovery over the tasks stored.
(b) `recovery.failover_s` (<= 5 s): separate `peloton <daemon>` processes with a real
    ZooKeeper, two job manager candidates; the leader is killed with SIGKILL and the
    figure is the seconds from the kill to the next acknowledged CreateJob, the client
    rediscovering the leader in ZooKeeper and retrying as the CLI does (a new client per
    attempt).  A killed leader's ephemeral znode goes only when its session times out, so
    the session timeout bounds the figure: measured at the daemons' default session
    timeout, then again at 3 s (what the integration tests use).  Without ZooKeeper the
    part prints BENCH_SKIP with the reason.

Sizes: N = 5,000 by default (50,000 tasks on 1,000 simulated ten-cpu hosts; filling costs
about 0.5 ms per task over gRPC and the restart about 0.1 ms, so 100,000 would take the module
past its budget), `BENCH_SCALE=full` N = 100,000 (1,000,000 tasks on 10,000 hosts: filling
took 9 minutes and the restart 2 on 2026-12-06), smoke N = 20 and shorter sessions.
`BENCH_PARTS` picks the parts to run, comma-separated (`restart`, `failover`; default both):
`BENCH_PARTS=restart` with `BENCH_SCALE=full` measures the 1,000,000-task restart alone.
`BENCH_RECOVERY_N` sets N outright (hosts N / 10): `BENCH_RECOVERY_N=20000` is a
200,000-task restart.  `recovery.jobmgr_restart_cpu_s.<daemon>` is each daemon's CPU from
the spawn until recovery was done (the new job manager's since its start).
"""

from __future__ import annotations

from peloton.common.geventsetup import setup

setup()

import os  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

from peloton.api.client import PelotonClient  # noqa: E402
from peloton.api.gen.peloton.api.v0.respool import respool_pb2  # noqa: E402
from peloton.api.gen.peloton.api.v0.task import task_pb2  # noqa: E402
from peloton.common.leader import ElectionConfig  # noqa: E402
from peloton.core.errors import NotFound, PelotonError  # noqa: E402
from tests.bench.bench_cluster import job_config  # noqa: E402
from tests.bench.common import cpu_seconds, load, report, scaled, until  # noqa: E402
from tests.harness.multiproc import Daemon, MultiCluster  # noqa: E402
from tests.harness.zookeeper import ZooKeeperServer  # noqa: E402

JOBS = 10
#: `BENCH_RECOVERY_N` overrides the tasks per job (e.g. 20,000: a 200,000-task restart, filled
#: in about 2 minutes, to iterate on recovery between full runs); hosts scale with it.
_N = int(os.environ.get("BENCH_RECOVERY_N", "0"))
INSTANCES = _N or scaled(5_000, smoke=20, full=100_000)
HOSTS = max(10, _N // 10) if _N else scaled(1_000, smoke=10, full=10_000)
HOST_CPUS = 10
#: 0.05 cpu a task: the stored tasks use half the hosts' cpu, the rest is free for the probe.
TASK_CPU = 0.05
#: Simulated tasks run for a day (so every stored task is RUNNING) and start at once.
BACKEND = f"sim:{HOSTS}:86400:{HOST_CPUS}:0"
FILL_TIMEOUT = scaled(240.0, smoke=60.0, full=3600.0)
RESTART_TIMEOUT = scaled(150.0, smoke=60.0, full=3600.0)
#: What the job manager logs when its background recovery has loaded every job.
RECOVERED = "recovery done"
#: Session timeouts of the failover runs: the daemons' default, then the tests' 3 s
#: (smoke: shorter, it only proves the code runs).
SESSIONS = scaled((ElectionConfig().session_timeout, 3.0), smoke=(3.0, 2.0))
FAILOVER_TIMEOUT = 60.0
#: The parts this run measures (module docstring).
PARTS = frozenset(os.environ.get("BENCH_PARTS", "failover,restart").replace(" ", "").split(","))


def make_pool(client: PelotonClient, name: str, cpu: float) -> str:
    """A pool under root whose limit is `cpu` (memory and disk to match)."""
    cfg = respool_pb2.ResourcePoolConfig(name=name)
    cfg.parent.value = "root"
    for kind, amount in (("cpu", cpu), ("memory", cpu * 4096), ("disk", cpu * 16384),
                         ("gpu", 0)):
        cfg.resources.add(kind=kind, reservation=0, limit=amount, share=1)
    return str(client.create_respool(cfg).result.value)


def running(client: PelotonClient, job_ids: list[str]) -> int:
    """RUNNING tasks of `job_ids` by their jobs' task stats."""
    return sum(client.get_job(j).jobInfo.runtime.taskStats.get("RUNNING", 0) for j in job_ids)


def task_running(client: PelotonClient, job_id: str, instance: int = 0) -> bool:
    try:
        return bool(client.get_task(job_id, instance).result.runtime.state == task_pb2.RUNNING)
    except NotFound:  # the job engine creates the task after CreateJob answers
        return False


def rss_of(pid: int) -> float:
    """Resident memory of process `pid` in MB."""
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def answers(client: PelotonClient, job_id: str) -> bool:
    """Does the job manager answer GetJob of `job_id` with its stored config?"""
    try:
        return bool(client.get_job(job_id).jobInfo.config.instanceCount == INSTANCES)
    except PelotonError:  # UNAVAILABLE until it leads and has recovered
        return False


def bench_restart(base: Path) -> None:
    total = JOBS * INSTANCES
    (base / "restart").mkdir()
    mc = MultiCluster(base / "restart")
    try:
        daemons = [mc.spawn("resmgr"), mc.spawn("hostmgr", args=("--backend", BACKEND)),
                   mc.spawn("placement"), mc.spawn("jobmgr")]
        mc.ready(*daemons)
        old = daemons[-1]
        peers = {"resmgr": f"127.0.0.1:{mc.ports['resmgr']}",
                 "hostmgr": f"127.0.0.1:{mc.ports['hostmgr']}"}
        with PelotonClient(jobmgr=old.address, timeout=60.0, resmgr=peers["resmgr"],
                           hostmgr=peers["hostmgr"]) as client:
            pool = make_pool(client, "stored", total * TASK_CPU)
            probe_pool = make_pool(client, "probe", 1)
            t0 = time.monotonic()
            ids = [client.create_job(job_config(pool, INSTANCES, TASK_CPU, "sleep 86400"))
                   .jobId.value for _ in range(JOBS)]
            until(lambda: running(client, ids) >= total, FILL_TIMEOUT,
                  f"{total:,} tasks RUNNING", interval=1.0)
            fill = time.monotonic() - t0
        mc.kill9(old)

        peer_cpu = {d.role: (d.proc.pid, cpu_seconds(d.proc.pid)) for d in daemons[:3]}
        t0 = time.monotonic()
        new = mc.spawn("jobmgr", "jobmgr-restarted")
        marks: dict[str, float] = {}
        cpu: dict[str, float] = {}

        def noted(check: Callable[[], object], mark: str) -> Callable[[], bool]:
            """`check`, noting on the way when the job manager logged its recovery done."""
            def poll() -> bool:
                if "recovered" not in marks and any(RECOVERED in line
                                                    for line in list(new.tail.lines)):
                    marks["recovered"] = time.monotonic() - t0
                    cpu["jobmgr"] = cpu_seconds(new.proc.pid)
                    cpu.update({role: cpu_seconds(pid) - before
                                for role, (pid, before) in peer_cpu.items()})
                return bool(mark in marks or check())
            return poll

        with PelotonClient(jobmgr=new.address, timeout=60.0, resmgr=peers["resmgr"],
                           hostmgr=peers["hostmgr"]) as client:
            announced = until(lambda: any("serving gRPC on" in line for line in new.tail.lines),
                              RESTART_TIMEOUT, "the new job manager's gRPC server") - t0
            got_job = until(noted(lambda: answers(client, ids[-1]), "-"), RESTART_TIMEOUT,
                            "GetJob of a stored job") - t0
            during = "recovered" not in marks
            probe = client.create_job(job_config(probe_pool, 1, TASK_CPU, "sleep 86400"))
            served = until(noted(lambda: task_running(client, probe.jobId.value), "-"),
                           RESTART_TIMEOUT, "the new job's task RUNNING", interval=0.01) - t0
            until(noted(lambda: False, "recovered"), RESTART_TIMEOUT,
                  f"{RECOVERED!r} in the job manager's log")
            recovered = marks["recovered"]
            rss = rss_of(new.proc.pid)
            again = running(client, ids)
    except Exception:
        print(mc.logs(40), file=sys.stderr, flush=True)
        raise
    finally:
        mc.close()
    shape = (f"{JOBS} jobs x {INSTANCES:,} RUNNING tasks stored ({total:,}; SQLite, filled by "
             f"CreateJob over gRPC in {fill:.0f} s on separate `peloton <daemon>` processes, "
             f"the host manager's backend {BACKEND})")
    report("recovery.jobmgr_restart_s", served, "s", "<=30",
           f"{shape}; the job manager killed (-9) and a new one spawned: gRPC server up "
           f"{announced:.1f} s, GetJob of a stored job answered {got_job:.1f} s "
           f"({'while recovery still ran' if during else 'recovery was already done'}), a "
           f"new 1-task job's task RUNNING {served:.1f} s, recovery done {recovered:.1f} s "
           f"after the spawn; {again:,} stored tasks RUNNING then; {load()}")
    report("recovery.jobmgr_serving_s", got_job, "s", "<=10",
           f"the restart above: spawn of the new job manager until GetJob of a stored job "
           f"answers with its stored config (the API opens once the active-job ids are "
           f"read; a job not loaded yet is loaded for the call); {load()}")
    report("recovery.jobmgr_recovered_s", recovered, "s", "<=30",
           f"the restart above: spawn until the job manager logs {RECOVERED!r}: every one "
           f"of the {JOBS} stored active jobs loaded in the background and its runs handed "
           f"back (per job, while the next loads: RecoverRuns calls of 5,000 runs grouped, "
           f"AdoptHosts calls of 10,000, one reconcile of the runs the host manager last "
           f"heard in another state); {load()}")
    report("recovery.jobmgr_restart_ms_per_task", recovered / total * 1000, "ms",
           note=f"the full recovery above over the {total:,} tasks stored; x 1,000,000 = "
                f"{recovered / total * 1e6:,.0f} s for Peloton's 1M-task shape if it stays "
                f"linear")
    for role, seconds in sorted(cpu.items()):
        report(f"recovery.jobmgr_restart_cpu_s.{role}", seconds, "s",
               note=f"CPU of the {role} process from the spawn of the new job manager until "
                    f"it logged {RECOVERED!r} (the job manager's since its start); {load()}")
    report("recovery.jobmgr_restart_rss_mb", rss, "MB",
           note=f"RSS of the restarted `peloton jobmgr` process once recovery was done, "
                f"{total:,} tasks stored and recovered")


def leader_daemon(mc: MultiCluster) -> Daemon | None:
    """The job manager process ZooKeeper names as leader (None while there is none)."""
    leader = mc.leader("jobmgr")
    if leader is None:
        return None
    return next((d for d in mc.daemons if d.role == "jobmgr" and d.port == leader.grpc
                 and d.proc.poll() is None), None)


def create_once(zk: str, root: str, pool: str) -> bool:
    """One CreateJob as the CLI sends it: discover the leader, call it; True when acknowledged."""
    try:
        with PelotonClient(zk_servers=[zk], zk_root=root, timeout=2.0) as client:
            return bool(client.create_job(job_config(pool, 1, 0.01, "true")).jobId.value)
    except PelotonError:
        return False


def failover_once(mc: MultiCluster, zk: str, pool: str) -> float:
    """Kill -9 the job manager leader; seconds until a CreateJob is acknowledged again."""
    until(lambda: leader_daemon(mc), 30, "a job manager leader")
    victim = leader_daemon(mc)
    assert victim is not None
    until(lambda: create_once(zk, mc.root, pool), 30, "a create on the current leader")
    t0 = time.monotonic()
    mc.kill9(victim)
    return until(lambda: create_once(zk, mc.root, pool), FAILOVER_TIMEOUT,
                 "a create after the failover", interval=0.02) - t0


def bench_failover(base: Path) -> None:
    zk = ZooKeeperServer(base / "zk")
    (base / "zk").mkdir()
    try:
        zk.start()
    except Exception as exc:  # any failure to start is reported, not raised
        print(f"BENCH_SKIP recovery.failover_s ZooKeeper could not be started: "
              f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}", flush=True)
        return
    (base / "mp").mkdir()
    mc = MultiCluster(base / "mp", zk.hosts, root=f"/bench-{uuid.uuid4().hex[:10]}",
                      session_timeout=SESSIONS[0])
    results: list[tuple[float, float]] = []
    try:
        daemons = [mc.spawn(role) for role in ("resmgr", "hostmgr", "placement", "jobmgr")]
        mc.ready(*daemons)
        with PelotonClient(zk_servers=[zk.hosts], zk_root=mc.root, timeout=20.0) as client:
            until(lambda: mc.leader("resmgr") is not None, 30, "a resource manager leader")
            pool = make_pool(client, "failover", 100)
        standby = mc.spawn("jobmgr", "jobmgr-2")
        mc.ready(standby)
        results.append((SESSIONS[0], failover_once(mc, zk.hosts, pool)))
        # Again with shorter sessions: two fresh candidates, then the surviving leader
        # (default session) steps down cleanly so one of them leads.
        mc.session_timeout = SESSIONS[1]
        fresh = [mc.spawn("jobmgr", f"jobmgr-{i}") for i in (3, 4)]
        mc.ready(*fresh)
        old = leader_daemon(mc)
        if old is not None:
            old.proc.terminate()
            old.proc.wait(30)
        results.append((SESSIONS[1], failover_once(mc, zk.hosts, pool)))
    finally:
        mc.close()
        zk.stop()
    (session, took), *rest = results
    default = " (the daemons' default)" if session == ElectionConfig().session_timeout else ""
    others = "; ".join(f"with {s:g} s sessions {t:.1f} s" for s, t in rest)
    report("recovery.failover_s", took, "s", "<=5",
           f"kill -9 of the job manager leader (separate `peloton jobmgr` processes, SQLite, "
           f"a real ZooKeeper) to the next acknowledged CreateJob, a new client discovering the "
           f"leader in ZooKeeper per attempt; bounded by the ZooKeeper session timeout, "
           f"{session:g} s{default}: the dead leader's znode goes when its session expires, "
           f"up to one timeout after its last ping, then the standby is elected, recovers and "
           f"answers; {others}; {load()}")
    for s, t in rest:
        report(f"recovery.failover_{s:g}s_session_s", t, "s", "<=5",
               f"the same with election.session_timeout {s:g} s on every job manager "
               f"(what the integration tests use); {load()}")


def main() -> None:
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        base = Path(tmp)
        if "failover" in PARTS:
            bench_failover(base)
        if "restart" in PARTS:
            bench_restart(base)


if __name__ == "__main__":
    main()
