"""v1alpha PodSpec <-> TaskSpec, and pod status / info / summary / events / queries."""

from __future__ import annotations

from peloton.api.convert import v1_pod, v1_pod_status
from peloton.api.gen.peloton.api.v1alpha.pod import pod_pb2
from peloton.core.model.events import PodEvent
from peloton.core.model.task import TaskRuntime, TaskSpec, TerminationReason
from peloton.core.states import HealthState, TaskState
from tests.unit.api.helpers import JOB_ID
from tests.unit.api.test_v0_task import RICH


def test_task_spec_round_trips_through_pod_spec() -> None:
    pod = v1_pod.task_spec_to_v1(RICH, pod_name=f"{JOB_ID}-0")
    assert pod.IsInitialized()
    back = v1_pod.pod_spec_from_v1(pod, preemptible=RICH.preemptible)
    assert back == RICH
    plain = TaskSpec(name="p")
    assert v1_pod.pod_spec_from_v1(v1_pod.task_spec_to_v1(plain)) == plain


def test_pod_spec_fields_written() -> None:
    pod = v1_pod.task_spec_to_v1(RICH)
    box = pod.containers[0]
    assert box.image == RICH.container_image and box.entrypoint.value == "/bin/web"
    assert [(e.name, e.value) for e in box.environment] == [("A", "1"), ("B", "two")]
    assert box.liveness_check.type == pod_pb2.HealthCheckSpec.HEALTH_CHECK_TYPE_HTTP
    assert pod.mesos_spec.shell is False and pod.mesos_spec.executor_spec.data == RICH.executor_data
    assert pod.preemption_policy.kill_on_preempt and pod.volume.size_mb == 128
    assert pod.constraint.type == pod_pb2.Constraint.CONSTRAINT_TYPE_OR


def test_pod_status_from_runtime() -> None:
    runtime = TaskRuntime(state=TaskState.RUNNING, goal_state=TaskState.RUNNING, run_id=2,
                          prev_run_id=1, desired_run_id=2, host="h1", agent_id="ag",
                          ports=(("grpc", 31001),), start_time=1_569_888_000.0,
                          config_version=4, desired_config_version=5, healthy=HealthState.HEALTHY,
                          termination=TerminationReason.KILLED_FOR_UPDATE, exit_code=0, revision=3)
    status = v1_pod_status.pod_status_to_v1(JOB_ID, 1, runtime, "api", "img")
    assert status.pod_id.value == f"{JOB_ID}-1-2" and status.prev_pod_id.value == f"{JOB_ID}-1-1"
    assert (status.version.value, status.desired_version.value) == ("4-0-0", "5-0-0")
    assert status.state == pod_pb2.POD_STATE_RUNNING and status.host_id == "ag"
    assert status.agent_id.value == "ag" and status.start_time == "2019-10-01T00:00:00Z"
    box = status.containers_status[0]
    assert (box.name, box.image, dict(box.ports)) == ("api", "img", {"grpc": 31001})
    assert box.state == pod_pb2.CONTAINER_STATE_RUNNING
    assert box.healthy.state == pod_pb2.HEALTH_STATE_HEALTHY
    assert box.terminationStatus.reason == (
        pod_pb2.TerminationStatus.TERMINATION_STATUS_REASON_KILLED_FOR_UPDATE)
    summary = v1_pod_status.pod_summary_to_v1(JOB_ID, 1, runtime)
    assert summary.pod_name.value == f"{JOB_ID}-1"
    info = v1_pod_status.pod_info_to_v1(v1_pod.task_spec_to_v1(RICH), JOB_ID, 1, runtime)
    assert info.status.containers_status[0].name == "web"


def test_states_and_health_map_both_ways() -> None:
    for state in TaskState:
        wire = v1_pod_status.pod_state_to_v1(state)
        assert pod_pb2.PodState.Name(wire) == f"POD_STATE_{state.value}"
        assert v1_pod_status.pod_state_from_v1(wire) is state
    for health in HealthState:
        assert v1_pod_status.health_from_v1(v1_pod_status.health_to_v1(health)) is health
    assert v1_pod_status.health_to_v1(HealthState.HEALTH_UNKNOWN) == pod_pb2.HEALTH_STATE_UNKNOWN


def test_pod_event_and_query() -> None:
    event = PodEvent(job_id=JOB_ID, instance=0, run_id=3, state=TaskState.KILLED,
                     goal_state=TaskState.KILLED, time=1_569_888_000.0, prev_run_id=2,
                     desired_run_id=3, config_version=2, desired_config_version=2,
                     healthy=HealthState.INVALID)
    out = v1_pod_status.pod_event_to_v1(event)
    assert (out.actual_state, out.desired_state, out.healthy) == (
        "POD_STATE_KILLED", "POD_STATE_KILLED", "HEALTH_STATE_INVALID")
    assert out.pod_id.value == f"{JOB_ID}-0-3" and out.version.value == "2-0-0"
    spec = pod_pb2.QuerySpec(pod_states=[pod_pb2.POD_STATE_FAILED], hosts=["h"])
    spec.names.add(value=f"{JOB_ID}-0")
    query = v1_pod_status.pod_query_from_v1(spec)
    assert query.states == {TaskState.FAILED} and query.names == (f"{JOB_ID}-0",)
