"""The bridge's update rules as tables (walked whole), and pulsed updates racing the job
manager's compare-and-set writes."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest

from aurorabridge import opaque_data
from aurorabridge.handlers import updates
from aurorabridge.handlers.context import BridgeContext
from aurorabridge.ptoa import states
from aurorabridge.ptoa import updates as ptoa_updates
from aurorabridge.thrift_api import api
from peloton.api.gen.peloton.api.v1alpha.job.stateless import stateless_pb2 as sl
from peloton.api.gen.peloton.api.v1alpha.pod import pod_pb2
from peloton.core.errors import Conflict
from peloton.jobmgr.goalstate import task as task_goalstate
from tests.harness.fake_peloton import FakePeloton
from tests.unit.aurorabridge import builders as b
from tests.unit.aurorabridge.conftest import Call, FakeClock, messages

U = api.JobUpdateStatus
A = api.JobUpdateAction
W = sl.WorkflowState
#: Every workflow state a workflow event can carry (INVALID is never recorded).
EVENT_STATES = [s for s in W.values() if s != sl.WORKFLOW_STATE_INVALID]


@pytest.mark.parametrize("rolling_back", [False, True])
@pytest.mark.parametrize("state", EVENT_STATES, ids=W.Name)
def test_every_workflow_state_reads_as_an_update_status(state: int, rolling_back: bool) -> None:
    status = states.WORKFLOW_TO_UPDATE[(state, rolling_back)]
    if rolling_back:  # a rollback never reads as rolling forward, nor as rolled forward
        assert status not in (U.ROLLING_FORWARD, U.ROLL_FORWARD_PAUSED, U.ROLLED_FORWARD)
    awaiting = states.workflow_update_status(state, rolling_back, awaiting_pulse=True)
    assert awaiting == states.AWAITING_PULSE.get(status, status)
    assert states.workflow_update_status(sl.WORKFLOW_STATE_INVALID, rolling_back) == U.ERROR


@pytest.mark.parametrize("rolling_back", [False, True])
@pytest.mark.parametrize("state", EVENT_STATES, ids=W.Name)
def test_every_instance_event_reads_as_an_action(state: int, rolling_back: bool) -> None:
    action = states.INSTANCE_ACTION[(state, rolling_back)]
    forward_only = {A.INSTANCE_UPDATING, A.INSTANCE_UPDATED, A.INSTANCE_UPDATE_FAILED}
    if rolling_back:
        assert action not in forward_only
    assert states.instance_action(state, rolling_back) == action


def test_an_instance_done_in_a_rollback_is_rolled_back() -> None:
    assert states.INSTANCE_ACTION[(sl.WORKFLOW_STATE_SUCCEEDED, True)] == A.INSTANCE_ROLLED_BACK
    assert states.INSTANCE_ACTION[(sl.WORKFLOW_STATE_ROLLED_BACK, False)] == A.INSTANCE_ROLLED_BACK


def test_every_recorded_request_has_the_states_it_shows_as() -> None:
    recorded = {opaque_data.START, opaque_data.PAUSE, opaque_data.RESUME, opaque_data.ABORT,
                opaque_data.ROLLBACK, opaque_data.PULSE, opaque_data.PULSE_TIMEOUT}
    assert set(ptoa_updates.ASKED_SHOWS_AS) == recorded
    assert recorded >= ptoa_updates.AWAITS_PULSE
    for action, shows_as in ptoa_updates.ASKED_SHOWS_AS.items():
        assert shows_as and sl.WORKFLOW_STATE_INVALID not in shows_as, action


@pytest.mark.parametrize("state", pod_pb2.PodState.values(), ids=pod_pb2.PodState.Name)
@pytest.mark.parametrize("throttled", [False, True])
def test_a_pod_waits_for_its_next_run_only_when_its_run_ended_and_it_should_run(
        state: pod_pb2.PodState, throttled: bool) -> None:
    message = f"{states.THROTTLED_MESSAGE}: exit 1" if throttled else "exit 1"
    status = pod_pb2.PodStatus(state=state, desired_state=pod_pb2.POD_STATE_RUNNING, message=message)
    expected = (states.WAITING_RUN_STATUS[throttled] if state in states.TERMINAL_POD_STATES else None)
    assert states.waiting_run_status(status) == expected
    status.desired_state = pod_pb2.POD_STATE_KILLED
    assert states.waiting_run_status(status) is None


def test_the_throttle_message_is_the_job_managers() -> None:
    assert states.THROTTLED_MESSAGE == task_goalstate.THROTTLED


def test_update_events_are_matched_to_who_asked_and_never_repeat() -> None:
    data = opaque_data.OpaqueData.new((), "go", 0, user="alice")
    data = data.with_action(opaque_data.PAUSE, "bob", "wait").with_action(opaque_data.RESUME, "bob", "")
    events = [sl.WorkflowEvent(state=s, timestamp=f"2024-01-01T00:00:0{i}Z") for i, s in enumerate([
        sl.WORKFLOW_STATE_INITIALIZED, sl.WORKFLOW_STATE_ROLLING_FORWARD, sl.WORKFLOW_STATE_PAUSED,
        sl.WORKFLOW_STATE_ROLLING_FORWARD, sl.WORKFLOW_STATE_PAUSED, sl.WORKFLOW_STATE_ROLLING_FORWARD,
        sl.WORKFLOW_STATE_SUCCEEDED])]
    got = [(e.status, e.user, e.message) for e in ptoa_updates.update_events(events[::-1], data)]
    assert got == [(U.ROLLING_FORWARD, "alice", "go"), (U.ROLL_FORWARD_PAUSED, "bob", "wait"),
                   (U.ROLLING_FORWARD, "bob", None),
                   (U.ROLL_FORWARD_PAUSED, None, None),  # paused by the job manager (a batch ended)
                   (U.ROLLING_FORWARD, None, None), (U.ROLLED_FORWARD, None, None)]


def conflict_once(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn`, except that its first call loses a compare-and-set race."""
    calls: list[int] = []

    def racing(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise Conflict("entity version changed: the job manager wrote first", field="version")
        return fn(*args, **kwargs)

    return racing


def status(call: Call, key: Any) -> int:
    details = call("getJobUpdateDetails", key=key, query=None).result.getJobUpdateDetailsResult
    return int(details.detailsList[0].update.summary.state.status)


def test_a_pulse_that_loses_a_race_is_tried_again_without_a_traceback(
        call: Call, fake: FakePeloton, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    resp = call("startJobUpdate", request=b.update_request(pulse_ms=5000), message="")
    key = resp.result.startJobUpdateResult.key
    assert status(call, key) == U.ROLL_FORWARD_AWAITING_PULSE
    monkeypatch.setattr(fake, "resume_workflow", conflict_once(fake.resume_workflow))
    pulse = call("pulseJobUpdate", key=key)
    assert pulse.responseCode == api.ResponseCode.OK, messages(pulse)
    assert pulse.result.pulseJobUpdateResult.status == api.JobUpdatePulseStatus.OK
    assert status(call, key) == U.ROLLING_FORWARD
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]


def test_the_pulse_timer_pause_that_loses_a_race_is_tried_again_without_a_traceback(
        call: Call, ctx: BridgeContext, fake: FakePeloton, clock: FakeClock,
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    key = call("startJobUpdate", request=b.update_request(pulse_ms=1000), message="").result \
        .startJobUpdateResult.key
    call("pulseJobUpdate", key=key)
    monkeypatch.setattr(fake, "pause_workflow", conflict_once(fake.pause_workflow))
    clock.advance(2)
    assert ctx.pulses.tick() == 1
    assert status(call, key) == U.ROLL_FORWARD_AWAITING_PULSE
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]


def test_a_race_lost_every_time_is_an_invalid_request(call: Call, fake: FakePeloton,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    key = call("startJobUpdate", request=b.update_request(pulse_ms=5000), message="").result \
        .startJobUpdateResult.key
    tries: list[int] = []

    def always(*args: Any, **kwargs: Any) -> Any:
        tries.append(1)
        raise Conflict("entity version changed", field="version")

    monkeypatch.setattr(fake, "resume_workflow", always)
    assert call("pulseJobUpdate", key=key).responseCode == api.ResponseCode.INVALID_REQUEST
    assert len(tries) == updates.CAS_TRIES
