"""Updates that pin instances (updateOnlyTheseInstances) and updates whose config keeps
failing, through the bridge's Thrift API in front of a real job manager (issue 22 item 5 e;
Peloton's pkg/aurorabridge/handler_startjobupdate.go createJobSpecForUpdate, Aurora's
JobUpdateControllerImpl and OneWayJobUpdater).

- a pinned update starts new runs only for the pinned instances, and its details name
  only them (instructions and instance events); its rollback touches only them;
- pinning an instance beyond the count adds it, a lower count removes the rest;
- a pinned stopped instance is started again with the new config;
- an update whose new config keeps failing, with rollbackOnFailure, ends ROLLED_BACK with
  the old config running (Aurora's rule: a failed forward update rolls back).
"""

from __future__ import annotations

from typing import Any

import pytest

from aurorabridge.atop.job_key import job_key as to_key
from aurorabridge.thrift_api import api
from peloton.core.states import TaskState
from tests.unit.aurorabridge import builders as b
from tests.unit.aurorabridge.on_jobmgr import Bridge, bridge_fixture  # noqa: F401 (fixture)
from tests.unit.jobmgr_servicers.conftest import cluster  # noqa: F401 (fixture)

pytestmark = pytest.mark.timeout(120)
U = api.JobUpdateStatus
A = api.JobUpdateAction
S = api.ScheduleStatus
KEY = api.JobKey(role="www", environment="devel", name="hello")
ACTIVE = {S.PENDING, S.THROTTLED, S.ASSIGNED, S.STARTING, S.RUNNING, S.KILLING, S.RESTARTING}


def request(tag: str, instances: int, only: list[tuple[int, int]] | None = None, watch_ms: int = 0,
            **settings: Any) -> Any:
    req = b.update_request(b.task_config(cmdlines=(f"serve {tag}",)), instances=instances, only=only,
                           **settings)
    req.settings.minWaitInInstanceRunningMs = watch_ms
    return req


def start(bridge: Bridge, tag: str, instances: int = 5, only: list[tuple[int, int]] | None = None,
          **settings: Any) -> Any:
    result = bridge.ok("startJobUpdate", request=request(tag, instances, only, **settings))
    return result.startJobUpdateResult.key


def deployed(bridge: Bridge, instances: int = 5) -> str:
    """v1 of `instances` instances, all running; the job's id."""
    first = start(bridge, "v1", instances)
    bridge.until(lambda: bridge.status(first) == U.ROLLED_FORWARD, "the first deploy done")
    bridge.until(lambda: len(bridge.tasks(KEY, {S.RUNNING})) == instances, "v1 running")
    job = bridge.ctx.find(to_key(KEY))
    assert job is not None
    return job.job_id


def running(bridge: Bridge) -> dict[int, tuple[str, str]]:
    """instance -> (task id, the command it runs) of the job's active tasks."""
    out = {}
    for t in bridge.ok("getTasksStatus", query=api.TaskQuery(jobKeys=[KEY], statuses=ACTIVE)) \
            .scheduleStatusResult.tasks:
        task = t.assignedTask.task
        out[t.assignedTask.instanceId] = (t.assignedTask.taskId, task.executorConfig.data)
    return out


def tag_of(data: str) -> str:
    return next(word for word in ("v1", "v2", "v3") if f"serve {word}" in data)


def instance_of(run_id: str) -> int:
    return int(run_id.rsplit("-", 2)[1])


def launched_instances(bridge: Bridge, jid: str, since: int) -> list[int]:
    """Instances of the job handed to the host manager after the first `since` launches."""
    return [instance_of(spec.run_id) for _h, spec in bridge.cluster.hosts.launches[since:]
            if spec.run_id.startswith(jid)]


def ids(ranges: Any) -> list[int]:
    """Instance ids of Aurora ranges."""
    return sorted({i for r in ranges for i in range(r.first, r.last + 1)})


def event_instances(details: Any, *actions: int) -> set[int]:
    return {e.instanceId for e in details.instanceEvents if not actions or e.action in actions}


