"""The evictor in the deterministic harness: preemption through PREEMPTING, and host drains
that wait for each job's SLA (Peloton's maximum unavailable instances; Aurora's policies,
timeout and forced drains), with what the task and pod APIs then show."""

from __future__ import annotations

import dataclasses

from peloton.api.convert.v0_task_runtime import task_runtime_to_v0
from peloton.api.convert.v1_pod_status import pod_status_to_v1
from peloton.api.gen.peloton.api.v0.task import task_pb2
from peloton.api.gen.peloton.api.v1alpha.pod import pod_pb2
from peloton.core.model.ids import RunId, TaskId
from peloton.core.model.job import JobSpec, SlaSpec
from peloton.core.model.sched import Victim, VictimReason
from peloton.core.model.sla_policy import CountSla, DrainMode, DrainRequest, PercentageSla
from peloton.core.model.task import HealthCheckSpec, TerminationReason
from peloton.core.sla import TaskSla, task_sla_label
from peloton.core.states import HealthState, JobType, TaskState
from peloton.jobmgr.evictor import EVICTING
from tests.unit.jobmgr.harness import Harness, job_spec

S = TaskState
T = TerminationReason


def with_task(spec: JobSpec, **fields: object) -> JobSpec:
    return dataclasses.replace(spec, default_task=dataclasses.replace(spec.default_task, **fields))  # type: ignore[arg-type]


def running_job(h: Harness, spec: JobSpec) -> str:
    jid = h.create(spec)
    h.run_due()
    assert h.states(jid) == [S.RUNNING] * spec.instance_count
    return jid


def victim(jid: str, instance: int, run: int = 1,
           reason: VictimReason = VictimReason.PREEMPTED) -> Victim:
    return Victim(TaskId(jid, instance), run, reason)


def on_host(h: Harness, jid: str, host: str) -> list[int]:
    return sorted(RunId.parse(r).instance for r in h.hosts.runs(host) if r.startswith(jid))


# -- preemption ---------------------------------------------------------------------------------
def test_a_batch_task_killed_on_preemption_goes_through_preempting_and_stays_down(h: Harness) -> None:
    jid = running_job(h, with_task(job_spec(2, JobType.BATCH), kill_on_preempt=True))
    h.rm.victims.append(victim(jid, 0))
    assert h.jm.evictor.evict_once() == 1
    marked = h.task(jid, 0)
    assert (marked.goal_state, marked.state) == (S.PREEMPTING, S.RUNNING)
    assert (marked.message, marked.reason) == (EVICTING, "EvictionReason_PREEMPTION")
    assert marked.termination is T.PREEMPTED_RESOURCES
    # The API shows it: v0 goalState PREEMPTING, v1alpha desired_state POD_STATE_PREEMPTING.
    assert task_runtime_to_v0(jid, 0, marked).goalState == task_pb2.PREEMPTING
    status = pod_status_to_v1(jid, 0, marked)
    assert status.desired_state == pod_pb2.POD_STATE_PREEMPTING
    assert status.containers_status[0].terminationStatus.reason == \
        pod_pb2.TerminationStatus.TERMINATION_STATUS_REASON_PREEMPTED_RESOURCES
    h.run_due()
    done = h.task(jid, 0)
    assert (done.goal_state, done.state, done.run_id) == (S.PREEMPTING, S.KILLED, 1)
    assert done.failure_count == 0  # stopped on purpose, not a failure
    assert h.hosts.killed == [str(RunId(jid, 0, 1))]
    h.settle(30)
    assert h.task(jid, 0).run_id == 1  # never started again
    assert next(e.state for e in h.store.get_pod_events(jid, 0, 1, None)) is S.KILLED
    assert any(e.goal_state is S.PREEMPTING for e in h.store.get_pod_events(jid, 0, 1, None))


def test_a_service_task_killed_on_preemption_gets_goal_killed(h: Harness) -> None:
    jid = running_job(h, with_task(job_spec(1), kill_on_preempt=True))
    h.rm.victims.append(victim(jid, 0))
    h.run_due()
    rt = h.task(jid, 0)
    assert (rt.goal_state, rt.state, rt.termination) == (S.KILLED, S.KILLED, T.PREEMPTED_RESOURCES)


