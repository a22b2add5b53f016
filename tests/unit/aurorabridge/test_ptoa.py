"""Peloton -> Aurora: states, opaque data, scheduled tasks, summaries, updates, task configs."""

from __future__ import annotations

import json

from aurorabridge import opaque_data
from aurorabridge.atop.job_key import JobKey
from aurorabridge.atop.pod_spec import pod_spec
from aurorabridge.atop.resources import task_resources
from aurorabridge.opaque_data import OpaqueData
from aurorabridge.ptoa import basics, jobs, states
from aurorabridge.ptoa.scheduled_task import scheduled_task
from aurorabridge.ptoa.task_config import TaskConfigReader
from aurorabridge.ptoa.updates import join_rollback, update_details
from aurorabridge.thrift_api import api
from peloton.api.gen.peloton.api.v1alpha.job.stateless import stateless_pb2 as sl
from peloton.api.gen.peloton.api.v1alpha.pod import pod_pb2
from tests.unit.aurorabridge import builders as b

S = api.ScheduleStatus
U = api.JobUpdateStatus


def test_pod_states_read_as_peloton_bridge_reads_them() -> None:
    expected = {
        "POD_STATE_INITIALIZED": S.INIT,
        "POD_STATE_PENDING": S.PENDING,
        "POD_STATE_READY": S.PENDING,
        "POD_STATE_PLACING": S.PENDING,
        "POD_STATE_PLACED": S.ASSIGNED,
        "POD_STATE_LAUNCHED": S.ASSIGNED,
        "POD_STATE_STARTING": S.STARTING,
        "POD_STATE_RUNNING": S.RUNNING,
        "POD_STATE_SUCCEEDED": S.FINISHED,
        "POD_STATE_FAILED": S.FAILED,
        "POD_STATE_LOST": S.LOST,
        "POD_STATE_KILLING": S.KILLING,
        "POD_STATE_KILLED": S.KILLED,
        "POD_STATE_DELETED": S.KILLED,
        "POD_STATE_PREEMPTING": S.PREEMPTING,
        "POD_STATE_RESERVED": S.ASSIGNED,
    }
    for name, status in expected.items():
        assert states.schedule_status_of_name(name) == status, name
    assert all(p in states.POD_TO_SCHEDULE for p in pod_pb2.PodState.values())


def test_update_status_follows_workflow_state_and_opaque_actions() -> None:
    fresh = OpaqueData("u1")
    pulsed = OpaqueData.new((), "", 1000)
    rolled = fresh.with_action(opaque_data.ROLLBACK)
    W = sl
    cases = [
        (W.WORKFLOW_STATE_ROLLING_FORWARD, fresh, U.ROLLING_FORWARD),
        (W.WORKFLOW_STATE_INITIALIZED, rolled, U.ROLLING_BACK),
        (W.WORKFLOW_STATE_PAUSED, fresh, U.ROLL_FORWARD_PAUSED),
        (W.WORKFLOW_STATE_PAUSED, pulsed, U.ROLL_FORWARD_AWAITING_PULSE),
        (W.WORKFLOW_STATE_PAUSED, pulsed.with_action(opaque_data.PULSE), U.ROLL_FORWARD_PAUSED),
        (
            W.WORKFLOW_STATE_PAUSED,
            pulsed.with_action(opaque_data.PULSE).with_action(opaque_data.PULSE_TIMEOUT),
            U.ROLL_FORWARD_AWAITING_PULSE,
        ),
        (W.WORKFLOW_STATE_PAUSED, pulsed.with_action(opaque_data.ROLLBACK), U.ROLL_BACK_AWAITING_PULSE),
        (W.WORKFLOW_STATE_PAUSED, rolled, U.ROLL_BACK_PAUSED),
        (W.WORKFLOW_STATE_ROLLING_BACKWARD, fresh, U.ROLLING_BACK),
        (W.WORKFLOW_STATE_SUCCEEDED, fresh, U.ROLLED_FORWARD),
        (W.WORKFLOW_STATE_SUCCEEDED, rolled, U.ROLLED_BACK),
        (W.WORKFLOW_STATE_ROLLED_BACK, fresh, U.ROLLED_BACK),
        (W.WORKFLOW_STATE_ABORTED, fresh, U.ABORTED),
        (W.WORKFLOW_STATE_FAILED, fresh, U.FAILED),
        (W.WORKFLOW_STATE_INVALID, fresh, U.ERROR),
    ]
    for state, data, status in cases:
        assert states.update_status(state, data) == status, (state, data.actions)