def test_a_pinned_update_touches_reports_and_rolls_back_only_its_instances(bridge: Bridge) -> None:
    jid = deployed(bridge)
    before = running(bridge)
    since = len(bridge.cluster.hosts.launches)
    pinned = start(bridge, "v2", only=[(1, 1), (3, 3)])
    bridge.until(lambda: bridge.status(pinned) == U.ROLLED_FORWARD, "the pinned update done")
    bridge.until(lambda: {i: tag_of(d) for i, (_t, d) in running(bridge).items()}
                 == {0: "v1", 1: "v2", 2: "v1", 3: "v2", 4: "v1"}, "v2 on 1 and 3 only")
    assert sorted(launched_instances(bridge, jid, since)) == [1, 3]
    after = running(bridge)
    assert {i for i in after if after[i][0] != before[i][0]} == {1, 3}
    details = bridge.details(pinned)
    assert event_instances(details) == {1, 3}
    assert event_instances(details, A.INSTANCE_UPDATED) == {1, 3}
    desired = details.update.instructions.desiredState
    assert ids(desired.instances) == [1, 3]
    assert [ids(s.instances) for s in details.update.instructions.initialState] == [[1, 3]]

    # A second pinned update, rolled back while it runs: only its instances go back.
    bridge.cluster.hosts.auto_run = False
    since = len(bridge.cluster.hosts.launches)
    third = start(bridge, "v3", only=[(1, 1), (3, 3)])
    run_id, host = next(iter(bridge.until(lambda: bridge.launched(jid), "v3 launched").items()))
    bridge.run(run_id, host)
    bridge.until(lambda: len(launched_instances(bridge, jid, since)) == 2, "the second v3 launched")
    bridge.ok("rollbackJobUpdate", key=third, message="undo")
    bridge.cluster.hosts.auto_run = True
    for r, h in bridge.launched(jid).items():
        bridge.run(r, h)
    bridge.until(lambda: bridge.status(third) == U.ROLLED_BACK, "rolled back")
    bridge.until(lambda: {i: tag_of(d) for i, (_t, d) in running(bridge).items()}
                 == {0: "v1", 1: "v2", 2: "v1", 3: "v2", 4: "v1"}, "v2 back on 1 and 3")
    assert set(launched_instances(bridge, jid, since)) == {1, 3}
    final = running(bridge)
    assert all(final[i][0] == before[i][0] for i in (0, 2, 4))
    details = bridge.details(third)
    assert event_instances(details) == {1, 3}
    assert event_instances(details, A.INSTANCE_ROLLED_BACK) == {1, 3}


def test_a_pinned_update_adds_and_removes_instances(bridge: Bridge) -> None:
    jid = deployed(bridge, instances=3)
    before = running(bridge)
    since = len(bridge.cluster.hosts.launches)
    # Pinning instance 3 of a job of 3 adds it (with the new config); 0-2 stay as they are.
    grow = start(bridge, "v2", instances=4, only=[(3, 3)])
    bridge.until(lambda: bridge.status(grow) == U.ROLLED_FORWARD, "the add done")
    bridge.until(lambda: {i: tag_of(d) for i, (_t, d) in running(bridge).items()}
                 == {0: "v1", 1: "v1", 2: "v1", 3: "v2"}, "instance 3 added with v2")
    assert launched_instances(bridge, jid, since) == [3]
    details = bridge.details(grow)
    assert event_instances(details) == {3}
    assert ids(details.update.instructions.desiredState.instances) == [3]
    assert details.update.instructions.initialState == []
    after = running(bridge)
    assert all(after[i][0] == before[i][0] for i in (0, 1, 2))

    # Fewer instances, pinned to the ones that go: 3 is removed, nothing else moves.
    since = len(bridge.cluster.hosts.launches)
    shrink = start(bridge, "v1", instances=3, only=[(3, 3)])
    bridge.until(lambda: bridge.status(shrink) == U.ROLLED_FORWARD, "the removal done")
    bridge.until(lambda: sorted(running(bridge)) == [0, 1, 2], "instance 3 removed")
    assert launched_instances(bridge, jid, since) == []
    details = bridge.details(shrink)
    assert event_instances(details) == {3}
    assert ids(details.update.instructions.initialState[0].instances) == [3]
    final = running(bridge)
    assert all(final[i][0] == before[i][0] for i in (0, 1, 2))