def test_a_preempted_task_runs_again_as_a_new_run(h: Harness) -> None:
    jid = running_job(h, job_spec(1))
    h.rm.victims.append(victim(jid, 0))
    assert h.jm.evictor.evict_once() == 1
    marked = h.task(jid, 0)
    assert (marked.goal_state, marked.desired_run_id, marked.run_id) == (S.RUNNING, 2, 1)
    h.run_due()
    rt = h.task(jid, 0)
    assert (rt.state, rt.goal_state, rt.run_id, rt.termination) == (S.RUNNING, S.RUNNING, 2, T.NONE)
    assert h.hosts.killed == [str(RunId(jid, 0, 1))]


def test_stale_victims_and_tasks_already_stopping_are_left_alone(h: Harness) -> None:
    jid = running_job(h, job_spec(2))
    h.rm.victims.extend([victim(jid, 0, run=7), victim("no-such-job", 0)])
    assert h.jm.evictor.evict_once() == 0
    h.jm.tasks.stop(jid, [(1, 2)])
    h.rm.victims.append(victim(jid, 1))
    assert h.jm.evictor.evict_once() == 0
    assert h.task(jid, 1).termination is T.KILLED_ON_REQUEST


# -- Peloton's drain: maximum unavailable instances ---------------------------------------------
def drained_service(h: Harness, instances: int = 4, max_unavailable: int = 1,
                    **task: object) -> str:
    """A service job with two instances on host-0 (of two hosts), which starts draining."""
    spec = with_task(job_spec(instances, sla=SlaSpec(maximum_unavailable_instances=max_unavailable)),
                     **task)
    jid = running_job(h, spec)
    assert on_host(h, jid, "host-0") == [0, 2]
    return jid


def test_a_drain_waits_for_max_unavailable_then_proceeds_as_instances_come_back() -> None:
    h = Harness(hosts=2)
    try:
        jid = drained_service(h)
        h.hosts.auto_run = False  # replacements stay LAUNCHED until the test says otherwise
        h.hosts.drain("host-0")
        h.run_due()
        # Instance 0 moved; instance 2 waits: one instance (0) is unavailable already.
        assert h.task(jid, 0).run_id == 2 and h.task(jid, 0).state is S.LAUNCHED
        assert h.task(jid, 0).host == "host-1"
        assert h.task(jid, 2).run_id == 1 and h.task(jid, 2).state is S.RUNNING
        assert on_host(h, jid, "host-0") == [2]
        assert h.jm.evictor.waiting == {
            (jid, 2): f"job {jid}: 1 of at most 1 instances are unavailable"}
        h.settle(60)
        assert on_host(h, jid, "host-0") == [2]  # still waiting, however long
        # The moved instance comes back: the drain proceeds.
        h.hosts.emit(str(RunId(jid, 0, 2)), S.RUNNING, "host-1")
        h.run_due()
        assert h.task(jid, 0).state is S.RUNNING
        assert h.task(jid, 2).run_id == 2 and h.task(jid, 2).host == "host-1"
        assert on_host(h, jid, "host-0") == []  # empty: the host manager takes it DOWN
        assert h.jm.evictor.waiting == {}
        killed = h.task(jid, 2)
        assert killed.termination is T.NONE  # the new run starts clean
        events = h.store.get_pod_events(jid, 2, 1, None)
        assert any(e.state is S.KILLED for e in events)
    finally:
        h.close()


def test_an_unhealthy_replacement_keeps_the_drain_waiting() -> None:
    h = Harness(hosts=2)
    try:
        check = HealthCheckSpec(command="true")
        jid = drained_service(h, health_check=check)
        for i in range(4):  # every instance healthy to begin with
            h.hosts.emit(str(RunId(jid, i, 1)), S.RUNNING, h.task(jid, i).host, healthy="HEALTHY")
        h.run_due()
        h.hosts.drain("host-0")
        h.run_due()
        assert h.task(jid, 0).run_id == 2 and h.task(jid, 0).healthy is HealthState.HEALTH_UNKNOWN
        assert on_host(h, jid, "host-0") == [2]  # RUNNING but not yet healthy: unavailable
        h.hosts.emit(str(RunId(jid, 0, 2)), S.RUNNING, "host-1", healthy="HEALTHY")
        h.run_due()
        assert on_host(h, jid, "host-0") == []
    finally:
        h.close()


