"""Thermos's scheduling rules (peloton/core/thermos_plan.py), with a fake clock: every row of
both tables, then the behaviours Thermos documents, one by one."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from peloton.core.thermos_plan import (
    PROCESS_RULES,
    STAGE_RULES,
    Cond,
    Decision,
    Exit,
    Guard,
    Outcome,
    Proc,
    Stage,
    Step,
    Tally,
    TaskPlan,
    guard_for,
)
from peloton.core.thermos_spec import ProcessSpec, TaskSpec


def proc(name: str, **kw: Any) -> ProcessSpec:
    """A process with min_duration 0 unless given (the tests move the clock themselves)."""
    kw.setdefault("min_duration", 0.0)
    return ProcessSpec(name=name, cmdline=f"run {name}", **kw)


def task(*procs: ProcessSpec, orders: tuple[tuple[str, ...], ...] = (), **kw: Any) -> TaskSpec:
    return TaskSpec(processes=procs, orders=orders, **kw)


class Driver:
    """A TaskPlan and its fake clock."""

    def __init__(self, spec: TaskSpec, now: float = 100.0) -> None:
        self.now = now
        self.plan = TaskPlan(spec, now)

    def decide(self, at: float | None = None) -> Decision:
        if at is not None:
            self.now = at
        return self.plan.decide(self.now)

    def exit(self, name: str, how: Exit, at: float | None = None) -> Step:
        if at is not None:
            self.now = at
        return self.plan.exited(name, how, self.now)

    def state(self, name: str) -> Proc:
        return self.plan.status(name).state


# -- the process table -------------------------------------------------------------------------

#: Written out again, independently of the module: every (state, exit, guard) that may happen.
EXPECTED = {
    (Proc.RUNNING, Exit.SUCCESS, Guard.DAEMON): (Proc.PENDING, Tally.SUCCESS),
    (Proc.RUNNING, Exit.SUCCESS, Guard.ONCE): (Proc.FINISHED, Tally.SUCCESS),
    (Proc.RUNNING, Exit.FAILURE, Guard.RETRY): (Proc.PENDING, Tally.FAILURE),
    (Proc.RUNNING, Exit.FAILURE, Guard.SPENT_EPHEMERAL): (Proc.FINISHED, Tally.FAILURE),
    (Proc.RUNNING, Exit.FAILURE, Guard.SPENT): (Proc.FAILED, Tally.FAILURE),
    (Proc.RUNNING, Exit.SIGNALED, Guard.ANY): (Proc.PENDING, Tally.LOSS),
    (Proc.RUNNING, Exit.STOPPED, Guard.ANY): (Proc.KILLED, Tally.NONE),
}


def test_the_process_table_is_exactly_thermos_rules() -> None:
    assert PROCESS_RULES == EXPECTED
    for state, how, guard in itertools.product(Proc, Exit, Guard):
        if (state, how, guard) not in EXPECTED:
            assert (state, how, guard) not in PROCESS_RULES


#: One process spec and the failures it already had, per row: the run ends as the row says.
ROW_SETUPS: dict[tuple[Proc, Exit, Guard], tuple[dict[str, Any], int]] = {
    (Proc.RUNNING, Exit.SUCCESS, Guard.DAEMON): ({"daemon": True}, 0),
    (Proc.RUNNING, Exit.SUCCESS, Guard.ONCE): ({}, 0),
    (Proc.RUNNING, Exit.FAILURE, Guard.RETRY): ({"max_failures": 3}, 1),
    (Proc.RUNNING, Exit.FAILURE, Guard.SPENT_EPHEMERAL): ({"max_failures": 2, "ephemeral": True}, 1),
    (Proc.RUNNING, Exit.FAILURE, Guard.SPENT): ({"max_failures": 2}, 1),
    (Proc.RUNNING, Exit.SIGNALED, Guard.ANY): ({"max_failures": 1}, 0),
    (Proc.RUNNING, Exit.STOPPED, Guard.ANY): ({}, 0),
}


@pytest.mark.parametrize("row", list(EXPECTED), ids=lambda r: "-".join(x.name for x in r))
def test_every_process_transition_happens_as_its_row_says(row: tuple[Proc, Exit, Guard]) -> None:
    attrs, failures_before = ROW_SETUPS[row]
    # A companion keeps the task ACTIVE whatever the process under test does.
    d = Driver(task(proc("p", **attrs), proc("keep"), max_failures=0))
    for _ in range(failures_before):
        assert "p" in d.decide().start
        d.exit("p", Exit.FAILURE)
    assert "p" in d.decide().start and d.state("p") is Proc.RUNNING
    _, how, guard = row
    if how is Exit.STOPPED:
        d.plan.request_kill(d.now)
        assert d.decide().terminate == ("p", "keep")
        how = Exit.FAILURE  # whatever the exit, a run the runner stopped counts as STOPPED
    before = d.plan.status("p")
    step = d.exit("p", how, at=d.now + 1)
    state, tally = EXPECTED[row]
    assert (step.exit, step.guard, step.state) == (row[1], guard, state)
    after = d.plan.status("p")
    counts = {Tally.SUCCESS: (before.successes, after.successes),
              Tally.FAILURE: (before.failures, after.failures),
              Tally.LOSS: (before.losses, after.losses)}
    for kind, (was, now) in counts.items():
        assert now == was + (kind is tally), kind


@pytest.mark.parametrize("state", [Proc.PENDING, Proc.FINISHED, Proc.FAILED, Proc.KILLED])
def test_only_a_running_process_can_end(state: Proc) -> None:
    d = Driver(task(proc("a"), proc("b"), orders=(("a", "b"),), max_failures=0))
    d.decide()
    if state is Proc.FINISHED:
        d.exit("a", Exit.SUCCESS)
    elif state is Proc.FAILED:
        d.exit("a", Exit.FAILURE)
    elif state is Proc.KILLED:
        d.plan.request_kill(d.now)
        d.decide()
        d.exit("a", Exit.SUCCESS)
    name = "b" if state is Proc.PENDING else "a"
    assert d.state(name) is state
    for how in Exit:
        with pytest.raises(ValueError, match="cannot have"):
            d.exit(name, how)


def test_guards() -> None:
    once, daemon = proc("a", max_failures=2), proc("d", daemon=True)
    assert guard_for(once, Exit.SUCCESS, 0) is Guard.ONCE
    assert guard_for(daemon, Exit.SUCCESS, 0) is Guard.DAEMON
    assert guard_for(once, Exit.FAILURE, 1) is Guard.RETRY
    assert guard_for(once, Exit.FAILURE, 2) is Guard.SPENT
    assert guard_for(proc("e", ephemeral=True), Exit.FAILURE, 1) is Guard.SPENT_EPHEMERAL
    assert guard_for(proc("f", max_failures=0), Exit.FAILURE, 10**6) is Guard.RETRY
    assert guard_for(once, Exit.SIGNALED, 5) is guard_for(once, Exit.STOPPED, 0) is Guard.ANY


# -- the stage table ---------------------------------------------------------------------------

def test_the_stage_table_is_exactly_thermos_rules() -> None:
    assert STAGE_RULES == {
        Stage.ACTIVE: ((Cond.KILL_REQUESTED, Stage.CLEANING, Outcome.KILLED),
                       (Cond.TOO_MANY_FAILED, Stage.CLEANING, Outcome.FAILED),
                       (Cond.COMPLETE, Stage.CLEANING, Outcome.SUCCEEDED),
                       (Cond.STUCK, Stage.CLEANING, Outcome.FAILED)),
        Stage.CLEANING: ((Cond.DEADLINE, Stage.DONE, None), (Cond.IDLE, Stage.FINALIZING, None)),
        Stage.FINALIZING: ((Cond.DEADLINE, Stage.DONE, None), (Cond.COMPLETE, Stage.DONE, None),
                           (Cond.STUCK, Stage.DONE, None)),
        Stage.DONE: (),
    }


def _active_kill() -> Driver:
    d = Driver(task(proc("a"), proc("z", final=True)))
    d.decide()
    d.plan.request_kill(d.now)
    return d


def _active_too_many() -> Driver:
    d = Driver(task(proc("a"), proc("b"), proc("c"), max_failures=2))
    d.decide()
    d.exit("a", Exit.FAILURE)
    d.exit("b", Exit.FAILURE)
    return d


def _active_complete() -> Driver:
    d = Driver(task(proc("a"), proc("z", final=True)))
    d.decide()
    d.exit("a", Exit.SUCCESS)
    return d


def _active_stuck() -> Driver:
    d = Driver(task(proc("a"), proc("b"), proc("c"), orders=(("a", "b"),), max_failures=2))
    d.decide()
    d.exit("c", Exit.SUCCESS)
    d.exit("a", Exit.FAILURE)  # b can never run
    return d


def _cleaning(ignores_term: bool) -> Driver:
    d = Driver(task(proc("a"), proc("eph", ephemeral=True), proc("z", final=True),
                    finalization_wait=10.0))
    d.decide()
    d.exit("a", Exit.SUCCESS)
    assert d.decide().terminate == ("eph",)
    if ignores_term:
        d.now += 10.0
    else:
        d.exit("eph", Exit.FAILURE)
    return d


def _finalizing(deadline: bool, stuck: bool = False) -> Driver:
    d = Driver(task(proc("a"), proc("y", final=True), proc("z", final=True),
                    orders=(("y", "z"),), finalization_wait=10.0))
    d.decide()
    d.exit("a", Exit.SUCCESS)
    assert d.decide().start == ("y",)
    if deadline:
        d.now += 10.0
    elif stuck:
        d.exit("y", Exit.FAILURE)
    else:
        d.exit("y", Exit.SUCCESS)
        assert d.decide().start == ("z",)
        d.exit("z", Exit.SUCCESS)
    return d


#: Per (stage, condition): a scenario where that rule is the first to hold, and what follows.
STAGE_SCENARIOS = {
    (Stage.ACTIVE, Cond.KILL_REQUESTED): (_active_kill, Outcome.KILLED),
    (Stage.ACTIVE, Cond.TOO_MANY_FAILED): (_active_too_many, Outcome.FAILED),
    (Stage.ACTIVE, Cond.COMPLETE): (_active_complete, Outcome.SUCCEEDED),
    (Stage.ACTIVE, Cond.STUCK): (_active_stuck, Outcome.FAILED),
    (Stage.CLEANING, Cond.DEADLINE): (lambda: _cleaning(True), Outcome.SUCCEEDED),
    (Stage.CLEANING, Cond.IDLE): (lambda: _cleaning(False), Outcome.SUCCEEDED),
    (Stage.FINALIZING, Cond.DEADLINE): (lambda: _finalizing(True), Outcome.SUCCEEDED),
    (Stage.FINALIZING, Cond.COMPLETE): (lambda: _finalizing(False), Outcome.SUCCEEDED),
    (Stage.FINALIZING, Cond.STUCK): (lambda: _finalizing(False, stuck=True), Outcome.SUCCEEDED),
}


def test_every_stage_rule_has_a_scenario() -> None:
    rows = {(stage, cond) for stage, rules in STAGE_RULES.items() for cond, _, _ in rules}
    assert rows == set(STAGE_SCENARIOS)


@pytest.mark.parametrize("key", list(STAGE_SCENARIOS), ids=lambda k: f"{k[0].name}-{k[1].name}")
def test_every_stage_transition_happens_as_its_row_says(key: tuple[Stage, Cond]) -> None:
    stage, cond = key
    make, outcome = STAGE_SCENARIOS[key]
    d = make()
    assert d.plan.stage is stage
    first = next(c for c, _, _ in STAGE_RULES[stage] if d.plan.holds(c, d.now))
    assert first is cond
    target = next(s for c, s, _ in STAGE_RULES[stage] if c is cond)
    decision = d.decide()
    # One decide may go on through the next stages: it never stops before the target.
    order = [Stage.ACTIVE, Stage.CLEANING, Stage.FINALIZING, Stage.DONE]
    assert order.index(decision.stage) >= order.index(target)
    assert d.plan.outcome is outcome


# -- behaviours --------------------------------------------------------------------------------

def test_order_constraints_run_processes_in_order_and_the_rest_at_once() -> None:
    d = Driver(task(proc("c"), proc("b"), proc("a"), proc("free"), orders=(("a", "b", "c"),)))
    assert d.decide().start == ("a", "free")
    assert d.decide().start == ()
    d.exit("free", Exit.SUCCESS)
    assert d.decide().start == ()
    d.exit("a", Exit.SUCCESS)
    assert d.decide().start == ("b",)
    d.exit("b", Exit.SUCCESS)
    assert d.decide().start == ("c",)
    d.exit("c", Exit.SUCCESS)
    assert d.decide().outcome is Outcome.SUCCEEDED and d.plan.stage is Stage.DONE


def test_a_failed_process_is_retried_until_max_failures_then_fails_the_task() -> None:
    d = Driver(task(proc("flaky", max_failures=3)))
    for attempt in (1, 2):
        assert d.decide().start == ("flaky",)
        step = d.exit("flaky", Exit.FAILURE)
        assert (step.state, step.failures) == (Proc.PENDING, attempt)
    assert d.decide().start == ("flaky",)
    assert d.exit("flaky", Exit.FAILURE).state is Proc.FAILED
    final = d.decide()
    assert (final.stage, final.outcome) == (Stage.DONE, Outcome.FAILED)
    assert d.plan.status("flaky").runs == 3 and "flaky" in d.plan.reason


def test_max_failures_zero_retries_forever() -> None:
    d = Driver(task(proc("forever", max_failures=0)))
    for _ in range(500):  # "forever", bounded here
        assert d.decide().start == ("forever",)
        assert d.exit("forever", Exit.FAILURE).state is Proc.PENDING
    assert d.decide().start == ("forever",)
    d.exit("forever", Exit.SUCCESS)
    assert d.decide().outcome is Outcome.SUCCEEDED
    assert d.plan.status("forever").failures == 500


def test_min_duration_spaces_the_runs_of_a_process() -> None:
    d = Driver(task(proc("p", max_failures=0, min_duration=5.0)), now=0.0)
    assert d.decide().start == ("p",)  # the first run does not wait
    step = d.exit("p", Exit.FAILURE, at=2.0)
    assert step.ready_at == 7.0
    early = d.decide(at=6.9)
    assert early.start == () and early.wake_at == 7.0
    assert d.decide(at=7.0).start == ("p",)
    d.exit("p", Exit.SIGNALED, at=20.0)  # lost runs are throttled too
    assert d.decide(at=24.0).start == () and d.decide(at=25.0).start == ("p",)


def test_a_signal_nobody_sent_is_a_loss_not_a_failure() -> None:
    d = Driver(task(proc("p", max_failures=1)))
    for _ in range(3):
        d.decide()
        assert d.exit("p", Exit.SIGNALED).state is Proc.PENDING
    status = d.plan.status("p")
    assert (status.failures, status.losses, status.runs) == (0, 3, 3)


def test_ephemeral_processes_do_not_count_for_the_task() -> None:
    d = Driver(task(proc("main"), proc("logger", ephemeral=True), proc("side", ephemeral=True,
                                                                        max_failures=1),
                    proc("after", ephemeral=True), orders=(("side", "after"),)))
    assert d.decide().start == ("main", "logger", "side")
    # An ephemeral process out of tries is finished, not failed: what waits for it runs.
    assert d.exit("side", Exit.FAILURE).state is Proc.FINISHED
    assert d.decide().start == ("after",)
    d.exit("main", Exit.SUCCESS)
    leaving = d.decide()
    # The task is complete although the ephemeral ones still run: they are stopped.
    assert leaving.stage is Stage.CLEANING and d.plan.outcome is Outcome.SUCCEEDED
    assert leaving.terminate == ("logger", "after")
    d.exit("logger", Exit.SIGNALED)
    d.exit("after", Exit.SUCCESS)
    assert d.state("logger") is d.state("after") is Proc.KILLED
    assert d.decide().stage is Stage.DONE


def test_final_processes_run_after_the_regular_ones() -> None:
    d = Driver(task(proc("z1", final=True), proc("a"), proc("b"), proc("z2", final=True),
                    orders=(("z1", "z2"),)))
    assert d.decide().start == ("a", "b")
    d.exit("a", Exit.SUCCESS)
    assert d.decide().start == ()
    d.exit("b", Exit.FAILURE)
    finalizing = d.decide()
    assert finalizing.stage is Stage.FINALIZING and finalizing.start == ("z1",)
    assert d.plan.outcome is Outcome.FAILED  # decided when the regular processes ended
    d.exit("z1", Exit.SUCCESS)
    assert d.decide().start == ("z2",)
    d.exit("z2", Exit.FAILURE)  # a final process failing does not change the outcome
    done = d.decide()
    assert (done.stage, done.outcome) == (Stage.DONE, Outcome.FAILED)


def test_a_kill_stops_the_regular_processes_then_runs_the_final_ones() -> None:
    d = Driver(task(proc("serve"), proc("later"), proc("save", final=True),
                    orders=(("serve", "later"),), finalization_wait=30.0), now=0.0)
    d.decide()
    d.plan.request_kill(5.0)
    stopping = d.decide(at=5.0)
    assert (stopping.stage, stopping.terminate, stopping.start) == (Stage.CLEANING, ("serve",), ())
    assert stopping.wake_at == 35.0  # the finalization deadline
    d.exit("serve", Exit.SUCCESS, at=6.0)  # even exit 0: it was stopped
    assert d.state("serve") is Proc.KILLED and d.state("later") is Proc.PENDING
    finals = d.decide()
    assert (finals.stage, finals.start) == (Stage.FINALIZING, ("save",))
    d.plan.request_kill(7.0)  # a second kill changes nothing
    d.exit("save", Exit.SUCCESS, at=8.0)
    done = d.decide()
    assert (done.stage, done.outcome, d.plan.reason) == (Stage.DONE, Outcome.KILLED, "the task was killed")


def test_the_finalization_deadline_kills_what_still_runs() -> None:
    d = Driver(task(proc("a"), proc("slow", final=True), finalization_wait=3.0), now=0.0)
    d.decide()
    d.exit("a", Exit.SUCCESS, at=1.0)
    assert d.decide().start == ("slow",)
    assert d.decide(at=3.9).kill == ()
    done = d.decide(at=4.0)
    assert (done.stage, done.kill, done.outcome) == (Stage.DONE, ("slow",), Outcome.SUCCEEDED)
    assert d.exit("slow", Exit.SIGNALED).state is Proc.KILLED


def test_no_finalization_wait_skips_the_final_processes() -> None:
    d = Driver(task(proc("a"), proc("z", final=True), finalization_wait=0.0))
    d.decide()
    d.exit("a", Exit.SUCCESS)
    done = d.decide()
    assert (done.stage, done.start) == (Stage.DONE, ())
    assert d.state("z") is Proc.PENDING


def test_a_kill_while_finalizing_makes_the_task_killed() -> None:
    d = Driver(task(proc("a"), proc("z", final=True), finalization_wait=30.0), now=0.0)
    d.decide()
    d.exit("a", Exit.SUCCESS, at=1.0)
    d.decide()
    d.plan.request_kill(2.0)
    assert d.plan.outcome is Outcome.KILLED and d.plan.deadline == 31.0
    d.exit("z", Exit.SUCCESS, at=3.0)
    assert d.decide().outcome is Outcome.KILLED


def test_task_max_failures_counts_failed_processes_not_runs() -> None:
    # Thermos's documented example: one process fails for good, the other succeeds, and with
    # task max_failures 2 the task succeeds.
    d = Driver(task(proc("failing", max_failures=10), proc("succeeding"), max_failures=2))
    d.decide()
    d.exit("succeeding", Exit.SUCCESS)
    for _ in range(10):
        d.decide()
        d.exit("failing", Exit.FAILURE)
    assert d.state("failing") is Proc.FAILED and d.plan.status("failing").failures == 10
    assert d.decide().outcome is Outcome.SUCCEEDED
    # max_failures 0 on the task: no number of failed processes fails it early.
    e = Driver(task(proc("a"), proc("b"), proc("c"), max_failures=0))
    e.decide()
    e.exit("a", Exit.FAILURE)
    e.exit("b", Exit.FAILURE)
    assert e.decide().stage is Stage.ACTIVE
    e.exit("c", Exit.SUCCESS)
    assert e.decide().outcome is Outcome.SUCCEEDED


def test_max_concurrency_bounds_how_many_run_at_once() -> None:
    d = Driver(task(*(proc(f"m{i}") for i in range(5)), proc("reduce"),
                    orders=tuple((f"m{i}", "reduce") for i in range(5)), max_concurrency=2))
    assert d.decide().start == ("m0", "m1")
    assert d.decide().start == () and d.decide().wake_at is None  # waits for an exit, not a time
    d.exit("m1", Exit.SUCCESS)
    assert d.decide().start == ("m2",)
    d.exit("m0", Exit.FAILURE)  # fails for good: reduce can never run
    assert d.decide().stage is Stage.CLEANING  # task max_failures 1 reached


def test_daemon_processes_run_again_after_success_until_they_fail() -> None:
    d = Driver(task(proc("d", daemon=True, max_failures=2, min_duration=1.0)), now=0.0)
    for i in range(5):
        assert d.decide(at=float(i * 2)).start == ("d",)
        assert d.exit("d", Exit.SUCCESS, at=i * 2 + 0.5).state is Proc.PENDING
    assert d.plan.stage is Stage.ACTIVE and d.plan.status("d").successes == 5
    d.decide(at=20.0)
    d.exit("d", Exit.FAILURE)
    d.decide(at=30.0)
    assert d.exit("d", Exit.FAILURE).state is Proc.FAILED
    assert d.decide().outcome is Outcome.FAILED


def test_wake_at_is_the_earliest_restart() -> None:
    d = Driver(task(proc("a", min_duration=3.0, max_failures=0),
                    proc("b", min_duration=1.0, max_failures=0)), now=0.0)
    d.decide()
    d.exit("a", Exit.FAILURE, at=1.0)
    d.exit("b", Exit.FAILURE, at=1.0)
    assert d.decide().wake_at == 2.0
    assert d.decide(at=2.0).start == ("b",)
    assert d.decide().wake_at == 4.0
