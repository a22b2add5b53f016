"""Rolling-update benchmarks (issue 5/6, item 7): `peloton up` on simulated hosts, in this process.

(a) a 1,000-instance SERVICE job replaced (v1alpha ReplaceJob, new command) with
    batch size 100: time from ReplaceJob to the workflow's SUCCEEDED against the
    ideal, which is what the simulated hosts alone would take;
(b) 100 services of 90 instances each, all replaced at once (the original
    Peloton's parallel update test): how many updates complete and how long
    the last one takes.

The simulated hosts make a launched run RUNNING `START_SECS` after launch and
kill at once, so an update batch can be no faster than `START_SECS`; every
second beyond that is the scheduler's (kill, event handling, re-placement,
launch, the workflow noticing the batch is done).
"""

from __future__ import annotations

from peloton.common.geventsetup import setup

setup()

import math  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

from gevent.pool import Pool  # noqa: E402

from peloton.api.client import PelotonClient  # noqa: E402
from peloton.api.gen.peloton.api.v0.respool import respool_pb2  # noqa: E402
from peloton.api.gen.peloton.api.v1alpha.job.stateless import stateless_pb2  # noqa: E402
from tests.bench.bench_cluster import start  # noqa: E402
from tests.bench.common import report  # noqa: E402

#: Seconds a simulated run spends STARTING before it is RUNNING: the floor of each batch.
START_SECS = 1.0
#: Simulated runs of a service must outlive the benchmark (a run that ends is restarted).
TASK_SECS = 100_000
#: ReplaceJob calls in flight at once in (b) (well under the hub's 64 threads).
CLIENT_CALLS = 16
TERMINAL = {stateless_pb2.WORKFLOW_STATE_SUCCEEDED, stateless_pb2.WORKFLOW_STATE_FAILED,
            stateless_pb2.WORKFLOW_STATE_ABORTED, stateless_pb2.WORKFLOW_STATE_ROLLED_BACK}


def make_pool(client: PelotonClient, cpu: float) -> str:
    """A pool whose reservation covers `cpu`: services are not preemptible, and
    non-preemptible pods are admitted only within the reservation."""
    cfg = respool_pb2.ResourcePoolConfig(name="services")
    cfg.parent.value = "root"
    for kind, amount in (("cpu", cpu), ("memory", cpu * 4096), ("disk", cpu * 16384),
                         ("gpu", 0)):
        cfg.resources.add(kind=kind, reservation=amount, limit=amount, share=1)
    return str(client.create_respool(cfg).result.value)


def service_spec(pool: str, name: str, count: int, command: str) -> stateless_pb2.JobSpec:
    """A SERVICE job of `count` small pods running `command`."""
    spec = stateless_pb2.JobSpec(name=name, owner="bench", owning_team="bench",
                                 instance_count=count)
    spec.respool_id.value = pool
    container = spec.default_spec.containers.add()
    container.resource.cpu_limit, container.resource.mem_limit_mb = 0.1, 1
    container.resource.disk_limit_mb = 1
    container.entrypoint.value = command
    return spec


def job_status(client: PelotonClient, job_id: str) -> stateless_pb2.JobStatus:
    """The job's status (a summary read: the 1,000-pod spec is not sent back)."""
    return client.get_stateless_job(job_id, summary_only=True).summary.status


def running(client: PelotonClient, job_id: str) -> int:
    """Pods RUNNING now."""
    return job_status(client, job_id).pod_stats.get("POD_STATE_RUNNING", 0)