def test_a_pinned_stopped_instance_starts_with_the_new_config(bridge: Bridge) -> None:
    jid = deployed(bridge, instances=3)
    bridge.ok("killTasks", job=KEY, instances=[1], message="stop one")
    bridge.until(lambda: sorted(running(bridge)) == [0, 2], "instance 1 stopped")
    before = running(bridge)
    since = len(bridge.cluster.hosts.launches)
    pinned = start(bridge, "v2", instances=3, only=[(1, 1)])
    bridge.until(lambda: bridge.status(pinned) == U.ROLLED_FORWARD, "the update done")
    bridge.until(lambda: {i: tag_of(d) for i, (_t, d) in running(bridge).items()}
                 == {0: "v1", 1: "v2", 2: "v1"}, "instance 1 back with v2")
    assert launched_instances(bridge, jid, since) == [1]
    assert event_instances(bridge.details(pinned)) == {1}
    after = running(bridge)
    assert all(after[i][0] == before[i][0] for i in (0, 2))

    # The same config again, pinned to the stopped instance, starts it (Aurora has no
    # active task there, so its update makes one), and touches nothing else.
    bridge.ok("killTasks", job=KEY, instances=[1], message="stop it again")
    bridge.until(lambda: sorted(running(bridge)) == [0, 2], "instance 1 stopped again")
    since = len(bridge.cluster.hosts.launches)
    again = start(bridge, "v2", instances=3, only=[(1, 1)])
    bridge.until(lambda: bridge.status(again) == U.ROLLED_FORWARD, "the restart done")
    bridge.until(lambda: sorted(running(bridge)) == [0, 1, 2], "instance 1 running again")
    assert launched_instances(bridge, jid, since) == [1]
    assert event_instances(bridge.details(again)) == {1}

    # Instance 1 now runs the config with the label that started it; an update pinned to
    # another stopped instance leaves it alone (dropping its label would restart it).
    bridge.ok("killTasks", job=KEY, instances=[2], message="stop another")
    bridge.until(lambda: sorted(running(bridge)) == [0, 1], "instance 2 stopped")
    before = running(bridge)
    since = len(bridge.cluster.hosts.launches)
    other = start(bridge, "v2", instances=3, only=[(2, 2)])
    bridge.until(lambda: bridge.status(other) == U.ROLLED_FORWARD, "the restart of 2 done")
    bridge.until(lambda: sorted(running(bridge)) == [0, 1, 2], "instance 2 running again")
    assert launched_instances(bridge, jid, since) == [2]
    assert event_instances(bridge.details(other)) == {2}
    assert running(bridge)[1][0] == before[1][0]


def test_stopped_instances_outside_the_pin_stay_stopped(bridge: Bridge) -> None:
    jid = deployed(bridge, instances=4)
    bridge.ok("killTasks", job=KEY, instances=[1, 2], message="stop two")
    bridge.until(lambda: sorted(running(bridge)) == [0, 3], "1 and 2 stopped")
    since = len(bridge.cluster.hosts.launches)
    pinned = start(bridge, "v2", instances=4, only=[(0, 0)])
    bridge.until(lambda: bridge.status(pinned) == U.ROLLED_FORWARD, "the update done")
    bridge.until(lambda: {i: tag_of(d) for i, (_t, d) in running(bridge).items()}
                 == {0: "v2", 3: "v1"}, "v2 on 0, 1 and 2 still stopped")
    assert launched_instances(bridge, jid, since) == [0]
    assert event_instances(bridge.details(pinned)) == {0}


