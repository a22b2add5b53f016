"""Job state derived from task counts."""

from __future__ import annotations

import pytest

from peloton.core.lifecycle.job_state import derive_job_state
from peloton.core.states import JobState as J
from peloton.core.states import JobType
from peloton.core.states import TaskState as S


def _derive(counts: dict[S, int], n: int = 4, *, kind: JobType = JobType.BATCH,
            current: J = J.RUNNING, goal: J = J.SUCCEEDED, **kw: object) -> J:
    return derive_job_state(counts, instance_count=n, job_type=kind, current=current,
                            goal=goal, **kw)  # type: ignore[arg-type]


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
    svc = {"kind": JobType.SERVICE, "partially_created": True}
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