def test_opaque_data_round_trips_and_reads_go_written_data() -> None:
    data = OpaqueData.new((("sha", "1"),), "deploy", 500).with_action(opaque_data.PULSE)
    assert opaque_data.parse(data.to_json()) == data
    go = json.dumps(
        {
            "update_id": "abc",
            "update_actions": ["start_pulsed"],
            "update_metadata": [{"key": "k", "value": "v"}],
            "start_job_update_msg": "m",
            "extra": 1,
        }
    )
    parsed = opaque_data.parse(go)
    assert (parsed.update_id, parsed.actions, parsed.metadata, parsed.message) == (
        "abc",
        ("start_pulsed",),
        (("k", "v"),),
        "m",
    )
    assert parsed.awaiting_pulse and json.loads(parsed.to_json())["extra"] == 1
    assert opaque_data.parse("not json") == OpaqueData() and opaque_data.parse("") == OpaqueData()


def test_basics() -> None:
    assert basics.job_key("a/b/c") == api.JobKey(role="a", environment="b", name="c")
    assert basics.job_key("a/b") is None and basics.job_key("a//c") is None
    assert basics.timestamp_ms("2019-10-01T12:00:00.123456789Z") == 1569931200123
    assert basics.timestamp_ms("") == 0 and basics.timestamp_ms("yesterday") == 0
    assert (basics.instance_of("uuid-with-dashes-7"), basics.run_of("uuid-with-dashes-7-3")) == (7, 3)
    assert [(r.first, r.last) for r in basics.ranges([5, 0, 1, 2, 7, 6])] == [(0, 2), (5, 7)]
    assert basics.ids_of_ranges([pod_pb2.InstanceIDRange(**{"from": 2, "to": 4})]) == [2, 3, 4]


def test_scheduled_task_from_pod_status_with_and_without_events() -> None:
    status = pod_pb2.PodStatus(
        state=pod_pb2.POD_STATE_PENDING,
        message="0 of 3 hosts fit: insufficient cpu",
        start_time="2020-01-01T00:00:00Z",
        failure_count=2,
    )
    status.pod_id.value = "job-1-4"
    status.prev_pod_id.value = "job-1-3"
    status.containers_status.add(ports={"http": 31001})
    config = api.TaskConfig()
    task = scheduled_task("job-1", None, status, config)
    assert (task.assignedTask.taskId, task.assignedTask.instanceId, task.ancestorId, task.failureCount) == (
        "job-1-4",
        1,
        "job-1-3",
        2,
    )
    assert task.assignedTask.assignedPorts == {"http": 31001} and task.status == S.PENDING
    assert [(e.status, e.message, e.timestamp) for e in task.taskEvents] == [
        (S.PENDING, "0 of 3 hosts fit: insufficient cpu", 1577836800000)
    ]
    events = [
        pod_pb2.PodEvent(actual_state="POD_STATE_RUNNING", timestamp="2020-01-01T00:00:02Z"),
        pod_pb2.PodEvent(actual_state="POD_STATE_PENDING", timestamp="2020-01-01T00:00:01Z"),
    ]
    task = scheduled_task("job-1", None, status, config, events)
    assert [e.status for e in task.taskEvents] == [S.PENDING, S.RUNNING]
    status.prev_pod_id.value = "job-1-0"
    assert scheduled_task("job-1", None, status, config).ancestorId is None


