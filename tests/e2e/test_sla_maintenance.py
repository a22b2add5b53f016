"""Host maintenance waits for job SLAs, end to end: `peloton up` with three local agents.

A service of three instances, one per host, allows one unavailable instance
(sla.maximumUnavailableInstances: 1) and has a health check that first passes a few
seconds after start.  Two hosts are put under maintenance at once (Peloton's v0
HostService.StartMaintenance): one of their instances moves to the third host at once;
the other waits on its draining host until the moved one is back (RUNNING and healthy),
then moves too, and both hosts go DOWN.  The pod events show the order.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from peloton.api.gen.peloton.api.v0.host import host_pb2
from peloton.api.gen.peloton.api.v0.task import task_pb2
from tests.e2e.conftest import write_pool
from tests.e2e.test_batch_jobs import create
from tests.harness.cluster import UpCluster, eventually

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]
S = task_pb2.TaskState

SERVICE = """\
name: sla-drain
type: SERVICE
owningTeam: e2e
instanceCount: 3
placementStrategy: PLACEMENT_STRATEGY_SPREAD_JOB
sla:
  preemptible: false
  maximumUnavailableInstances: 1
defaultConfig:
  resource:
    cpuLimit: 0.1
    memLimitMb: 16
    diskLimitMb: 10
  healthCheck:
    enabled: true
    type: COMMAND
    initialIntervalSecs: 3
    intervalSecs: 1
    timeoutSecs: 5
    maxConsecutiveFailures: 3
    commandCheck:
      command: "true"
  command:
    shell: true
    value: "sleep 1000"
"""


@pytest.fixture
def up(tmp_path: Path) -> Iterator[UpCluster]:
    cluster = UpCluster(tmp_path, agents=3, extra=[
        "--agent-cpus", "1", "--agent-mem-mb", "1024", "--agent-disk-mb", "100000"]).start()
    try:
        cluster.cli("respool", "create", "/e2e", str(write_pool(
            tmp_path, "e2e", cpu_res=1, mem_res=512, disk_res=100)))
        yield cluster
    finally:
        cluster.close()


def healthy_hosts(up: UpCluster, job_id: str) -> dict[int, str] | None:
    """instance -> host once every instance is RUNNING and healthy."""
    tasks = up.client.list_tasks(job_id).result.value
    if len(tasks) == 3 and all(t.runtime.state == S.RUNNING and
                               t.runtime.healthy == task_pb2.HEALTHY for t in tasks.values()):
        return {i: t.runtime.host for i, t in tasks.items()}
    return None


def host_state(up: UpCluster, hostname: str) -> int:
    return next(h.state for h in up.client.query_hosts().host_infos if h.hostname == hostname)


def when(up: UpCluster, job_id: str, instance: int, run: int, state: str,
         healthy: str = "") -> datetime:
    """When the instance's `run` first reached `state` (and `healthy`), from its pod events."""
    events = up.client.get_pod_events(job_id, instance).result
    times = [datetime.fromisoformat(e.timestamp.replace("Z", "+00:00")) for e in events
             if e.taskId.value.endswith(f"-{instance}-{run}") and e.actualState == state
             and (not healthy or e.healthy == healthy)]
    assert times, f"instance {instance} run {run} never {state} {healthy}: {list(events)}"
    return min(times)


def test_a_drain_waits_for_max_unavailable_then_proceeds_as_instances_come_back(
        up: UpCluster, tmp_path: Path) -> None:
    spec = tmp_path / "sla-drain.yaml"
    spec.write_text(SERVICE)
    job_id = create(up, "/e2e", spec)
    hosts = eventually(lambda: healthy_hosts(up, job_id), 90, "three healthy instances")
    assert len(set(hosts.values())) == 3, hosts
    drained = [hosts[0], hosts[1]]
    for name in drained:
        up.client.start_maintenance(name)
    unavailable_seen = 0

    def both_down() -> bool:
        nonlocal unavailable_seen
        tasks = up.client.list_tasks(job_id).result.value
        down = sum(1 for t in tasks.values()
                   if t.runtime.state != S.RUNNING or t.runtime.healthy != task_pb2.HEALTHY)
        unavailable_seen = max(unavailable_seen, down)
        return all(host_state(up, h) == host_pb2.HOST_STATE_DOWN for h in drained)

    eventually(both_down, 120, "both hosts DOWN")
    assert unavailable_seen <= 1
    final = eventually(lambda: healthy_hosts(up, job_id), 90, "three healthy instances again")
    assert set(final.values()) == {hosts[2]}, final
    # One instance moved first; the other was stopped only after the first was back.
    first, second = sorted((0, 1), key=lambda i: when(up, job_id, i, 1, "KILLING"))
    back = when(up, job_id, first, 2, "RUNNING", healthy="HEALTHY")
    assert when(up, job_id, second, 1, "KILLING") >= back
    for name in drained:
        up.client.complete_maintenance(name)
    assert {host_state(up, h) for h in drained} == {host_pb2.HOST_STATE_UP}
    up.cli("job", "stop", job_id)
