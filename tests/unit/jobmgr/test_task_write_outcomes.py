"""No silent loss of a task write (peloton/jobmgr/task_writes.py).

The harness's store rejects chosen compare-and-sets (conflicts.py), as another
writer of the same rows would.  A write that keeps losing is reported to its
caller (CONFLICT, with the instances not written), and every caller acts on it:
a kill is still applied, a status update is still stored, and nothing is given up
behind the caller's back.  A scan of the source fails on a caller that drops the
outcome.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from peloton.core.model.task import TaskRuntime
from peloton.core.states import JobState, TaskState
from peloton.jobmgr.aggregate import TASK_ROUNDS
from peloton.jobmgr.task_writes import TaskWriteConflict
from tests.unit.jobmgr.harness import Harness, job_spec

S = TaskState
ROOT = Path(__file__).resolve().parents[3]
#: Callers of the aggregate's task writes: everything but the aggregate itself.
CALLERS = [p for d in ("jobmgr", "simulation") for p in (ROOT / "peloton" / d).rglob("*.py")
           if p.name != "aggregate.py"]
WRITES = frozenset({"write_tasks", "write_task"})


def _bump(rt: TaskRuntime) -> TaskRuntime:
    return dataclasses.replace(rt, failure_count=rt.failure_count + 1)


def running_job(h: Harness, instances: int = 2) -> str:
    jid = h.create(job_spec(instances))
    h.settle(5.0)
    assert h.states(jid) == [S.RUNNING] * instances
    return jid


# -- the outcome -------------------------------------------------------------------------
@pytest.mark.parametrize("losses, status, rounds, stored", [
    (0, "done", 1, True),
    (2, "retried", 3, True),
    (TASK_ROUNDS, "conflict", TASK_ROUNDS, False),
])
def test_a_task_write_says_how_it_ended(h: Harness, losses: int, status: str, rounds: int,
                                        stored: bool) -> None:
    jid = running_job(h)
    before = h.task(jid, 0).failure_count
    h.conflicts.fail(jid, 0, losses)
    outcome = h.job(jid).write_task(0, _bump)
    assert outcome.status.value == status
    assert outcome.rounds == rounds
    assert outcome.unwritten == (frozenset() if stored else {0})
    assert (outcome.get(0) is not None) is stored
    assert h.task(jid, 0).failure_count == before + (1 if stored else 0)
    assert sum(h.conflicts.rejected.values()) == losses


def test_a_conflict_raised_from_an_action_names_what_was_not_written(h: Harness) -> None:
    jid = running_job(h)
    h.conflicts.fail(jid, 1, TASK_ROUNDS)
    outcome = h.job(jid).write_tasks({0: _bump, 1: _bump})
    assert set(outcome.written) == {0} and outcome.unwritten == {1}
    with pytest.raises(TaskWriteConflict) as err:
        outcome.stored()
    assert err.value.unwritten == {1} and err.value.job_id == jid


# -- the kill ----------------------------------------------------------------------------
@pytest.mark.parametrize("losses", [2 * TASK_ROUNDS, 4 * TASK_ROUNDS])
def test_a_kill_under_repeated_conflicts_is_still_applied(h: Harness, losses: int) -> None:
    """2 rounds' worth: retried in place; 4: the job is evaluated again after the engine's
    backoff.  Before, the kill's writes were given up, the run was killed anyway with its
    goal still RUNNING (counted as a failure, then started again), or its KILLED status
    was dropped and the task stayed RUNNING with goal KILLED."""
    jid = running_job(h)
    runs_before = {i: h.task(jid, i).run_id for i in (0, 1)}
    h.conflicts.fail(jid, 0, losses)
    h.jm.jobs.change_goal(jid, JobState.KILLED)
    h.settle(120.0)
    assert h.conflicts.armed(jid, 0) == 0  # every armed conflict was met
    assert h.states(jid) == [S.KILLED, S.KILLED]
    for i in (0, 1):
        rt = h.task(jid, i)
        assert rt.goal_state is S.KILLED
        assert rt.run_id == runs_before[i], "a killed task was started again"
        assert rt.failure_count == 0, "the kill counted as a failure"
    runtime = h.store.get_job_runtime(jid)
    assert runtime.state is JobState.KILLED
    assert runtime.state_version == runtime.desired_state_version


# -- status updates ----------------------------------------------------------------------
def test_a_status_update_under_conflicts_is_not_lost(h: Harness) -> None:
    jid = running_job(h)
    run0, run1 = (h.run_ids(jid)[i] for i in (0, 1))
    h.conflicts.fail(jid, 0, TASK_ROUNDS + 2)  # the first write of it loses every round
    h.hosts.finish(run0, S.FAILED)
    h.hosts.finish(run1, S.FAILED)
    h.jm.events.process_once(0.0)
    # The other task's event is stored; this one's is held, not acknowledged past.
    assert h.task(jid, 1).state is S.FAILED
    assert h.task(jid, 0).state is S.RUNNING
    h.jm.events.process_once(0.0)  # the held event again: stored now
    assert h.conflicts.armed(jid, 0) == 0
    assert h.task(jid, 0).state is S.FAILED
    # Each event was applied once: one FAILED pod event per task.
    for i in (0, 1):
        events = h.store.get_pod_events(jid, i, h.task(jid, i).run_id)
        assert [e.state for e in events].count(S.FAILED) == 1


def test_held_status_events_keep_the_stream_unacknowledged(h: Harness) -> None:
    jid = running_job(h)
    run0 = h.run_ids(jid)[0]
    acked = h.hosts.acked.get("jobmgr", 0)
    h.conflicts.fail(jid, 0, TASK_ROUNDS)
    h.hosts.finish(run0, S.FAILED)
    h.jm.events.process_once(0.0)
    assert h.hosts.acked.get("jobmgr", 0) == acked  # a crash now would deliver it again
    h.jm.events.process_once(0.0)
    assert h.hosts.acked["jobmgr"] == len(h.hosts.events)


# -- no give-up without the caller acting --------------------------------------------------
def test_a_whole_lifecycle_under_conflicts_ends_as_without_them(h: Harness) -> None:
    """Every task write path (queue, launch, status, restart, kill) meets conflicts that
    outlast the aggregate's rounds, three times over; the job still goes where it goes
    without them."""
    def drive(seconds: float) -> None:
        for _ in range(int(seconds // 30)):
            h.settle(30.0)  # held status events are retried on every step

    def arm(*instances: int) -> None:
        for i in instances:
            h.conflicts.fail(jid, i, 3 * TASK_ROUNDS)

    jid = h.create(job_spec(3))
    arm(0, 1, 2)
    drive(300.0)
    assert h.states(jid) == [S.RUNNING] * 3
    arm(0)
    h.hosts.finish(h.run_ids(jid)[0], S.FAILED)  # restarted after its throttle
    drive(300.0)
    assert h.states(jid) == [S.RUNNING] * 3
    assert [h.task(jid, i).run_id for i in range(3)] == [2, 1, 1]
    arm(0, 1, 2)
    h.jm.jobs.change_goal(jid, JobState.KILLED)
    drive(300.0)
    assert h.states(jid) == [S.KILLED] * 3
    assert all(h.conflicts.armed(jid, i) == 0 for i in range(3))
    assert sum(h.conflicts.rejected.values()) == 7 * 3 * TASK_ROUNDS
    assert h.store.get_job_runtime(jid).state is JobState.KILLED


def dropped_outcomes(source: str, filename: str = "<snippet>") -> list[str]:
    """Calls of the aggregate's task writes whose outcome is dropped: a bare statement, or
    bound to `_` (a name bound and never read is ruff's F841)."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if not isinstance(node, ast.stmt):
            continue  # a dropped outcome is a statement
        value = None
        if isinstance(node, ast.Expr):
            value = node.value
        elif isinstance(node, ast.Assign) and all(
                isinstance(t, ast.Name) and t.id == "_" for t in node.targets):
            value = node.value
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and \
                value.func.attr in WRITES:
            found.append(f"{filename}:{node.lineno}: the outcome of {value.func.attr} is dropped")
    return found


def test_no_caller_drops_the_outcome_of_a_task_write() -> None:
    assert len(CALLERS) > 40
    found = [v for p in CALLERS for v in dropped_outcomes(p.read_text(), str(p.relative_to(ROOT)))]
    assert found == [], "\n".join(found)


@pytest.mark.parametrize("snippet, dropped", [
    ("job.write_tasks({0: change})", True),
    ("_ = job.write_task(0, change)", True),
    ("job.write_tasks({0: change}).stored()", False),
    ("outcome = job.write_tasks(changes)\nif outcome.conflict:\n    raise outcome.error()", False),
    ("retry_until_stored(lambda todo: job.write_tasks(c).stored(), todo)", False),
])
def test_the_scan_finds_a_dropped_outcome(snippet: str, dropped: bool) -> None:
    assert bool(dropped_outcomes(snippet)) is dropped
