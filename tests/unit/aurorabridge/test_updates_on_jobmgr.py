"""Aurora's update semantics through the bridge's Thrift API, in front of a real job manager
(issue 22 item 4): rollback order, instance and update events with who asked, and a task
waiting to be restarted after a failed update."""

from __future__ import annotations

import itertools
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


def request(tag: str, instances: int = 4, **settings: Any) -> Any:
    req = b.update_request(b.task_config(cmdlines=(f"serve {tag}",)), instances=instances, **settings)
    req.settings.minWaitInInstanceRunningMs = 0
    return req


def start(bridge: Bridge, tag: str, *, user: str = "", message: str = "", **settings: Any) -> Any:
    result = bridge.ok("startJobUpdate", request=request(tag, **settings), message=message, user=user)
    return result.startJobUpdateResult.key


def job_id(bridge: Bridge) -> str:
    job = bridge.ctx.find(to_key(KEY))
    assert job is not None
    return job.job_id


def instance_of(run_id: str) -> int:
    return int(run_id.rsplit("-", 2)[1])


def answer_next(bridge: Bridge, jid: str, stale: frozenset[str] = frozenset()) -> int:
    """Wait for exactly one launched run the test has not answered (nor left `stale`), report
    it RUNNING, and return its instance (the update touches one instance at a time)."""
    def fresh() -> dict[str, str]:
        return {r: h for r, h in bridge.launched(jid).items() if r not in stale}

    runs = bridge.until(fresh, "the next instance launched")
    assert len(runs) == 1, f"more than one instance launched at once: {sorted(runs)}"
    (run_id, host), = runs.items()
    bridge.run(run_id, host)
    return instance_of(run_id)


def test_a_rollback_undoes_the_highest_instance_first_and_records_who_asked(bridge: Bridge) -> None:
    first = start(bridge, "v1", user="alice", message="first deploy")
    bridge.until(lambda: bridge.status(first) == U.ROLLED_FORWARD, "the first deploy done")
    jid = job_id(bridge)
    bridge.cluster.hosts.auto_run = False
    second = start(bridge, "v2", user="alice", message="v2 please")
    assert [answer_next(bridge, jid) for _ in range(2)] == [0, 1]
    bridge.until(lambda: bridge.launched(jid), "instance 2 launched")
    bridge.ok("pauseJobUpdate", key=second, message="hold on", user="carol")
    bridge.until(lambda: bridge.status(second) == U.ROLL_FORWARD_PAUSED, "paused")
    bridge.ok("pauseJobUpdate", key=second, message="twice", user="carol")  # no change, no event
    bridge.ok("resumeJobUpdate", key=second, message="go on", user="carol")
    assert answer_next(bridge, jid) == 2
    stale = frozenset(bridge.until(lambda: bridge.launched(jid), "instance 3 launched"))
    bridge.ok("rollbackJobUpdate", key=second, message="v2 is broken", user="bob")
    # Aurora undoes what the update did last first: 3 (its new run never came up), 2, 1, 0.
    undone = [answer_next(bridge, jid, stale) for _ in range(4)]
    assert undone == [3, 2, 1, 0]
    bridge.until(lambda: bridge.status(second) == U.ROLLED_BACK, "rolled back")

    details = bridge.details(second)
    assert details.update.summary.user == "alice"
    events = [(e.status, e.user, e.message) for e in details.updateEvents]
    assert events == [
        (U.ROLLING_FORWARD, "alice", "v2 please"),
        (U.ROLL_FORWARD_PAUSED, "carol", "hold on"),
        (U.ROLLING_FORWARD, "carol", "go on"),
        (U.ROLLING_BACK, "bob", "v2 is broken"),
        (U.ROLLED_BACK, None, None),
    ]
    statuses = [e.status for e in details.updateEvents]
    assert all(a != b for a, b in itertools.pairwise(statuses))
    rolling_back = [e.instanceId for e in details.instanceEvents if e.action == A.INSTANCE_ROLLING_BACK]
    assert rolling_back == [3, 2, 1, 0]
    rolled_back = {e.instanceId for e in details.instanceEvents if e.action == A.INSTANCE_ROLLED_BACK}
    assert rolled_back == {0, 1, 2, 3}
    assert {e.instanceId for e in details.instanceEvents if e.action == A.INSTANCE_UPDATED} == {0, 1, 2}


def test_an_abort_is_recorded_once_with_who_asked(bridge: Bridge) -> None:
    first = start(bridge, "v1", instances=2)
    bridge.until(lambda: bridge.status(first) == U.ROLLED_FORWARD, "the first deploy done")
    bridge.cluster.hosts.auto_run = False
    second = start(bridge, "v2", instances=2, user="alice")
    bridge.until(lambda: bridge.launched(job_id(bridge)), "instance 0 launched")
    bridge.ok("abortJobUpdate", key=second, message="stop it", user="dave")
    bridge.until(lambda: bridge.status(second) == U.ABORTED, "aborted")
    events = [(e.status, e.user, e.message) for e in bridge.details(second).updateEvents]
    assert events == [(U.ROLLING_FORWARD, "alice", None), (U.ABORTED, "dave", "stop it")]
    # Without a caller of its own (no authentication), Aurora's user is UNSECURE.
    assert [e.user for e in bridge.details(first).updateEvents] == ["UNSECURE", None]


def test_a_task_waiting_to_restart_after_a_failed_update_stays_listed(bridge: Bridge) -> None:
    first = start(bridge, "v1", instances=1)
    bridge.until(lambda: bridge.status(first) == U.ROLLED_FORWARD, "the first deploy done")
    jid = job_id(bridge)
    bridge.cluster.hosts.auto_run = False
    second = start(bridge, "v2", instances=1)
    run_id, _host = next(iter(bridge.until(lambda: bridge.launched(jid), "v2 launched").items()))
    bridge.cluster.hosts.finish(run_id, TaskState.FAILED)  # the new config fails at once
    bridge.until(lambda: bridge.status(second) == U.FAILED, "the update failed")
    active = {S.PENDING, S.THROTTLED, S.ASSIGNED, S.STARTING, S.RUNNING, S.KILLING, S.RESTARTING}
    listed = bridge.tasks(KEY, active)
    assert [(t.assignedTask.instanceId, t.status) for t in listed] in (
        [(0, S.THROTTLED)], [(0, S.PENDING)]), listed
    assert listed[0].ancestorId == run_id
    everything = [(t.assignedTask.taskId, t.status) for t in bridge.tasks(KEY)]
    assert everything.count((run_id, S.FAILED)) == 1, everything
    assert everything.count((listed[0].assignedTask.taskId, listed[0].status)) == 1, everything
