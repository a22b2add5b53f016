"""Where Peloton's Aurora bridge decides, through the Thrift API in front of a real job
manager (issue 22 item 5; Peloton's pkg/aurorabridge/handler.go):

- rolling back a job's first deploy takes it to zero instances (rollbackJobUpdate replaces
  the job with its spec at instance count 0);
- rollback is accepted while the update rolls forward, is paused or awaits a pulse
  (`_validRollbackStatuses`), abort in every state the update is active in;
- a second startJobUpdate is refused by default (Aurora) and replaces the running one
  with `concurrent_updates="replace"` (Peloton's bridge);
- minWaitInInstanceRunningMs is honoured by default (Aurora) and ignored with
  `watch_time="peloton"` (Peloton's bridge never passes it on).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from aurorabridge.atop.job_key import job_key as to_key
from aurorabridge.config import HandlerSettings
from aurorabridge.thrift_api import api
from peloton.api.gen.pelotonpy.api.update import update_pb2 as pb
from peloton.api.gen.pelotonpy.api.update import update_pb2_grpc
from tests.unit.aurorabridge import builders as b
from tests.unit.aurorabridge.on_jobmgr import Bridge, bridge_fixture, bridge_on  # noqa: F401
from tests.unit.jobmgr_servicers.conftest import Cluster, cluster  # noqa: F401 (fixture)

pytestmark = pytest.mark.timeout(120)
U = api.JobUpdateStatus
S = api.ScheduleStatus
KEY = api.JobKey(role="www", environment="devel", name="hello")
ACTIVE = {S.PENDING, S.THROTTLED, S.ASSIGNED, S.STARTING, S.RUNNING, S.KILLING, S.RESTARTING}


def request(tag: str, instances: int = 2, watch_ms: int = 0, **settings: Any) -> Any:
    req = b.update_request(b.task_config(cmdlines=(f"serve {tag}",)), instances=instances,
                           **settings)
    req.settings.minWaitInInstanceRunningMs = watch_ms
    return req


def start(bridge: Bridge, tag: str, **kwargs: Any) -> Any:
    return bridge.ok("startJobUpdate", request=request(tag, **kwargs)).startJobUpdateResult.key


def job_id(bridge: Bridge) -> str:
    job = bridge.ctx.find(to_key(KEY))
    assert job is not None
    return job.job_id


def code(resp: Any) -> int:
    return int(resp.responseCode)


# -- f. rollback of a first deploy, rollback/abort states, concurrent updates ------------------
def test_rolling_back_a_first_deploy_leaves_no_instances(bridge: Bridge) -> None:
    bridge.cluster.hosts.auto_run = False  # the first deploy stays under way
    first = start(bridge, "v1")
    bridge.until(lambda: bridge.launched(job_id(bridge)), "the first instance launched")
    bridge.ok("rollbackJobUpdate", key=first, message="undo")
    bridge.until(lambda: bridge.status(first) == U.ROLLED_BACK, "rolled back")
    bridge.until(lambda: not bridge.tasks(KEY, ACTIVE), "no active task left")
    jid = job_id(bridge)
    assert bridge.cluster.jm.cache.track(jid).spec.instance_count == 0
    assert not [r for r in bridge.cluster.hosts.runs() if r.startswith(jid)]


def _rolling(bridge: Bridge, tag: str, **kwargs: Any) -> Any:
    """An update of the running job whose first instance stays launched (rolling forward)."""
    key = start(bridge, tag, **kwargs)
    bridge.until(lambda: bridge.launched(job_id(bridge)), f"{tag} launched")
    return key


def _deployed(bridge: Bridge) -> None:
    first = start(bridge, "v1")
    bridge.until(lambda: bridge.status(first) == U.ROLLED_FORWARD, "the first deploy done")
    bridge.cluster.hosts.auto_run = False


@pytest.mark.parametrize("how", ["rolling", "paused", "awaiting_pulse"])
def test_rollback_is_accepted_while_the_update_rolls_forward(bridge: Bridge, how: str) -> None:
    _deployed(bridge)
    if how == "awaiting_pulse":
        key = start(bridge, "v2", pulse_ms=60_000)
        bridge.until(lambda: bridge.status(key) == U.ROLL_FORWARD_AWAITING_PULSE, "awaiting")
    else:
        key = _rolling(bridge, "v2")
        if how == "paused":
            bridge.ok("pauseJobUpdate", key=key, message="")
            bridge.until(lambda: bridge.status(key) == U.ROLL_FORWARD_PAUSED, "paused")
    bridge.ok("rollbackJobUpdate", key=key, message="")
    want = U.ROLL_BACK_AWAITING_PULSE if how == "awaiting_pulse" else U.ROLLING_BACK
    bridge.until(lambda: bridge.status(key) in (want, U.ROLLED_BACK), "rolling back")


def test_rollback_is_refused_once_rolling_back_and_abort_is_still_accepted(
        bridge: Bridge) -> None:
    _deployed(bridge)
    key = _rolling(bridge, "v2")
    bridge.ok("rollbackJobUpdate", key=key, message="")
    bridge.until(lambda: bridge.status(key) == U.ROLLING_BACK, "rolling back")
    again = bridge.call("rollbackJobUpdate", key=key, message="")
    assert code(again) == api.ResponseCode.INVALID_REQUEST
    bridge.ok("pauseJobUpdate", key=key, message="")
    bridge.until(lambda: bridge.status(key) == U.ROLL_BACK_PAUSED, "rollback paused")
    assert code(bridge.call("rollbackJobUpdate", key=key, message="")) == \
        api.ResponseCode.INVALID_REQUEST
    bridge.ok("abortJobUpdate", key=key, message="")
    bridge.until(lambda: bridge.status(key) == U.ABORTED, "aborted")


def test_a_second_update_is_refused_by_default(bridge: Bridge) -> None:
    _deployed(bridge)
    running = _rolling(bridge, "v2")
    resp = bridge.call("startJobUpdate", request=request("v3"))
    assert code(resp) == api.ResponseCode.INVALID_REQUEST
    assert resp.result.startJobUpdateResult.key.id == running.id
    assert bridge.status(running) == U.ROLLING_FORWARD


@pytest.fixture(name="replacing")
def replacing_fixture(cluster: Cluster) -> Iterator[Bridge]:  # noqa: F811
    yield from bridge_on(cluster, HandlerSettings(workers=4, concurrent_updates="replace"))


def test_a_second_update_replaces_the_running_one_when_asked(replacing: Bridge) -> None:
    bridge = replacing
    _deployed(bridge)
    running = _rolling(bridge, "v2")
    bridge.cluster.hosts.auto_run = True
    newer = bridge.ok("startJobUpdate", request=request("v3")).startJobUpdateResult.key
    assert newer.id != running.id
    bridge.until(lambda: bridge.status(newer) == U.ROLLED_FORWARD, "the new update done")
    assert bridge.status(running) == U.ABORTED


# -- g. watch time ----------------------------------------------------------------------------
def _watch_ms(c: Cluster, jid: str) -> int:
    stub = update_pb2_grpc.WorkflowOptionsServiceStub(c.channel)
    resp: pb.GetWorkflowOptionsResponse = stub.GetWorkflowOptions(
        pb.GetWorkflowOptionsRequest(job_id=jid), timeout=10)
    return int(resp.options.watch_time_ms)


def test_the_watch_time_is_honoured_by_default(bridge: Bridge) -> None:
    key = start(bridge, "v1", instances=1, watch_ms=60_000)
    assert _watch_ms(bridge.cluster, job_id(bridge)) == 60_000
    bridge.until(lambda: bridge.tasks(KEY, {S.RUNNING}), "the instance running")
    # RUNNING, but not for a minute yet: Aurora's update is still watching it.
    assert bridge.status(key) == U.ROLLING_FORWARD


@pytest.fixture(name="peloton_watch")
def peloton_watch_fixture(cluster: Cluster) -> Iterator[Bridge]:  # noqa: F811
    yield from bridge_on(cluster, HandlerSettings(workers=4, watch_time="peloton"))


def test_the_watch_time_is_ignored_with_pelotons_rule(peloton_watch: Bridge) -> None:
    bridge = peloton_watch
    key = start(bridge, "v1", instances=1, watch_ms=60_000)
    bridge.until(lambda: bridge.status(key) == U.ROLLED_FORWARD, "rolled forward at once")
    assert _watch_ms(bridge.cluster, job_id(bridge)) == 0
    second = start(bridge, "v2", instances=1, watch_ms=60_000)
    bridge.until(lambda: bridge.status(second) == U.ROLLED_FORWARD, "the update done at once")


def test_watch_time_setting_is_checked() -> None:
    with pytest.raises(Exception, match="watch_time must be one of"):
        HandlerSettings(watch_time="sometimes")
