"""Property test of the Thermos plan: random valid tasks driven by random process exits and a
fake clock always end, and never break Thermos's rules on the way."""

from __future__ import annotations

from typing import Any

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from peloton.core.thermos_plan import Exit, Outcome, Proc, Stage, TaskPlan
from peloton.core.thermos_spec import ProcessSpec, TaskSpec, ThermosConfigError, dependencies, parse_task

STAGES = [Stage.ACTIVE, Stage.CLEANING, Stage.FINALIZING, Stage.DONE]


@st.composite
def tasks(draw: Any) -> TaskSpec:
    names = [f"p{i}" for i in range(draw(st.integers(1, 6)))]
    procs = tuple(ProcessSpec(
        name=name, cmdline="true", max_failures=draw(st.integers(0, 3)),
        daemon=draw(st.integers(0, 4)) == 0, ephemeral=draw(st.integers(0, 3)) == 0,
        min_duration=draw(st.sampled_from([0.0, 0.5, 2.0])), final=draw(st.integers(0, 3)) == 0)
        for name in names)
    # Orders follow one permutation, so they never form a cycle.
    perm = draw(st.permutations(names))
    orders = []
    for _ in range(draw(st.integers(0, 3))):
        picked = sorted(draw(st.sets(st.integers(0, len(perm) - 1), min_size=2, max_size=len(perm)))
                        if len(perm) > 1 else [])
        if picked:
            orders.append(tuple(perm[i] for i in picked))
    spec = TaskSpec(processes=procs, orders=tuple(orders), max_failures=draw(st.integers(0, 3)),
                    max_concurrency=draw(st.integers(0, 3)),
                    finalization_wait=draw(st.sampled_from([0.0, 1.0, 5.0])))
    try:
        assert parse_task(spec.to_doc()) == spec  # what the runner reads back is the same task
    except ThermosConfigError:
        assume(False)  # e.g. an order mixing final and regular processes: Thermos refuses it
    return spec


@settings(max_examples=300, deadline=None)
@given(spec=tasks(), data=st.data())
def test_random_tasks_follow_the_rules_and_always_end(spec: TaskSpec, data: Any) -> None:
    by_name = {p.name: p for p in spec.processes}
    after = dependencies(spec)
    now = 0.0
    plan = TaskPlan(spec, now)
    running: set[str] = set()
    stages = [Stage.ACTIVE]
    kill_at = data.draw(st.integers(5, 60), label="events before a kill")
    killed_while_active = False
    for step in range(400):
        if step == kill_at:
            killed_while_active = plan.stage is Stage.ACTIVE
            plan.request_kill(now)
        decision = plan.decide(now)
        if decision.stage is not stages[-1]:
            assert STAGES.index(decision.stage) > STAGES.index(stages[-1]), "stages only go forward"
            stages.append(decision.stage)
        for name in decision.start:
            proc = by_name[name]
            assert name not in running
            assert decision.stage in (Stage.ACTIVE, Stage.FINALIZING)
            assert proc.final == (decision.stage is Stage.FINALIZING), "finals run only when finalizing"
            assert all(plan.status(b).state is Proc.FINISHED for b in after[name]), "order kept"
            last = plan.status(name).last_end
            assert last is None or now >= last + proc.min_duration, "min_duration kept"
            running.add(name)
        group = [n for n in running if by_name[n].final == (decision.stage is Stage.FINALIZING)]
        if spec.max_concurrency and decision.stage is not Stage.CLEANING:
            assert len(group) <= spec.max_concurrency, "max_concurrency kept"
        assert set(decision.terminate) | set(decision.kill) <= running
        if decision.stage is Stage.DONE:
            for name in decision.kill:
                assert plan.exited(name, Exit.SIGNALED, now).state is Proc.KILLED
                running.discard(name)
            break
        if running and data.draw(st.integers(0, 3), label="exit or wait") > 0:
            name = data.draw(st.sampled_from(sorted(running)), label="which exits")
            how = data.draw(st.sampled_from([Exit.SUCCESS, Exit.FAILURE, Exit.SIGNALED]), label="how")
            plan.exited(name, how, now)
            running.discard(name)
        elif decision.wake_at is not None:
            now = max(now, decision.wake_at)
        else:
            now += 1.0
    else:
        raise AssertionError(f"the task never ended: {plan.stage}, running {running}")

    assert not running and plan.outcome is not None
    regular = [p for p in spec.processes if not p.final]
    failed = [p for p in regular if plan.status(p.name).state is Proc.FAILED]
    for p in spec.processes:
        status = plan.status(p.name)
        assert status.state is not Proc.RUNNING
        if p.max_failures:
            assert status.failures <= p.max_failures, "never retried beyond max_failures"
        if status.state is Proc.FAILED:
            assert not p.ephemeral and status.failures == p.max_failures
    if killed_while_active:
        assert plan.outcome is Outcome.KILLED
    if plan.outcome is Outcome.SUCCEEDED:
        assert not spec.max_failures or len(failed) < spec.max_failures
        assert all(plan.status(p.name).state in (Proc.FINISHED, Proc.FAILED)
                   for p in regular if not p.ephemeral)
    if spec.max_failures and len(failed) >= spec.max_failures:
        assert plan.outcome in (Outcome.FAILED, Outcome.KILLED)
