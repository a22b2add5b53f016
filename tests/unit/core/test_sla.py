"""SLA arithmetic of host drains (peloton.core.sla): Peloton's maximum unavailable instances,
Aurora's percentage and count policies, timeouts, forced drains and the task label."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from peloton.core.errors import InvalidArgument
from peloton.core.model.constraints import Label
from peloton.core.model.sla_policy import (
    CoordinatorSla,
    CountSla,
    DrainMode,
    DrainRequest,
    MaxUnavailable,
    PercentageSla,
    SlaPolicy,
)
from peloton.core.model.task import TaskRuntime, TerminationReason
from peloton.core.sla import (
    TASK_SLA_LABEL,
    Availability,
    Candidate,
    InstanceSla,
    JobSla,
    TaskSla,
    availability,
    check_drain_request,
    check_policy,
    effective_count,
    effective_percentage,
    instance_sla,
    job_verdicts,
    meets_count,
    meets_percentage,
    plan_drain,
    task_sla,
    task_sla_label,
)
from peloton.core.states import HealthState, TaskState

S = TaskState
A = Availability
NOW = 10_000.0
PELOTON = DrainRequest()


def running(instance: int, since: float = 0.0) -> InstanceSla:
    return InstanceSla(instance, A.AVAILABLE, True, since)


def down(instance: int) -> InstanceSla:
    return InstanceSla(instance, A.UNAVAILABLE, True, None)


def service(n: int, max_unavailable: int, unavailable: frozenset[int] = frozenset()) -> JobSla:
    return JobSla("job", True, max_unavailable,
                  tuple(down(i) if i in unavailable else running(i) for i in range(n)))


def aurora(policy: SlaPolicy, timeout: float | None = None, started: float = NOW - 1,
           min_required: int = 0, non_prod: bool = True) -> DrainRequest:
    return DrainRequest(DrainMode.SLA_POLICY, policy, timeout, started, min_required, non_prod)


def allowed(job: JobSla, instances: list[int], req: DrainRequest = PELOTON,
            task: TaskSla = TaskSla(), now: float = NOW) -> list[int]:
    return [v.instance for v in job_verdicts(job, [Candidate(i, req, task) for i in instances], now)
            if v.allowed]


# -- Peloton's instance availability ----------------------------------------------------------
def rt(**fields: object) -> TaskRuntime:
    base = TaskRuntime(state=S.RUNNING, goal_state=S.RUNNING, run_id=3, desired_run_id=3,
                       config_version=2, desired_config_version=2, start_time=5.0)
    return dataclasses.replace(base, **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(("fields", "expected"), [
    ({}, A.AVAILABLE),
    ({"healthy": HealthState.HEALTHY}, A.AVAILABLE),
    ({"healthy": HealthState.HEALTH_UNKNOWN}, A.UNAVAILABLE),
    ({"healthy": HealthState.UNHEALTHY}, A.UNAVAILABLE),
    ({"state": S.PENDING}, A.UNAVAILABLE),
    ({"state": S.LAUNCHED}, A.UNAVAILABLE),
    ({"goal_state": S.DELETED}, A.DELETED),
    ({"goal_state": S.KILLED}, A.KILLED),
    ({"goal_state": S.PREEMPTING}, A.KILLED),
    ({"goal_state": S.SUCCEEDED}, A.UNAVAILABLE),  # batch tasks are never "available"
    ({"termination": TerminationReason.KILLED_HOST_MAINTENANCE}, A.UNAVAILABLE),
    ({"termination": TerminationReason.KILLED_FOR_UPDATE}, A.UNAVAILABLE),
    ({"termination": TerminationReason.FAILED}, A.UNAVAILABLE),
    ({"termination": TerminationReason.KILLED_FOR_RESTART}, A.KILLED),
    ({"termination": TerminationReason.PREEMPTED_RESOURCES}, A.KILLED),
    ({"desired_run_id": 4}, A.KILLED),
    ({"desired_config_version": 3}, A.KILLED),
])
def test_availability_is_pelotons(fields: dict[str, object], expected: Availability) -> None:
    assert availability(rt(**fields)) is expected


def test_instance_view_counts_running_time_only_of_healthy_current_runs() -> None:
    assert instance_sla(0, rt()) == InstanceSla(0, A.AVAILABLE, True, 5.0)
    assert instance_sla(0, rt(goal_state=S.SUCCEEDED)).running_since == 5.0  # batch too
    assert instance_sla(0, rt(healthy=HealthState.UNHEALTHY)).running_since is None
    assert instance_sla(0, rt(desired_run_id=4)).running_since is None
    assert instance_sla(0, rt(state=S.STARTING)).running_since is None
    assert not instance_sla(0, rt(goal_state=S.KILLED)).active


# -- Peloton's rule ---------------------------------------------------------------------------
def test_peloton_rule_lets_max_unavailable_go_then_waits() -> None:
    job = service(4, 1)
    verdicts = job_verdicts(job, [Candidate(i, PELOTON) for i in (2, 0, 1)], NOW)
    assert [(v.instance, v.allowed) for v in verdicts] == [(0, True), (1, False), (2, False)]
    assert verdicts[1].why == "job job: 1 of at most 1 instances are unavailable"


def test_peloton_rule_counts_instances_already_down_and_lets_them_go() -> None:
    job = service(4, 2, unavailable=frozenset({3}))
    assert allowed(job, [0, 1, 3]) == [0, 3]  # 3 is already down: moving it costs nothing


def test_peloton_rule_skips_batch_jobs_and_jobs_without_a_limit() -> None:
    assert allowed(service(3, 0), [0, 1, 2]) == [0, 1, 2]
    batch = dataclasses.replace(service(3, 1), service=False)
    assert allowed(batch, [0, 1, 2]) == [0, 1, 2]


@given(n=st.integers(1, 12), limit=st.integers(1, 12), data=st.data())
def test_peloton_rule_never_exceeds_the_limit_and_uses_all_of_it(n: int, limit: int,
                                                                 data: st.DataObject) -> None:
    already = frozenset(data.draw(st.sets(st.integers(0, n - 1))))
    candidates = data.draw(st.lists(st.integers(0, n - 1), unique=True))
    job = service(n, limit, already)
    got = set(allowed(job, candidates))
    after = already | got
    assert len(after) <= max(limit, len(already))
    # Everything already down may go; of the rest, as many as the room allows.
    fresh = [c for c in candidates if c not in already]
    assert already & set(candidates) <= got
    assert len(got - already) == min(len(fresh), max(0, limit - len(already)))


# -- Aurora's rules ---------------------------------------------------------------------------
def test_percentage_and_count_arithmetic_are_auroras() -> None:
    # 95% of 10 lets no instance go: lowered to 90% (one may go).
    assert effective_percentage(95.0, 10) == 90.0
    assert effective_percentage(50.0, 10) == 50.0
    assert meets_percentage(50.0, 5, 10) and not meets_percentage(50.0, 4, 10)
    assert meets_percentage(95.0, 9, 10) and not meets_percentage(95.0, 8, 10)
    assert effective_count(10, 10) == 9 and effective_count(3, 10) == 3
    assert meets_count(3, 3, 10) and not meets_count(3, 2, 10)


def test_aurora_rule_waits_for_instances_running_long_enough() -> None:
    job = JobSla("job", True, 0, (running(0, NOW - 100), running(1, NOW - 100),
                                  running(2, NOW - 5), running(3, NOW - 5)))
    req = aurora(CountSla(2, duration_secs=30))
    verdicts = job_verdicts(job, [Candidate(0, req), Candidate(1, req)], NOW)
    # Besides each candidate only one instance has run 30 s; the count needs two.
    assert [v.allowed for v in verdicts] == [False, False]
    assert "1 of 4 active instances would be running for more than 30s" in verdicts[0].why
    later = NOW + 30
    assert allowed(job, [0, 1], req, now=later) == [0, 1]  # 2 and 3 now count
    req_pct = aurora(PercentageSla(50.0, duration_secs=30))
    assert allowed(job, [0, 1], req_pct, now=later) == [0, 1]  # 2 of 4 stay = 50%
    assert allowed(job, [0, 1, 2], req_pct, now=later) == [0, 1]


def test_the_tasks_own_policy_wins_over_the_default() -> None:
    job = JobSla("job", True, 0, tuple(running(i) for i in range(4)))
    loose = aurora(PercentageSla(0.0))
    assert allowed(job, [0, 1, 2, 3], loose) == [0, 1, 2, 3]
    strict = TaskSla(CountSla(3))
    assert allowed(job, [0, 1, 2, 3], loose, strict) == [0]


def test_small_and_non_production_jobs_are_not_checked_unless_configured() -> None:
    job = JobSla("job", True, 0, tuple(running(i) for i in range(4)))
    req = aurora(CountSla(3), min_required=20)
    assert allowed(job, [0, 1, 2], req) == [0, 1, 2]  # 4 active < 20: no check
    req = aurora(CountSla(3), non_prod=False)
    assert allowed(job, [0, 1, 2], req, TaskSla(production=False)) == [0, 1, 2]
    assert allowed(job, [0, 1, 2], req, TaskSla(production=True)) == [0]


def test_coordinator_policies_wait_for_the_timeout() -> None:
    job = JobSla("job", True, 0, tuple(running(i) for i in range(4)))
    req = aurora(CoordinatorSla("http://coordinator"), timeout=60.0, started=NOW - 10)
    verdicts = job_verdicts(job, [Candidate(0, req)], NOW)
    assert not verdicts[0].allowed and "not consulted" in verdicts[0].why
    assert allowed(job, [0], req, now=NOW + 51) == [0]


def test_timeout_forces_and_force_mode_ignores_every_sla() -> None:
    job = JobSla("job", True, 1, tuple(down(i) for i in range(3)))
    req = aurora(CountSla(2), timeout=30.0, started=NOW - 30)
    assert allowed(job, [0, 1, 2], req) == []  # exactly at the deadline: not yet (Aurora: < 0)
    assert allowed(job, [0, 1, 2], req, now=NOW + 0.001) == [0, 1, 2]
    force = DrainRequest(DrainMode.FORCE, started_at=NOW)
    assert allowed(job, [0, 1, 2], force) == [0, 1, 2]
    assert allowed(service(3, 1, frozenset({0})), [1, 2], force) == [1, 2]


@given(total=st.integers(1, 30), count=st.integers(0, 40), duration=st.integers(0, 100),
       data=st.data())
def test_count_rule_allows_exactly_what_keeps_the_count(total: int, count: int, duration: int,
                                                         data: st.DataObject) -> None:
    ages = data.draw(st.lists(st.one_of(st.none(), st.integers(0, 200)), min_size=total,
                              max_size=total))
    instances = tuple(InstanceSla(i, A.AVAILABLE if age is not None else A.UNAVAILABLE, True,
                                  None if age is None else NOW - age)
                      for i, age in enumerate(ages))
    job = JobSla("job", True, 0, instances)
    candidates = data.draw(st.lists(st.integers(0, total - 1), unique=True))
    got = allowed(job, candidates, aurora(CountSla(count, duration)))
    old = {i for i, age in enumerate(ages) if age is not None and age > duration}
    need = effective_count(count, total)
    # Each allowed candidate leaves at least `need` old instances besides the ones already gone.
    gone: set[int] = set()
    for c in sorted(candidates):
        ok = len(old - gone - {c}) >= need
        assert (c in got) == ok
        if ok:
            gone.add(c)


@given(total=st.integers(1, 30), pct=st.floats(0, 100), data=st.data())
def test_percentage_rule_never_lets_the_running_share_fall_below_it(total: int, pct: float,
                                                                    data: st.DataObject) -> None:
    candidates = data.draw(st.lists(st.integers(0, total - 1), unique=True))
    job = JobSla("job", True, 0, tuple(running(i) for i in range(total)))
    got = allowed(job, candidates, aurora(PercentageSla(pct)))
    if got:
        # After all but the last allowed one went, the rest still met the policy.
        assert meets_percentage(pct, total - len(got), total)
    # At least one instance may always go (Aurora lowers a policy that allows none).
    assert (len(got) >= 1) == bool(candidates)


@given(n=st.integers(1, 8), limit=st.integers(0, 8), data=st.data())
def test_a_host_can_go_down_exactly_when_every_run_on_it_may_go(n: int, limit: int,
                                                                data: st.DataObject) -> None:
    already = frozenset(data.draw(st.sets(st.integers(0, n - 1))))
    on_host = data.draw(st.lists(st.integers(0, n - 1), unique=True, min_size=1))
    job = service(n, limit, already)
    plan = plan_drain([(job, [Candidate(i, PELOTON) for i in on_host])], NOW)
    fresh = len([i for i in on_host if i not in already])
    expected = limit == 0 or fresh <= max(0, limit - len(already))
    assert plan.complete == expected
    assert len(plan.allowed) + len(plan.waiting) == len(on_host)


# -- checks and the label ---------------------------------------------------------------------
@pytest.mark.parametrize(("policy", "field"), [
    (PercentageSla(101.0), "drain.default_policy.percentage"),
    (PercentageSla(-0.5), "drain.default_policy.percentage"),
    (PercentageSla(math.nan), "drain.default_policy.percentage"),
    (PercentageSla(50.0, -1), "drain.default_policy.duration_secs"),
    (CountSla(-1), "drain.default_policy.count"),
    (MaxUnavailable(-2), "drain.default_policy.count"),
    (CoordinatorSla(""), "drain.default_policy.url"),
])
def test_bad_policies_are_refused_naming_the_field(policy: SlaPolicy, field: str) -> None:
    with pytest.raises(InvalidArgument) as err:
        check_drain_request(aurora(policy))
    assert err.value.field == field


def test_bad_drain_requests_are_refused_naming_the_field() -> None:
    with pytest.raises(InvalidArgument) as err:
        check_drain_request(DrainRequest(DrainMode.SLA_POLICY))
    assert err.value.field == "drain.default_policy"
    with pytest.raises(InvalidArgument) as err:
        check_drain_request(aurora(CountSla(1), timeout=-1.0))
    assert err.value.field == "drain.timeout_secs"
    with pytest.raises(InvalidArgument) as err:
        check_drain_request(aurora(CountSla(1), min_required=-1))
    assert err.value.field == "drain.min_required_instances"
    check_drain_request(PELOTON)
    check_policy(CountSla(0), "p")


policies = st.one_of(
    st.none(),
    st.builds(PercentageSla, st.floats(0, 100), st.integers(0, 10**6)),
    st.builds(CountSla, st.integers(0, 10**4), st.integers(0, 10**6)),
    st.builds(MaxUnavailable, st.integers(0, 10**4)),
    st.builds(CoordinatorSla, st.text(min_size=1), st.text(min_size=1)),
)


@given(policy=policies, production=st.booleans())
def test_the_task_label_round_trips(policy: SlaPolicy | None, production: bool) -> None:
    task = TaskSla(policy, production)
    label = task_sla_label(task)
    assert label.key == TASK_SLA_LABEL
    assert task_sla([Label("other", "x"), label]) == task


@pytest.mark.parametrize("value", [
    "not json", "[]", '{"unknown": 1}', '{"production": "yes"}',
    '{"countSlaPolicy": {"count": 1}, "percentageSlaPolicy": {"percentage": 5}}',
    '{"countSlaPolicy": {"count": 1.5}}', '{"percentageSlaPolicy": {"percentage": 150}}',
    '{"coordinatorSlaPolicy": {"coordinatorUrl": 3}}', '{"countSlaPolicy": 3}',
])
def test_bad_labels_are_refused_naming_the_label(value: str) -> None:
    with pytest.raises(InvalidArgument) as err:
        task_sla([Label(TASK_SLA_LABEL, value)])
    assert TASK_SLA_LABEL in str(err.value.field)


def test_no_label_is_production_without_a_policy() -> None:
    assert task_sla([]) == TaskSla(None, True)
