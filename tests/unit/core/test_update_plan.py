"""Rolling workflow planning."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from peloton.core.model.task import TaskRuntime, TerminationReason
from peloton.core.model.update import UpdateSpec
from peloton.core.states import HealthState, TaskState, WorkflowType
from peloton.core.update_plan import (
    Availability,
    Decision,
    batch_limit,
    instance_availability,
    plan_update_step,
)

V = 2  # target config version


def _rt(state: TaskState = TaskState.RUNNING, version: int = 1, desired: int = 1, *,
        healthy: HealthState = HealthState.HEALTHY, failures: int = 0,
        goal: TaskState = TaskState.RUNNING,
        term: TerminationReason = TerminationReason.NONE) -> TaskRuntime:
    return TaskRuntime(state=state, goal_state=goal, config_version=version,
                       desired_config_version=desired, healthy=healthy, failure_count=failures,
                       termination=term)


def _plan(runtimes: dict[int, TaskRuntime], spec: UpdateSpec, *, added: tuple[int, ...] = (),
          updated: tuple[int, ...] = (), removed: tuple[int, ...] = (),
          kind: WorkflowType = WorkflowType.UPDATE, rolling_back: bool = False):  # type: ignore[no-untyped-def]
    return plan_update_step(kind=kind, spec=spec, target_version=V, added=added,
                            updated=updated, removed=removed, runtimes=runtimes,
                            rolling_back=rolling_back)


def test_order_add_update_least_available_first_remove() -> None:
    rts = {0: _rt(), 1: _rt(TaskState.FAILED, goal=TaskState.RUNNING,
                            term=TerminationReason.FAILED),
           2: _rt(goal=TaskState.KILLED), 3: _rt(healthy=HealthState.UNHEALTHY), 9: _rt()}
    step = _plan(rts, UpdateSpec(batch_size=0), added=(5,), updated=(0, 1, 2, 3),
                 removed=(9,))
    assert step.decision is Decision.CONTINUE
    assert step.to_add == (5,) and step.to_update == (1, 3, 2, 0) and step.to_remove == (9,)
    step = _plan(rts, UpdateSpec(batch_size=3), added=(5,), updated=(0, 1, 2, 3), removed=(9,))
    assert step.picked == (5, 1, 3)


def test_done_needs_target_config_and_health() -> None:
    rts = {0: _rt(version=V, desired=V), 1: _rt(version=V, desired=V,
                                                healthy=HealthState.UNHEALTHY),
           2: _rt(version=1, desired=V), 3: _rt(version=V, desired=V,
                                                healthy=HealthState.DISABLED)}
    step = _plan(rts, UpdateSpec(batch_size=2), updated=(0, 1, 2, 3))
    assert step.done == (0, 3) and step.in_flight == (1, 2) and step.picked == ()


def test_failures_roll_back_or_fail_or_succeed() -> None:
    rts = {0: _rt(version=V, desired=V), 1: _rt(TaskState.FAILED, version=V, desired=V,
                                                failures=3)}
    spec = UpdateSpec(max_instance_attempts=3, max_failure_instances=1, rollback_on_failure=True)
    assert _plan(rts, spec, updated=(0, 1)).decision is Decision.ROLL_BACK
    assert _plan(rts, spec, updated=(0, 1), rolling_back=True).decision is Decision.FAIL
    lenient = UpdateSpec(max_instance_attempts=3, max_failure_instances=2)
    step = _plan(rts, lenient, updated=(0, 1))
    assert step.failed == (1,) and step.decision is Decision.SUCCEED


def test_removed_instances_and_stop() -> None:
    step = _plan({}, UpdateSpec(), removed=(4,))
    assert step.done == (4,) and step.decision is Decision.SUCCEED
    stopped = {0: _rt(TaskState.KILLED, desired=V, goal=TaskState.KILLED),
               1: _rt(desired=V, goal=TaskState.KILLED)}
    step = _plan(stopped, UpdateSpec(), updated=(0, 1), kind=WorkflowType.STOP)
    assert step.done == (0,) and step.in_flight == (1,)


def test_availability() -> None:
    assert instance_availability(None) is Availability.INVALID
    assert instance_availability(_rt()) is Availability.AVAILABLE
    assert instance_availability(_rt(goal=TaskState.DELETED)) is Availability.DELETED
    assert instance_availability(_rt(version=1, desired=2)) is Availability.KILLED
    assert instance_availability(_rt(term=TerminationReason.KILLED_ON_REQUEST)) is (
        Availability.KILLED)
    assert instance_availability(_rt(TaskState.PENDING)) is Availability.UNAVAILABLE
    assert batch_limit(UpdateSpec(batch_percentage=10), 25) == 3


states = st.sampled_from([TaskState.RUNNING, TaskState.PENDING, TaskState.FAILED,
                          TaskState.KILLED])
runtime_st = st.one_of(st.none(), st.builds(
    lambda s, v, d, h, f: _rt(s, v, d, healthy=h, failures=f), states,
    st.sampled_from([1, V]), st.sampled_from([1, V]),
    st.sampled_from(list(HealthState)), st.integers(0, 4)))


@settings(max_examples=200, deadline=None)
@given(st.lists(runtime_st, min_size=1, max_size=30), st.integers(1, 8), st.integers(0, 3),
       st.integers(0, 3))
def test_never_more_than_batch_size_in_flight(rts: list[TaskRuntime | None], batch: int,
                                              attempts: int, max_failed: int) -> None:
    runtimes = {i: rt for i, rt in enumerate(rts) if rt is not None}
    n = len(rts)
    spec = UpdateSpec(batch_size=batch, max_instance_attempts=attempts,
                      max_failure_instances=max_failed)
    step = _plan(runtimes, spec, added=tuple(range(0, n, 3)), updated=tuple(range(1, n, 3)),
                 removed=tuple(range(2, n, 3)))
    if len(step.in_flight) <= batch:
        assert len(step.in_flight) + len(step.picked) <= batch
    else:
        assert step.picked == ()
    everyone = step.in_flight + step.done + step.failed + step.picked
    assert len(everyone) == len(set(everyone))                   # one bucket per instance
    if step.decision is Decision.SUCCEED:
        assert len(step.done) + len(step.failed) == n
