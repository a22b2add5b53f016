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
from pathlib import Path  # noqa: E402

from peloton.api.gen.peloton.api.v0.job import job_pb2  # noqa: E402
from tests.bench.bench_cluster import job_config, make_pool, start  # noqa: E402
from tests.bench.common import cpu_seconds, load, report, rss_mb, scaled  # noqa: E402

JOBS = 10
INSTANCES = scaled(10_000, smoke=50, full=100_000)
HOSTS = scaled(10_000, smoke=100)
DONE = {"SUCCEEDED", "FAILED", "KILLED"}


def main() -> None:
    total_tasks = JOBS * INSTANCES
    with tempfile.TemporaryDirectory() as tmp:
        cluster, client = start(Path(tmp), f"sim:{HOSTS}:1:1", agents=0)
        try:
            pool = make_pool(client, HOSTS)
            config = job_config(pool, INSTANCES, 0.5, "sleep 1")
            cpu0 = cpu_seconds()
            t0 = time.perf_counter()
            answers: list[float] = []
            ids = []
            for _ in range(JOBS):
                t = time.perf_counter()
                ids.append(client.create_job(config).jobId.value)
                answers.append(time.perf_counter() - t)
            states: dict[str, str] = {}
            deadline = time.monotonic() + scaled(600, smoke=120, full=3600)
            while len(states) < JOBS and time.monotonic() < deadline:
                for job_id in ids:
                    if job_id not in states:
                        state = job_pb2.JobState.Name(client.get_job(job_id).jobInfo.runtime.state)
                        if state in DONE:
                            states[job_id] = state
                time.sleep(0.5)
            total = time.perf_counter() - t0
            cpu = cpu_seconds() - cpu0
        finally:
            client.close()
            cluster.stop()
    ideal = math.ceil(total_tasks / (2 * HOSTS))
    ended = ", ".join(f"{n} {s}" for s in sorted(set(states.values()))
                      for n in [list(states.values()).count(s)]) or "none ended"
    shape = f"{JOBS} jobs x {INSTANCES:,} tasks of 0.5 cpu, 1 s, on {HOSTS:,} one-cpu simulated hosts"
    report("scale.launches_per_s", total_tasks / total, "launches/s", ">=10000",
           f"{shape}: {total:.1f} s from the first create to the last job's end ({ended}); "
           f"{load()}")
    report("scale.total_vs_ideal", total / ideal, "x", "<=2",
           f"ideal {ideal} s = {total_tasks:,} tasks / {2 * HOSTS:,} slots one-second waves")
    report("scale.create_job_max_ms", max(answers) * 1000, "ms", "<=1000",
           f"the slowest of {JOBS} CreateJob calls of {INSTANCES:,} instances sent back to back "
           f"(median {sorted(answers)[JOBS // 2] * 1000:.0f} ms); {load()}")
    report("scale.rss_mb", rss_mb(), "MB", "<=1024", "peak RSS of the process (all daemons)")
    report("scale.cpu_ms_per_task", cpu / total_tasks * 1000, "ms",
           note="CPU time of the process (every daemon and the simulated hosts) per task")


if __name__ == "__main__":
    main()