def wait_until(check: Callable[[], bool], timeout: float, poll: float = 0.1) -> bool:
    """Poll `check` until it holds or `timeout` seconds pass; whether it held."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(poll)
    return False


def create_running(client: PelotonClient, pool: str, name: str, count: int) -> str:
    """Create a service and return its id once every pod is RUNNING."""
    job_id = client.create_stateless_job(service_spec(pool, name, count, "sleep 1000")) \
        .job_id.value
    if not wait_until(lambda: running(client, job_id) == count, 120, poll=0.2):
        raise RuntimeError(f"{name}: only {running(client, job_id)} of {count} pods came up")
    return job_id


def replace(client: PelotonClient, pool: str, job_id: str, name: str, count: int,
            batch: int) -> str:
    """Start an UPDATE workflow to a new command (every pod changes); its entity version."""
    version = job_status(client, job_id).version.value
    return str(client.replace_job(job_id, version, service_spec(pool, name, count, "sleep 2000"),
                                  stateless_pb2.UpdateSpec(batch_size=batch)).version.value)


def ended(status: stateless_pb2.WorkflowStatus, version: str) -> bool:
    """Whether the workflow of entity version `version` has ended (an earlier one's end,
    such as the create's, does not count)."""
    return status.version.value == version and status.state in TERMINAL


def workflow(client: PelotonClient, job_id: str) -> stateless_pb2.WorkflowStatus:
    """The job's current (or last) workflow status."""
    return job_status(client, job_id).workflow_status


def bench_one_large(base: Path) -> None:
    """(a) one 1,000-instance service, batch size 100."""
    count, batch = 1000, 100
    hosts = 200  # 2,000 slots of 0.1 cpu: room for every pod, no host is the bottleneck
    cluster, client = start(base / "a", f"sim:{hosts}:{TASK_SECS}:1:{START_SECS}", agents=0)
    try:
        pool = make_pool(client, hosts)
        job_id = create_running(client, pool, "svc-1000", count)
        t0 = time.perf_counter()
        version = replace(client, pool, job_id, "svc-1000", count, batch)
        answered = time.perf_counter() - t0
        wait_until(lambda: ended(workflow(client, job_id), version), 120, poll=0.05)
        total = time.perf_counter() - t0
        status = workflow(client, job_id)
        state = stateless_pb2.WorkflowState.Name(status.state).removeprefix("WORKFLOW_STATE_")
        batches = math.ceil(count / batch)
        ideal = batches * START_SECS  # simulated kills are instant
        report("updates.service_1000_batch_100.total_vs_ideal", total / ideal, "x",
               target="<=1.2",
               note=f"ReplaceJob of a {count}-pod service, batch size {batch}: {total:.1f} s "
                    f"vs ideal {ideal:.0f} s = {batches} batches x {START_SECS:.0f} s simulated "
                    f"start (kill is instant) ({state}, {status.num_instances_completed} pods "
                    f"done; ReplaceJob answered in {answered * 1000:.0f} ms)")
    finally:
        client.close()
        cluster.stop()


def summaries(client: PelotonClient) -> dict[str, stateless_pb2.JobStatus]:
    """Every job's status by id, in one ListJobs stream (cheaper than 100 GetJob calls a poll,
    which would compete with the scheduler for the same two cores)."""
    return {s.job_id.value: s.status for chunk in client.list_stateless_jobs() for s in chunk.jobs}


def bench_parallel(base: Path) -> None:
    """(b) 100 services of 90 instances, all updated at once."""
    jobs, count, batch = 100, 90, 10
    hosts = 1000  # 10,000 slots of 0.1 cpu for 9,000 pods
    cluster, client = start(base / "b", f"sim:{hosts}:{TASK_SECS}:1:{START_SECS}", agents=0)
    try:
        pool = make_pool(client, hosts)
        names = [f"svc-{i:03d}" for i in range(jobs)]
        ids = [client.create_stateless_job(service_spec(pool, n, count, "sleep 1000"))
               .job_id.value for n in names]
        if not wait_until(lambda: sum(s.pod_stats.get("POD_STATE_RUNNING", 0)
                                      for s in summaries(client).values()) == jobs * count,
                          120, poll=0.5):
            raise RuntimeError("the 100 services did not all come up")
        t0 = time.perf_counter()
        # The ReplaceJob calls go out concurrently, but at most CLIENT_CALLS at a time: an
        # in-process gRPC call parks a hub thread (peloton/common/geventsetup.py), and 100 at
        # once would exhaust the pool.
        def send(job: tuple[str, str]) -> str:
            return replace(client, pool, job[0], job[1], count, batch)
        versions = dict(zip(ids, Pool(CLIENT_CALLS).map(send, zip(ids, names, strict=True)),
                            strict=True))
        sent = time.perf_counter() - t0
        final: dict[str, int] = {}

        def all_done() -> bool:
            for job_id, status in summaries(client).items():
                if ended(status.workflow_status, versions[job_id]):
                    final[job_id] = status.workflow_status.state
            return len(final) == jobs
        wait_until(all_done, 120, poll=0.5)
        total = time.perf_counter() - t0
        ok = sum(1 for state in final.values() if state == stateless_pb2.WORKFLOW_STATE_SUCCEEDED)
        ideal = math.ceil(count / batch) * START_SECS
        report("updates.parallel_100x90.completed", ok, "updates", target=">=100",
               note=f"{jobs} services x {count} pods replaced at once, batch size {batch}, "
                    f"{hosts} simulated hosts; {len(final)} reached a terminal state")
        report("updates.parallel_100x90.total_s", total, "s",
               note=f"first ReplaceJob to the last SUCCEEDED, polled every 0.5 s "
                    f"({jobs * count} pods restarted, {jobs * count / total:.0f}/s; all {jobs} "
                    f"ReplaceJob calls answered within {sent:.1f} s); one update alone cannot "
                    f"beat {ideal:.0f} s ({math.ceil(count / batch)} batches x "
                    f"{START_SECS:.0f} s start)")
    finally:
        client.close()
        cluster.stop()


def main() -> None:
    """Run both benchmarks, each on its own fresh cluster."""
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        base = Path(tmp)
        bench_one_large(base)
        bench_parallel(base)


if __name__ == "__main__":
    main()
