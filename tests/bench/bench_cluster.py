"""Whole-cluster benchmarks (issues 4/6 and 16): `peloton up` in this process.

(a) 10,000 tasks of /bin/true through one real local agent, beside the
    machine's own fork/exec rate measured in the same run, and the CPU the
    scheduler side (this process: job, resource and host managers, placement)
    spent per task;
(b) one job of 50,000 one-second tasks on 900 simulated one-cpu hosts:
    sustained launches/s and total time against the ideal, for one-cpu tasks
    (the issue's case, capped at 900 launches/s by the hosts) and for
    half-cpu tasks (1,800 slots, so the scheduler's launch rate shows);
(c) CreateJob latency over gRPC for 1 and 10,000 instances;
(d) submit -> RUNNING latency of one task on an idle cluster (real agent).

Wall-clock figures depend on what else the machine runs: each note says the load.
`BENCH_SCALE=smoke` runs every part at a tiny size (tests/bench/common.py).
"""

from __future__ import annotations

from peloton.common.geventsetup import setup

setup()

import math  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from peloton.api.client import PelotonClient  # noqa: E402
from peloton.api.gen.peloton.api.v0.job import job_pb2  # noqa: E402
from peloton.api.gen.peloton.api.v0.respool import respool_pb2  # noqa: E402
from peloton.api.gen.peloton.api.v0.task import task_pb2  # noqa: E402
from peloton.cluster.allinone import AllInOne, UpConfig  # noqa: E402
from peloton.core.errors import NotFound  # noqa: E402
from peloton.core.model.resources import Resources  # noqa: E402
from tests.bench.common import cpu_seconds, load, percentile, report, scaled  # noqa: E402

#: Tasks of the real-agent runs and of the simulated canary, and its hosts.
TRUE_TASKS = scaled(10_000, smoke=200)
SIM_TASKS = scaled(50_000, smoke=200)
SIM_HOSTS = scaled(900, smoke=100)


def start(base: Path, backend: str, agents: int = 1) -> tuple[AllInOne, PelotonClient]:
    cluster = AllInOne(UpConfig(jobmgr_port=0, resmgr_port=0, hostmgr_port=0, aurora_port=-1, ui_port=-1,
                                data_dir=base, agents=agents, backend=backend,
                                agent_resources=Resources(2, 8192, 100000)))
    cluster.start()
    client = PelotonClient(jobmgr=f"127.0.0.1:{cluster.ports['jobmgr']}",
                           resmgr=f"127.0.0.1:{cluster.ports['resmgr']}",
                           hostmgr=f"127.0.0.1:{cluster.ports['hostmgr']}", timeout=60)
    return cluster, client


def make_pool(client: PelotonClient, cpu: float) -> str:
    cfg = respool_pb2.ResourcePoolConfig(name="bench")
    cfg.parent.value = "root"
    for kind, amount in (("cpu", cpu), ("memory", cpu * 8192), ("disk", cpu * 100000),
                         ("gpu", 0)):
        cfg.resources.add(kind=kind, reservation=0, limit=amount, share=1)
    return str(client.create_respool(cfg).result.value)


def job_config(pool: str, count: int, cpu: float, command: str,
               mem: float = 1, argv: tuple[str, ...] = ()) -> job_pb2.JobConfig:
    """A batch job of `count` tasks; `command` runs through /bin/sh unless `argv` is given,
    in which case `command` is exec'd directly with that argv (Mesos' shell=false)."""
    cfg = job_pb2.JobConfig(name=f"bench-{count}", instanceCount=count, owningTeam="bench")
    cfg.respoolID.value = pool
    cfg.sla.preemptible = True
    res = cfg.defaultConfig.resource
    res.cpuLimit, res.memLimitMb, res.diskLimitMb = cpu, mem, 1
    cfg.defaultConfig.command.shell = not argv
    cfg.defaultConfig.command.value = command
    cfg.defaultConfig.command.arguments.extend(argv)
    return cfg


def wait_state(client: PelotonClient, job_id: str, done: set[str], timeout: float) -> str:
    deadline = time.monotonic() + timeout
    state = ""
    while time.monotonic() < deadline:
        state = job_pb2.JobState.Name(client.get_job(job_id).jobInfo.runtime.state)
        if state in done:
            return state
        time.sleep(0.2)
    return state


