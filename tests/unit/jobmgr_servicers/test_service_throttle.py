"""A failed service task is throttled: it says so and waits 30 s, then 60 s, before running again.

The cluster's job manager reads a clock the test moves forward, so the
backoff is observed without waiting for it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from peloton.api.gen.peloton.api.v1alpha.pod import pod_pb2
from peloton.core.states import TaskState
from tests.unit.jobmgr_servicers.conftest import Cluster
from tests.unit.jobmgr_servicers.helpers import RUNNING, create, pods, service_spec, wait_workflow

FAILED = pod_pb2.POD_STATE_FAILED


def _pod(c: Cluster, jid: str) -> Any:
    (pod,) = pods(c, jid)
    return pod


def _run(pod: Any) -> int:
    return int(pod.status.pod_id.value.rsplit("-", 1)[1])


def _due_in(c: Cluster, jid: str) -> float | None:
    """Seconds until the task goal-state engine looks at instance 0 again (engine clock)."""
    tasks = c.jm.queue.tasks
    deadline = tasks.deadline((jid, 0))
    return None if deadline is None else deadline - c.clock.monotonic()


def _fail(c: Cluster, jid: str) -> None:
    """The job's run exits non-zero; its host reports it at the test's time."""
    def fail() -> None:
        (run,) = [r for r in c.hosts.runs() if r.startswith(jid)]
        c.hosts.finish(run, TaskState.FAILED)
        c.hosts.events[-1] = dataclasses.replace(c.hosts.events[-1], timestamp=c.clock.wall())

    fail()


def _throttled(c: Cluster, jid: str, run: int) -> Any:
    def probe() -> Any:
        pod = _pod(c, jid)
        due = _due_in(c, jid)
        return pod if (pod.status.state == FAILED and _run(pod) == run and
                       "throttled" in pod.status.message and due is not None and due > 5) else None

    return c.until(probe, f"run {run} failed and throttled")


def _poke(c: Cluster, jid: str) -> None:
    c.jm.queue.enqueue_task(jid, 0)


def test_failed_service_task_is_throttled_with_doubling_backoff(cluster: Cluster) -> None:
    clock = cluster.clock
    jid = create(cluster, service_spec(1)).job_id.value
    wait_workflow(cluster, jid, "WORKFLOW_STATE_SUCCEEDED")
    cluster.until(lambda: _pod(cluster, jid).status.state == RUNNING, "the service running")

    _fail(cluster, jid)
    pod = _throttled(cluster, jid, 1)
    assert pod.status.message.startswith("Task throttled due to failure")
    assert pod.status.failure_count == 1
    due = _due_in(cluster, jid)
    assert due is not None and 28 < due <= 30, due  # the first retry waits 30 s

    clock.offset = 25.0  # not yet due: looking again changes nothing
    _poke(cluster, jid)
    cluster.until(lambda: (d := _due_in(cluster, jid)) is not None and d < 6,
                  "the retry rescheduled for the rest of the 30 s")
    assert _run(_pod(cluster, jid)) == 1 and _pod(cluster, jid).status.state == FAILED

    clock.offset = 31.0  # due: the next run starts
    _poke(cluster, jid)
    pod = cluster.until(lambda: (p := _pod(cluster, jid)).status.state == RUNNING and
                        _run(p) == 2 and p, "run 2 running after the backoff")
    assert "throttled" not in pod.status.message

    _fail(cluster, jid)  # the second failure waits twice as long
    pod = _throttled(cluster, jid, 2)
    assert pod.status.failure_count == 2
    due = _due_in(cluster, jid)
    assert due is not None and 58 < due <= 60, due
    clock.offset = 31.0 + 61.0
    _poke(cluster, jid)
    cluster.until(lambda: (p := _pod(cluster, jid)).status.state == RUNNING and _run(p) == 3,
                  "run 3 running after the second backoff")
