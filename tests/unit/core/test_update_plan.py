"""Rolling workflow planning."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from peloton.core.model.task import TaskRuntime, TerminationReason
from peloton.core.model.update import Strategy, UpdateSpec
from peloton.core.states import HealthState, TaskState, WorkflowType
from peloton.core.update_plan import (
    Availability,
    Decision,
    UpdateStep,
    batch_limit,
    instance_availability,
    plan_update_step,
)
from peloton.core.update_strategy import startable, var_group_size

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
          kind: WorkflowType = WorkflowType.UPDATE, rolling_back: bool = False) -> UpdateStep:
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


# -- strategies, watch time, auto-pause (Aurora's rules) ---------------------------------------

def _groups(sizes: tuple[int, ...], total: int, *, rolling_back: bool = False) -> list[int]:
    """The group sizes a VAR_BATCH walk over `total` instances takes, one group at a time."""
    out: list[int] = []
    idle = total
    spec = UpdateSpec(strategy=Strategy.VAR_BATCH, group_sizes=sizes)
    while idle:
        n = startable(spec, total=total, idle=idle, active=0, rolling_back=rolling_back)
        assert n > 0
        out.append(n)
        idle -= n
    return out


def test_var_batch_groups_forward_and_back() -> None:
    assert _groups((1, 2), 5) == [1, 2, 2]
    assert _groups((1, 3, 1), 6) == [1, 3, 1, 1]
    assert _groups((2, 3), 4) == [2, 2]
    # Rolling back 4 instances touched as [2, 2] (cut short of [2, 3]): Aurora's example.
    assert _groups((2, 3), 4, rolling_back=True) == [2, 2]
    assert _groups((1, 2), 5, rolling_back=True) == [2, 2, 1]  # the last group first
    assert var_group_size((), total=4, idle=3, rolling_back=False) == 3


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 5), min_size=1, max_size=4), st.integers(1, 40))
def test_var_batch_walks_cover_every_instance_once(sizes: list[int], total: int) -> None:
    forward = _groups(tuple(sizes), total)
    assert sum(forward) == total
    expected = sizes + [sizes[-1]] * total
    assert forward[:-1] == expected[:len(forward) - 1] and forward[-1] <= expected[len(forward) - 1]
    # Rolling back walks the same groups from the last one (Aurora's reverse rule).
    assert _groups(tuple(sizes), total, rolling_back=True) == forward[::-1]


def test_batch_waits_queue_does_not() -> None:
    batch = UpdateSpec(batch_size=2, strategy=Strategy.BATCH)
    queue = UpdateSpec(batch_size=2)
    assert startable(batch, total=5, idle=3, active=1) == 0
    assert startable(queue, total=5, idle=3, active=1) == 1
    assert startable(batch, total=5, idle=3, active=0) == 2
    assert startable(UpdateSpec(strategy=Strategy.BATCH), total=5, idle=3, active=0) == 3


def test_watch_time_keeps_a_running_instance_in_flight() -> None:
    rt = dataclasses.replace(_rt(version=V, desired=V), start_time=100.0)
    spec = UpdateSpec(batch_size=1, watch_secs=5.0)
    early = plan_update_step(kind=WorkflowType.UPDATE, spec=spec, target_version=V, added=(),
                             updated=(0,), removed=(), runtimes={0: rt}, now=104.0)
    assert early.in_flight == (0,) and early.watch_until == 105.0
    late = plan_update_step(kind=WorkflowType.UPDATE, spec=spec, target_version=V, added=(),
                            updated=(0,), removed=(), runtimes={0: rt}, now=105.0)
    assert late.done == (0,) and late.decision is Decision.SUCCEED
    healthy_late = dataclasses.replace(rt, healthy_time=103.0)
    step = plan_update_step(kind=WorkflowType.UPDATE, spec=spec, target_version=V, added=(),
                            updated=(0,), removed=(), runtimes={0: healthy_late}, now=106.0)
    assert step.in_flight == (0,) and step.watch_until == 108.0
    # A new run after a failure inside the watch: the instance is out of attempts.
    retried = dataclasses.replace(rt, failure_count=1)
    step = plan_update_step(kind=WorkflowType.UPDATE,
                            spec=dataclasses.replace(spec, max_instance_attempts=1,
                                                     max_failure_instances=1,
                                                     rollback_on_failure=True),
                            target_version=V, added=(), updated=(0,), removed=(),
                            runtimes={0: retried}, now=102.0)
    assert step.failed == (0,) and step.decision is Decision.ROLL_BACK


def test_done_and_failed_are_final() -> None:
    broken = _rt(TaskState.FAILED, version=V, desired=V, failures=1)
    step = _plan({0: broken, 1: broken}, UpdateSpec(max_instance_attempts=1),
                 updated=(0, 1))
    assert step.failed == (0, 1)
    again = plan_update_step(kind=WorkflowType.UPDATE, spec=UpdateSpec(max_instance_attempts=1),
                             target_version=V, added=(), updated=(0, 1), removed=(),
                             runtimes={0: broken, 1: broken}, done_before=(0,))
    assert again.done == (0,) and again.failed == (1,)


def test_autopause_at_each_boundary_once() -> None:
    spec = UpdateSpec(strategy=Strategy.VAR_BATCH, group_sizes=(1, 2), autopause=True)
    rts = {0: _rt(version=V, desired=V), 1: _rt(), 2: _rt()}
    first = _plan({1: _rt(), 2: _rt(), 0: _rt()}, spec, updated=(0, 1, 2))
    assert first.decision is Decision.CONTINUE and first.picked == (0,)
    boundary = plan_update_step(kind=WorkflowType.UPDATE, spec=spec, target_version=V,
                                added=(), updated=(0, 1, 2), removed=(), runtimes=rts)
    assert boundary.decision is Decision.PAUSE and boundary.touched == 1
    resumed = plan_update_step(kind=WorkflowType.UPDATE, spec=spec, target_version=V,
                               added=(), updated=(0, 1, 2), removed=(), runtimes=rts,
                               autopaused_at=1)
    assert resumed.decision is Decision.CONTINUE and resumed.picked == (1, 2)
    back = plan_update_step(kind=WorkflowType.UPDATE, spec=spec, target_version=V, added=(),
                            updated=(0, 1, 2), removed=(), runtimes=rts, rolling_back=True)
    assert back.decision is Decision.CONTINUE


def test_a_rollback_undoes_the_highest_instance_first() -> None:
    # Aurora's UpdateOrdering.reverse(): re-add what the update removed, undo updates, then
    # remove what it added, each kind highest instance first.
    rts = {i: _rt(version=2, desired=1) for i in range(4)}
    rts[9] = _rt(version=2, desired=1)
    step = _plan(rts, UpdateSpec(batch_size=0), added=(5, 6), updated=(0, 1, 2, 3), removed=(9,),
                 rolling_back=True)
    assert step.to_add == (6, 5) and step.to_update == (3, 2, 1, 0) and step.to_remove == (9,)
    step = _plan(rts, UpdateSpec(batch_size=3), updated=(0, 1, 2, 3), rolling_back=True)
    assert step.picked == (3, 2, 1)
