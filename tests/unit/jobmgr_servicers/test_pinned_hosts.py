"""Host pinning under host changes: a stateful task waits for its host rather than moving, and a
daemon job's instance goes when its host goes (real core placement, see placing.py)."""

from __future__ import annotations

from typing import Any

from peloton.api.gen.peloton.api.v0.job import job_pb2
from peloton.api.gen.peloton.api.v1alpha.pod import pod_pb2
from peloton.api.gen.peloton.api.v1alpha.pod.svc import pod_svc_pb2
from peloton.core.model.ids import TaskId
from peloton.core.states import HostState
from tests.unit.jobmgr_servicers.conftest import Cluster
from tests.unit.jobmgr_servicers.helpers import POOL, RUNNING, pods
from tests.unit.jobmgr_servicers.placing import CorePlacement

PENDING = pod_pb2.POD_STATE_PENDING


def _create(c: Cluster, name: str, kind: int, *, volume: bool = False) -> str:
    config = job_pb2.JobConfig(name=name, owner="alice", type=kind, instanceCount=1)  # type: ignore[arg-type]
    config.respoolID.value = POOL
    res = config.defaultConfig.resource
    res.cpuLimit, res.memLimitMb, res.diskLimitMb = 0.1, 32, 10
    config.defaultConfig.command.value = "serve"
    if volume:
        config.defaultConfig.volume.containerPath = "/data"
        config.defaultConfig.volume.sizeMB = 10
    resp = c.v0jobs.Create(job_pb2.CreateRequest(config=config), timeout=10)
    assert not resp.HasField("error"), resp.error
    return str(resp.jobId.value)


def _set_state(c: Cluster, host: str, state: HostState) -> None:
    c.hosts.hosts[host].state = state


def _job_runs(c: Cluster, jid: str) -> dict[str, str]:
    """The job's runs launched on some host -> that host."""
    return {run: host for run, host in c.hosts.runs().items() if run.startswith(jid)}


def _pod(c: Cluster, jid: str) -> Any:
    (pod,) = pods(c, jid)
    return pod


def _run_number(pod: Any) -> int:
    return int(pod.status.pod_id.value.rsplit("-", 1)[1])


def test_stateful_task_waits_for_its_host_instead_of_moving(cluster: Cluster) -> None:
    placement = CorePlacement(cluster)
    jid = _create(cluster, "db/prod/pg", job_pb2.SERVICE, volume=True)
    # The job engine creates the task after Create replies: wait for it to exist first.
    cluster.until(lambda: pods(cluster, jid), "the task created")
    first = cluster.until(lambda: (p := _pod(cluster, jid)).status.state == RUNNING and p,
                          "the stateful task running")
    home = first.status.host
    assert home and _run_number(first) == 1

    _set_state(cluster, home, HostState.DRAINING)  # maintenance: its run is moved off
    moved = cluster.until(lambda: (p := _pod(cluster, jid)).status.state == PENDING and
                          _run_number(p) == 2 and p, "a new run waiting after the drain")
    assert moved.status.desiredHost == home
    _set_state(cluster, home, HostState.DOWN)
    # Three other hosts have room; the run must not take one. Let placement try many times.
    missed = placement.misses[TaskId(jid, 0)]
    cluster.until(lambda: placement.missed(TaskId(jid, 0)) >= missed + 20,
                  "20 more placement attempts")
    still = _pod(cluster, jid)
    assert still.status.state == PENDING and _run_number(still) == 2, still.status
    assert _job_runs(cluster, jid) == {}, "a stateful task was moved to another host"

    _set_state(cluster, home, HostState.UP)
    back = cluster.until(lambda: (p := _pod(cluster, jid)).status.state == RUNNING and p,
                         "the stateful task running again")
    assert back.status.host == home and _run_number(back) == 2
    assert list(_job_runs(cluster, jid).values()) == [home]  # one run, on its own host
    events = cluster.pods.GetPodEvents(pod_svc_pb2.GetPodEventsRequest(
        pod_name={"value": f"{jid}-0"}), timeout=10).events
    assert {e.hostname for e in events if e.hostname} == {home}


def test_daemon_instance_of_a_departing_host_is_stopped_and_removed(cluster: Cluster) -> None:
    CorePlacement(cluster)
    jid = _create(cluster, "infra/node-agent", job_pb2.DAEMON)
    hosts = [f"host-{i}" for i in range(4)]

    def spread() -> dict[str, str] | None:
        runs = _job_runs(cluster, jid)
        running = [p for p in pods(cluster, jid) if p.status.state == RUNNING]
        return runs if len(running) == 4 and sorted(runs.values()) == hosts else None

    before = cluster.until(spread, "one daemon instance on each of the 4 hosts")
    leaving = next(run for run, host in before.items() if host == "host-3")
    stays = {run for run in before if run != leaving}

    _set_state(cluster, "host-3", HostState.DRAINING)

    def removed() -> list[Any] | None:
        left = pods(cluster, jid)
        return left if len(left) == 3 else None

    left = cluster.until(removed, "the departed host's instance removed")
    assert leaving in cluster.hosts.killed
    assert set(_job_runs(cluster, jid)) == stays  # the others were not touched
    assert {p.status.host for p in left} == {"host-0", "host-1", "host-2"}
    assert all(p.status.state == RUNNING for p in left)

    _set_state(cluster, "host-3", HostState.UP)  # back: it gets an instance again
    def four() -> dict[str, str] | None:
        runs = _job_runs(cluster, jid)
        return runs if len(runs) == 4 else None

    again = cluster.until(four, "an instance on the returning host")
    assert sorted(again.values()) == hosts