def fork_exec_rate(n: int = scaled(3000, smoke=200)) -> float:
    """/bin/true per second, sequentially, measured in a plain (not gevent) process."""
    code = ("import os,time\n"
            f"n={n}\n"
            "t=time.perf_counter()\n"
            "for _ in range(n):\n"
            "    os.waitpid(os.posix_spawn('/bin/true',['true'],{}),0)\n"
            "print(n/(time.perf_counter()-t))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    return float(out.stdout.strip())


def _true_job(client: PelotonClient, pool: str, n: int,
              agent_pid: int | None = None) -> tuple[float, str, float, float]:
    """(tasks/s, final state, scheduler CPU ms per task, agent CPU ms per task)."""
    cpu0, agent0 = cpu_seconds(), cpu_seconds(agent_pid) if agent_pid else 0.0
    t0 = time.perf_counter()
    # shell=false: the agent execs /bin/true itself, one exec per task (a shell would add one).
    job_id = client.create_job(job_config(pool, n, 0.002, "/bin/true", mem=0,
                                          argv=("true",))).jobId.value
    state = wait_state(client, job_id, {"SUCCEEDED", "FAILED", "KILLED"}, 200)
    rate = n / (time.perf_counter() - t0)
    agent = (cpu_seconds(agent_pid) - agent0) / n * 1000 if agent_pid else 0.0
    return rate, state, (cpu_seconds() - cpu0) / n * 1000, agent


def bench_real_agent(base: Path) -> None:
    rate = fork_exec_rate()
    report("machine.fork_exec_true_per_s", rate, "execs/s",
           note="posix_spawn + wait of /bin/true, sequential, in a separate plain process")
    n = TRUE_TASKS
    # The agent as its own process (`peloton agent`), so it and the scheduler use both cores.
    cluster, client = start(base / "a1", "local", agents=0)
    agent = subprocess.Popen([str(Path(sys.executable).with_name("peloton")), "agent",
                              "--name", "bench-agent", "--hostmgr",
                              f"127.0.0.1:{cluster.ports['hostmgr']}", "--work-dir",
                              str(base / "a1" / "agent"), "--cpus", "2", "--mem-mb", "8192",
                              "--disk-mb", "100000"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while not cluster.hostmgr.host_summaries() and time.monotonic() < deadline:
            time.sleep(0.1)
        tps, state, sched_ms, agent_ms = _true_job(client, make_pool(client, 2), n, agent.pid)
        report("cluster.real_agent.true_tasks_per_s", tps, "tasks/s", target=f">={rate * 0.8:.0f}",
               note=f"{n:,} /bin/true (exec'd without a shell) end to end, one `peloton agent` "
                    f"process ({state}); {tps / rate:.2f} of the machine's sequential fork/exec "
                    f"rate; {load()}")
        report("cluster.real_agent.ratio_vs_forkexec", tps / rate, "x", target=">=0.8",
               note="the line above over machine.fork_exec_true_per_s, both from this run")
        report("cluster.real_agent.scheduler_cpu_ms_per_task", sched_ms, "ms", target="<=0.1",
               note="CPU time (user + system) of the `peloton up` process (job, resource and "
                    "host managers, placement; not the agent) over the run, per task")
        report("cluster.real_agent.agent_cpu_ms_per_task", agent_ms, "ms",
               note="CPU time of the `peloton agent` process per task (its supervisors and "
                    "tasks, its children, not included)")
    finally:
        agent.terminate()
        agent.wait(30)
        client.close()
        cluster.stop()
    # The agent inside the scheduler's process, as `peloton up` runs it.
    cluster, client = start(base / "a2", "local")
    try:
        tps, state, _, _ = _true_job(client, make_pool(client, 2), n)
        report("cluster.real_agent_in_process.true_tasks_per_s", tps, "tasks/s",
               note=f"same, agent inside `peloton up`'s process ({state}); "
                    f"{tps / rate:.2f} of the fork/exec rate; {load()}")
    finally:
        client.close()
        cluster.stop()


def _sim_50k(base: Path, cpu: float) -> tuple[float, int, str, float]:
    """50,000 one-second tasks of `cpu` cpus on 900 one-cpu simulated hosts: seconds from
    create to the job's end, the ideal in seconds, the final state, CPU ms per task."""
    n, hosts = SIM_TASKS, SIM_HOSTS
    cluster, client = start(base, f"sim:{hosts}:1.0:1", agents=0)
    try:
        pool = make_pool(client, hosts)
        cpu0 = cpu_seconds()
        t0 = time.perf_counter()
        job_id = client.create_job(job_config(pool, n, cpu, "sleep 1")).jobId.value
        state = wait_state(client, job_id, {"SUCCEEDED", "FAILED", "KILLED"}, 200)
        total = time.perf_counter() - t0
        # The hosts run int(1 / cpu) tasks each at once; every task takes 1 s.
        return (total, math.ceil(n / (hosts * int(1 / cpu))), state,
                (cpu_seconds() - cpu0) / n * 1000)
    finally:
        client.close()
        cluster.stop()


def bench_sim(base: Path) -> None:
    n, hosts = SIM_TASKS, SIM_HOSTS
    # The literal case: one task per host, so the hosts cap it at 900 launches/s.
    total, ideal, state, _ = _sim_50k(base / "b", 1.0)
    report("cluster.sim_50k.total_vs_ideal", total / ideal, "x", target="<=1.2",
           note=f"{n} x 1 s tasks on {hosts} one-cpu simulated hosts: {total:.1f} s vs ideal "
                f"{ideal:.0f} s ({state}); {load()}")
    report("cluster.sim_50k.launches_per_s", n / total, "launches/s", target=">=1000",
           note=f"{hosts} one-cpu hosts running 1 s tasks cap this at {hosts}/s")
    # Half-cpu tasks: 1,800 slots, so the hosts allow 1,800 launches/s and the
    # scheduler's own launch rate is what the number shows.
    total, ideal, state, cpu_ms = _sim_50k(base / "b2", 0.5)
    report("cluster.sim_50k_half_cpu.launches_per_s", n / total, "launches/s", target=">=1000",
           note=f"{n} x 1 s tasks of 0.5 cpu on the same {hosts} hosts ({2 * hosts:,} slots, so "
                f"at most {2 * hosts:,}/s), averaged over the whole run ({state}); {load()}")
    report("cluster.sim_50k_half_cpu.total_vs_ideal", total / ideal, "x", target="<=1.1",
           note=f"{total:.1f} s vs ideal {ideal:.0f} s = ceil({n} / {2 * hosts}) one-second "
                f"waves; {load()}")
    report("cluster.sim_50k_half_cpu.cpu_ms_per_task", cpu_ms, "ms",
           note="CPU time of this process (every daemon, the simulated hosts and the "
                "benchmark's client) per task")


def bench_create_latency(base: Path) -> None:
    cluster, client = start(base / "c", "sim:100:1000.0:100", agents=0)
    try:
        pool = make_pool(client, 10_000)
        small = []
        for _ in range(scaled(200, smoke=5)):
            t0 = time.perf_counter()
            client.create_job(job_config(pool, 1, 0.001, "sleep 1000"))
            small.append(time.perf_counter() - t0)
        report("cluster.create_job_1.p99_ms", percentile(small, 99) * 1000, "ms", target="<=25",
               note=f"p50 {percentile(small, 50) * 1000:.1f} ms, {len(small)} sequential creates, "
                    f"SQLite; {load()}")
        big = []
        size = scaled(10_000, smoke=100)
        for _ in range(5):
            t0 = time.perf_counter()
            job_id = client.create_job(job_config(pool, size, 0.0001, "sleep 1000")).jobId.value
            big.append(time.perf_counter() - t0)
            # Let the cluster place all of this job before timing the next create.
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and client.get_job(job_id).jobInfo.runtime \
                    .taskStats.get("RUNNING", 0) < size:
                time.sleep(0.2)
        report("cluster.create_job_10000.p99_ms", max(big) * 1000, "ms", target="<=1000",
               note=f"max of 5 creates of {size:,} instances on an otherwise idle cluster "
                    f"(median {sorted(big)[2] * 1000:.0f} ms); {load()}")
    finally:
        client.close()
        cluster.stop()


def _running(client: PelotonClient, job_id: str) -> bool:
    try:
        return bool(client.get_task(job_id, 0).result.runtime.state == task_pb2.RUNNING)
    except NotFound:  # the job engine creates the task after CreateJob answers
        return False


def bench_submit_to_running(base: Path) -> None:
    cluster, client = start(base / "d", "local")
    try:
        pool = make_pool(client, 2)
        samples = []
        # The first job also waits for the new pool's first entitlement cycle: not counted.
        for i in range(scaled(50, smoke=3) + 1):
            t0 = time.perf_counter()
            job_id = client.create_job(job_config(pool, 1, 0.01, "sleep 5")).jobId.value
            while not _running(client, job_id):
                time.sleep(0.002)
            if i:
                samples.append(time.perf_counter() - t0)
            client.stop_tasks(job_id)
        report("cluster.submit_to_running.median_ms", percentile(samples, 50) * 1000, "ms",
               target="<=20", note=f"one task, real agent, {len(samples)} jobs one after another, "
                                   f"polled every 2 ms; {load()}")
        report("cluster.submit_to_running.p99_ms", percentile(samples, 99) * 1000, "ms",
               target="<=50", note=f"same runs; p90 {percentile(samples, 90) * 1000:.0f} ms")
    finally:
        client.close()
        cluster.stop()


def main() -> None:
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        base = Path(tmp)
        bench_submit_to_running(base)
        bench_create_latency(base)
        bench_real_agent(base)
        bench_sim(base)


if __name__ == "__main__":
    main()