def test_batch_jobs_and_services_without_a_limit_drain_at_once() -> None:
    for spec in (job_spec(4, JobType.BATCH), job_spec(4, sla=SlaSpec(maximum_unavailable_instances=0))):
        h = Harness(hosts=2)
        try:
            h.hosts.auto_run = True
            jid = running_job(h, spec)
            h.hosts.auto_run = False
            h.hosts.drain("host-0")
            h.run_due()
            assert on_host(h, jid, "host-0") == []
            assert [h.task(jid, i).run_id for i in (0, 2)] == [2, 2]
        finally:
            h.close()


def test_kill_on_preempt_tasks_on_a_draining_host_stop_as_peloton_stops_them() -> None:
    h = Harness(hosts=2)
    try:
        jid = running_job(h, with_task(job_spec(4, JobType.BATCH), kill_on_preempt=True))
        h.hosts.drain("host-0")
        h.run_due()
        for i in (0, 2):
            rt = h.task(jid, i)
            assert (rt.goal_state, rt.state, rt.termination) == (
                S.PREEMPTING, S.KILLED, T.KILLED_HOST_MAINTENANCE)
        assert [h.task(jid, i).state for i in (1, 3)] == [S.RUNNING, S.RUNNING]
    finally:
        h.close()


# -- Aurora's SLA-aware drain -------------------------------------------------------------------
def test_an_sla_drain_waits_for_the_policy_then_is_forced_after_its_timeout() -> None:
    h = Harness(hosts=2)
    try:
        jid = drained_service(h, max_unavailable=0)
        h.advance(10)  # every instance has run 10 s
        # Count 3 of 4: with 0 gone, 1 and 3 and 2 stay, so 0 may go; then 2 must wait.
        h.hosts.auto_run = False
        h.hosts.drain("host-0", DrainRequest(DrainMode.SLA_POLICY, CountSla(3, duration_secs=5),
                                             timeout_secs=120.0, started_at=h.clock.wall()))
        h.run_due()
        assert on_host(h, jid, "host-0") == [2]
        assert "the SLA needs 3" in h.jm.evictor.waiting[(jid, 2)]
        h.hosts.emit(str(RunId(jid, 0, 2)), S.RUNNING, "host-1")
        h.run_due()
        assert on_host(h, jid, "host-0") == [2]  # running, but not for 5 s yet
        h.advance(5.5)
        h.run_due()
        assert on_host(h, jid, "host-0") == []
    finally:
        h.close()


def test_an_sla_drain_is_forced_once_its_timeout_passes() -> None:
    h = Harness(hosts=2)
    try:
        jid = drained_service(h, max_unavailable=0)
        h.hosts.auto_run = False
        started = h.clock.wall()
        # Nobody has run an hour: the SLA can never be met within the test.
        h.hosts.drain("host-0", DrainRequest(DrainMode.SLA_POLICY, CountSla(1, duration_secs=3600),
                                             timeout_secs=30.0, started_at=started))
        h.run_due()
        assert on_host(h, jid, "host-0") == [0, 2]
        h.advance(30)
        h.run_due()
        assert on_host(h, jid, "host-0") == [0, 2]  # at the deadline: not yet
        h.advance(1)
        h.run_due()
        assert on_host(h, jid, "host-0") == []
        assert h.jm.evictor.waiting == {}
    finally:
        h.close()


def test_the_tasks_own_policy_beats_the_default_and_force_beats_both() -> None:
    h = Harness(hosts=2)
    try:
        own = task_sla_label(TaskSla(CountSla(3)))
        jid = drained_service(h, max_unavailable=0, labels=(own,))
        h.advance(10)
        h.hosts.auto_run = False
        loose = DrainRequest(DrainMode.SLA_POLICY, PercentageSla(0.0), started_at=h.clock.wall())
        h.hosts.drain("host-0", loose)
        h.run_due()
        assert on_host(h, jid, "host-0") == [2]  # the task's count of 3 holds instance 2
        h.hosts.drain("host-0", DrainRequest(DrainMode.FORCE, started_at=h.clock.wall()))
        h.run_due()
        assert on_host(h, jid, "host-0") == []
    finally:
        h.close()


def test_a_drain_moves_nothing_of_stopped_tasks(h: Harness) -> None:
    jid = running_job(h, job_spec(2))
    h.hosts.auto_run = False
    h.jm.tasks.stop(jid, [(0, 2)])  # KILLING: the runs are still on their hosts
    h.hosts.drain("host-0")
    assert h.jm.evictor.evict_once() == 0
    assert [h.task(jid, i).goal_state for i in (0, 1)] == [S.KILLED, S.KILLED]
