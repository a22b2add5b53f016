"""Job state derived from task counts."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest

from peloton.core.lifecycle.job_state import derive_job_state
from peloton.core.states import JobState as J
from peloton.core.states import JobType
from peloton.core.states import TaskState as S


def _derive(counts: dict[S, int], n: int = 4, *, kind: JobType = JobType.BATCH,
            current: J = J.RUNNING, goal: J = J.SUCCEEDED, partially_created: bool = False,
            controller_state: S | None = None,
            rerunning: Callable[[], Mapping[S, int]] | None = None) -> J:
    return derive_job_state(counts, instance_count=n, job_type=kind, current=current,
                            goal=goal, partially_created=partially_created,
                            controller_state=controller_state, rerunning=rerunning)


@pytest.mark.parametrize(("counts", "expected"), [
    ({S.SUCCEEDED: 4}, J.SUCCEEDED),
    ({S.SUCCEEDED: 3, S.FAILED: 1}, J.FAILED),
    ({S.SUCCEEDED: 2, S.LOST: 2}, J.FAILED),
    ({S.SUCCEEDED: 2, S.KILLED: 1, S.FAILED: 1}, J.KILLED),
    ({S.RUNNING: 1, S.PENDING: 3}, J.RUNNING),
    ({S.PENDING: 4}, J.PENDING),
    ({S.KILLED: 1, S.RUNNING: 3}, J.RUNNING),
])
def test_first_match_rules(counts: dict[S, int], expected: J) -> None:
    assert _derive(counts) is expected


def test_killing_sticks_until_terminal() -> None:
    assert _derive({S.RUNNING: 4}, current=J.KILLING) is J.KILLING
    assert _derive({S.KILLED: 4}, current=J.KILLING) is J.KILLED


def test_more_tasks_than_instances() -> None:
    assert _derive({S.SUCCEEDED: 5}) is J.PENDING
    assert _derive({S.SUCCEEDED: 5}, kind=JobType.SERVICE, goal=J.RUNNING) is J.PENDING
    assert _derive({S.SUCCEEDED: 5}, kind=JobType.SERVICE, goal=J.KILLED) is J.SUCCEEDED


def test_partially_created() -> None:
    assert _derive({S.RUNNING: 2}, partially_created=True) is J.INITIALIZED
    svc: dict[str, Any] = {"kind": JobType.SERVICE, "partially_created": True}
    assert _derive({S.RUNNING: 2}, goal=J.RUNNING, **svc) is J.PENDING
    assert _derive({S.KILLED: 2}, goal=J.KILLED, **svc) is J.KILLED
    assert _derive({}, goal=J.KILLED, **svc) is J.KILLED
    assert _derive({S.FAILED: 1, S.SUCCEEDED: 1}, goal=J.KILLED, **svc) is J.FAILED


def test_controller_task_decides_terminal_state() -> None:
    done = {S.SUCCEEDED: 3, S.FAILED: 1}
    assert _derive(done, controller_state=S.SUCCEEDED) is J.SUCCEEDED
    assert _derive({S.SUCCEEDED: 4}, controller_state=S.LOST) is J.FAILED
    assert _derive({S.SUCCEEDED: 4}, controller_state=S.KILLED) is J.KILLED
    assert _derive({S.RUNNING: 4}, controller_state=S.FAILED) is J.RUNNING


def _never() -> dict[S, int]:
    raise AssertionError("asked which tasks run again when the counts cannot end the job")


@pytest.mark.parametrize(("counts", "rerunning", "expected"), [
    ({S.SUCCEEDED: 3, S.LOST: 1}, {S.LOST: 1}, J.PENDING),
    ({S.SUCCEEDED: 3, S.FAILED: 1}, {S.FAILED: 1}, J.PENDING),
    ({S.SUCCEEDED: 2, S.KILLED: 1, S.FAILED: 1}, {S.KILLED: 1}, J.PENDING),
    ({S.SUCCEEDED: 2, S.KILLED: 1, S.FAILED: 1}, {S.FAILED: 1}, J.PENDING),
    ({S.SUCCEEDED: 2, S.FAILED: 2}, {S.FAILED: 1}, J.PENDING),
    ({S.SUCCEEDED: 3, S.LOST: 1}, {}, J.FAILED),
    ({S.SUCCEEDED: 4}, {}, J.SUCCEEDED),
    # A restarted task that had succeeded is not done either.
    ({S.SUCCEEDED: 4}, {S.SUCCEEDED: 1}, J.PENDING),
])
def test_a_batch_task_that_will_run_again_is_not_done(
        counts: dict[S, int], rerunning: dict[S, int], expected: J) -> None:
    assert _derive(counts, current=J.PENDING, rerunning=lambda: rerunning) is expected
    running = {**counts, S.SUCCEEDED: counts[S.SUCCEEDED] - 1, S.RUNNING: 1}
    if expected is J.PENDING:  # with another task still running, the job runs
        assert _derive(running, current=J.PENDING, rerunning=lambda: rerunning) is J.RUNNING


@pytest.mark.parametrize("counts", [{S.RUNNING: 1, S.LOST: 3}, {S.PENDING: 4},
                                    {S.FAILED: 2, S.PENDING: 2}, {S.RUNNING: 4}])
def test_which_tasks_run_again_is_asked_only_when_the_counts_would_end_the_job(
        counts: dict[S, int]) -> None:
    assert not _derive(counts, rerunning=_never).terminal
    assert _derive({S.SUCCEEDED: 4}, kind=JobType.SERVICE, goal=J.RUNNING,
                   rerunning=_never) is J.SUCCEEDED  # services: the last ends, as Peloton
    assert _derive({S.RUNNING: 2}, partially_created=True, rerunning=_never) is J.INITIALIZED


def test_a_controller_task_that_will_run_again_does_not_end_its_job() -> None:
    done = {S.SUCCEEDED: 3, S.LOST: 1}
    assert _derive(done, controller_state=S.LOST) is J.FAILED
    assert _derive(done, controller_state=S.LOST, rerunning=lambda: {S.LOST: 1}) is J.PENDING