def test_a_rollback_of_a_pinned_add_and_start_touches_only_them(bridge: Bridge) -> None:
    """Peloton's bridge rolls back to the job's previous spec: the added instance goes, the
    started one gets its old config (it runs it: the update made it a running instance)."""
    jid = deployed(bridge, instances=3)
    bridge.ok("killTasks", job=KEY, instances=[1], message="stop one")
    bridge.until(lambda: sorted(running(bridge)) == [0, 2], "instance 1 stopped")
    before = running(bridge)
    bridge.cluster.hosts.auto_run = False
    since = len(bridge.cluster.hosts.launches)
    pinned = start(bridge, "v2", instances=4, only=[(1, 1), (3, 3)])
    run_id, host = next(iter(bridge.until(lambda: bridge.launched(jid), "the first launched").items()))
    bridge.run(run_id, host)
    bridge.until(lambda: len(launched_instances(bridge, jid, since)) == 2, "the second launched")
    bridge.ok("rollbackJobUpdate", key=pinned, message="undo")
    bridge.cluster.hosts.auto_run = True
    for r, h in bridge.launched(jid).items():
        bridge.run(r, h)
    bridge.until(lambda: bridge.status(pinned) == U.ROLLED_BACK, "rolled back")
    bridge.until(lambda: {i: tag_of(d) for i, (_t, d) in running(bridge).items()}
                 == {0: "v1", 1: "v1", 2: "v1"}, "3 removed, 1 on v1")
    assert set(launched_instances(bridge, jid, since)) == {1, 3}
    details = bridge.details(pinned)
    assert event_instances(details) == {1, 3}
    assert event_instances(details, A.INSTANCE_ROLLED_BACK) == {1, 3}
    after = running(bridge)
    assert all(after[i][0] == before[i][0] for i in (0, 2))


@pytest.mark.parametrize("per_instance", [0, 1])
def test_an_update_whose_config_keeps_failing_rolls_back(bridge: Bridge, per_instance: int) -> None:
    """Aurora's rule (InstanceUpdater, OneWayJobUpdater): each end of a run of the new config
    inside the watch time is a failure of the instance; more than maxPerInstanceFailures
    fail it, more than maxFailedInstances failed instances fail the update, and
    rollbackOnFailure turns that into a rollback."""
    jid = deployed(bridge, instances=3)
    before = running(bridge)
    bridge.cluster.hosts.auto_run = False
    # Events and the job manager on one clock, moved past each restart's back-off.
    bridge.cluster.hosts.clock = bridge.cluster.clock
    req = request("v2", 3, rollback=True, watch_ms=60_000)
    req.settings.maxPerInstanceFailures = per_instance
    failing = bridge.ok("startJobUpdate", request=req).startJobUpdateResult.key

    def answer() -> bool:
        """v2 runs come up and crash at once (inside the watch time); v1 runs stay up."""
        for run_id, host in bridge.launched(jid).items():
            spec = next(s for h, s in reversed(bridge.cluster.hosts.launches) if s.run_id == run_id)
            bridge.run(run_id, host)
            if "serve v2" in str(spec.spec):
                bridge.cluster.hosts.finish(run_id, TaskState.FAILED)
        bridge.cluster.clock.offset += 5
        return bridge.status(failing) in (U.ROLLED_BACK, U.FAILED, U.ROLLED_FORWARD, U.ERROR)

    bridge.until(answer, "the update ended")
    assert bridge.status(failing) == U.ROLLED_BACK
    bridge.until(lambda: {i: tag_of(d) for i, (_t, d) in running(bridge).items()}
                 == {0: "v1", 1: "v1", 2: "v1"}, "v1 running everywhere")
    details = bridge.details(failing)
    statuses = [e.status for e in details.updateEvents]
    assert statuses[0] == U.ROLLING_FORWARD and statuses[-1] == U.ROLLED_BACK
    assert U.ROLLING_BACK in statuses
    # Only the instance the update got to was touched; the rest kept their v1 runs.
    after = running(bridge)
    assert {i for i in after if after[i][0] != before[i][0]} == event_instances(details) == {0}