def test_job_stats_and_summary() -> None:
    stats = jobs.job_stats(
        {"POD_STATE_RUNNING": 3, "POD_STATE_PLACING": 1, "POD_STATE_KILLED": 2, "POD_STATE_LOST": 1}
    )
    assert (
        stats.activeTaskCount,
        stats.pendingTaskCount,
        stats.finishedTaskCount,
        stats.failedTaskCount,
    ) == (3, 1, 2, 1)
    summary = jobs.job_summary(api.JobKey(role="r", environment="e", name="n"), "me", api.TaskConfig(), 7, {})
    assert (
        summary.job.instanceCount == 7 and summary.job.owner.user == "me" and summary.job.cronSchedule is None
    )


def test_task_configs_come_back_as_sent_or_described_from_the_spec() -> None:
    task = b.task_config(ports=("http",), metadata={"a": "b"})
    spec = pod_spec(task, JobKey("www", "devel", "hello"), task_resources(task))
    reader = TaskConfigReader()
    full = reader.task_config(spec, "www/devel/hello", "www", None)
    assert full.executorConfig.name == "AuroraExecutor" and full.job.role == "www"
    bare = reader.task_config(spec, "www/devel/hello", "www", None, with_executor=False)
    assert bare.executorConfig is None and full.executorConfig is not None
    assert reader.task_config(spec, "www/devel/hello", "www", None) is full  # cached
    spec.mesos_spec.executor_spec.data = b""
    described = reader.task_config(spec, "www/devel/hello", "www", sl.SlaSpec(priority=3, revocable=True))
    resources = {(r.numCpus, r.ramMb, r.diskMb, r.namedPort) for r in described.resources}
    assert resources == {
        (0.5, None, None, None),
        (None, 128, None, None),
        (None, None, 256, None),
        (None, None, None, "http"),
    }
    assert (described.tier, described.priority, described.isService) == ("revocable", 3, True)
    assert [(m.key, m.value) for m in described.metadata] == [("a", "b")]


def _workflow(state: sl.WorkflowState, data: OpaqueData, ts: str, updated: int = 1) -> sl.WorkflowInfo:
    w = sl.WorkflowInfo(
        opaque_data={"data": data.to_json()},
        events=[sl.WorkflowEvent(state=state, timestamp=ts)],
        instances_updated=[pod_pb2.InstanceIDRange(**{"from": 0, "to": updated})],
    )
    w.status.state = state
    w.update_spec.batch_size = 2
    w.update_spec.max_instance_retries = 3
    return w


def test_update_details_and_rollback_join() -> None:
    key = api.JobKey(role="r", environment="e", name="n")
    data = OpaqueData("u1", message="go", pulse_timeout_ms=100)
    forward = update_details(key, _workflow(sl.WORKFLOW_STATE_ABORTED, data, "2020-01-01T00:00:00Z"), data)
    assert forward.update.instructions.settings.updateGroupSize == 2
    assert forward.update.instructions.settings.maxPerInstanceFailures == 2
    assert forward.update.instructions.settings.blockIfNoPulsesAfterMs == 100
    assert [(r.first, r.last) for r in forward.update.instructions.desiredState.instances] == [(0, 1)]
    back_data = data.with_action(opaque_data.ROLLBACK)
    back = update_details(
        key, _workflow(sl.WORKFLOW_STATE_ROLLING_FORWARD, back_data, "2020-01-01T00:01:00Z"), back_data
    )
    joined = join_rollback(forward, back)
    assert joined.update.summary.key.id == "u1" and joined.update.summary.state.status == U.ROLLING_BACK
    assert joined.update.summary.state.createdTimestampMs == basics.timestamp_ms("2020-01-01T00:00:00Z")
    assert [e.status for e in joined.updateEvents] == [U.ROLLING_BACK]  # the forward ABORTED is dropped
