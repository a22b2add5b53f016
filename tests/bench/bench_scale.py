"""Peloton's scale on one machine (issue 16): many big jobs on 10,000 simulated hosts.

The shape of Peloton's largest published benchmark: 10 jobs of N instances each, every
task 0.5 cpu for 1 s, on `peloton up --backend sim:10000:1:1` (10,000 one-cpu hosts, so
20,000 slots), the full daemon stack in this process.  The ten CreateJob calls go back
to back, so each later one is answered while earlier big jobs still have their tasks
created in the background; then every job is polled until it ends.

- `scale.launches_per_s` (>= 10,000): tasks over the seconds from the first create to
  the last job's end;
- `scale.total_vs_ideal` (<= 2): those seconds over the ideal ceil(tasks / 20,000);
- `scale.create_job_max_ms` (<= 1,000): the slowest of the ten CreateJob answers;
- `scale.rss_mb` (<= 1,024): peak resident memory of the process;
- `scale.cpu_ms_per_task`: CPU of the process (every daemon and the simulated hosts).

Sizes: N = 10,000 by default (100,000 tasks, ideal 5 s), `BENCH_SCALE=full` N = 100,000
(1,000,000 tasks, ideal 50 s: several minutes, beyond `make bench`'s budget; run it as
`BENCH_SCALE=full python -m tests.bench.bench_scale`), smoke 10 x 50 on 100 hosts.
"""

from __future__ import annotations

from peloton.common.geventsetup import setup

setup()

import math  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402

import gevent  # noqa: E402

from peloton.api.client import PelotonClient  # noqa: E402
from peloton.api.gen.peloton.api.v0.job import job_pb2  # noqa: E402
from tests.bench.bench_cluster import job_config, make_pool, start  # noqa: E402
from tests.bench.common import cpu_seconds, load, report, rss_mb, scaled  # noqa: E402

JOBS = 10
INSTANCES = scaled(10_000, smoke=50, full=100_000)
HOSTS = scaled(10_000, smoke=100)
#: One-cpu simulated hosts whose tasks run for 1 s, 1 s after launch.
BACKEND = f"sim:{HOSTS}:1:1"
DONE = {"SUCCEEDED", "FAILED", "KILLED"}
TOTAL_TASKS = JOBS * INSTANCES
#: Seconds a whole shape may take from the first create to the last job's end.
DEADLINE_S = scaled(600, smoke=120, full=3600)
SHAPE = f"{JOBS} jobs x {INSTANCES:,} tasks of 0.5 cpu, 1 s, on {HOSTS:,} one-cpu simulated hosts"


@dataclass(frozen=True)
class ShapeRun:
    """What one run of the shape measured."""

    #: Seconds from the first CreateJob to the last job's end (or the deadline).
    total_s: float
    #: Seconds each CreateJob took to answer, in the order sent.
    answers: list[float]
    #: Terminal state of each job that ended, by job id.
    states: dict[str, str]
    #: Tasks that reached a terminal state (every task when every job ended).
    tasks_done: int

    def launches_per_s(self) -> float:
        """Tasks run to their end per second of the run."""
        return self.tasks_done / self.total_s

    def ideal_s(self) -> int:
        """The ideal seconds for the tasks that ended: one-second waves over two half-cpu
        slots per host."""
        return max(1, math.ceil(self.tasks_done / (2 * HOSTS)))

    def ended(self) -> str:
        """'10 SUCCEEDED' or the mix of terminal states, or 'none ended'."""
        got = list(self.states.values())
        return ", ".join(f"{got.count(s)} {s}" for s in sorted(set(got))) or "none ended"

    def median_answer_ms(self) -> float:
        return sorted(self.answers)[len(self.answers) // 2] * 1000


def run_shape(clients: Sequence[PelotonClient], pool: str, deadline_s: float = DEADLINE_S) -> ShapeRun:
    """Create the JOBS jobs, job i through `clients[i % len(clients)]`, and poll each through
    its client until every job ended or `deadline_s` passed.

    Each client gets its share of the creates back to back, all clients at once: with one
    client that is the ten calls in a row; with one per job manager member each member
    answers its creates while the others' are being created too.
    """
    config = job_config(pool, INSTANCES, 0.5, "sleep 1")
    answers: list[float] = [0.0] * JOBS
    ids: list[str] = [""] * JOBS

    def send(k: int) -> None:
        for i in range(k, JOBS, len(clients)):
            t = time.perf_counter()
            ids[i] = clients[k].create_job(config).jobId.value
            answers[i] = time.perf_counter() - t

    t0 = time.perf_counter()
    gevent.joinall([gevent.spawn(send, k) for k in range(len(clients))], raise_error=True)
    states: dict[str, str] = {}
    deadline = time.monotonic() + deadline_s
    while len(states) < JOBS and time.monotonic() < deadline:
        for i, job_id in enumerate(ids):
            if job_id not in states:
                info = clients[i % len(clients)].get_job(job_id).jobInfo
                state = job_pb2.JobState.Name(info.runtime.state)
                if state in DONE:
                    states[job_id] = state
        time.sleep(0.5)
    total = time.perf_counter() - t0
    done = INSTANCES * len(states)
    for i, job_id in enumerate(ids):  # at the deadline: count the ended tasks of the others
        if job_id not in states:
            stats = clients[i % len(clients)].get_job(job_id).jobInfo.runtime.taskStats
            done += sum(stats.get(s, 0) for s in DONE)
    return ShapeRun(total, answers, states, done)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cluster, client = start(Path(tmp), BACKEND, agents=0)
        try:
            pool = make_pool(client, HOSTS)
            cpu0 = cpu_seconds()
            run = run_shape([client], pool)
            cpu = cpu_seconds() - cpu0
        finally:
            client.close()
            cluster.stop()
    total = run.total_s
    report("scale.launches_per_s", run.launches_per_s(), "launches/s", ">=10000",
           f"{SHAPE}: {total:.1f} s from the first create to the last job's end ({run.ended()}); "
           f"{load()}")
    report("scale.total_vs_ideal", total / run.ideal_s(), "x", "<=2",
           f"ideal {run.ideal_s()} s = {run.tasks_done:,} tasks / {2 * HOSTS:,} slots "
           "one-second waves")
    report("scale.create_job_max_ms", max(run.answers) * 1000, "ms", "<=1000",
           f"the slowest of {JOBS} CreateJob calls of {INSTANCES:,} instances sent back to back "
           f"(median {run.median_answer_ms():.0f} ms); {load()}")
    report("scale.rss_mb", rss_mb(), "MB", "<=1024", "peak RSS of the process (all daemons)")
    report("scale.cpu_ms_per_task", cpu / max(1, run.tasks_done) * 1000, "ms",
           note="CPU time of the process (every daemon and the simulated hosts) per task")


if __name__ == "__main__":
    main()
