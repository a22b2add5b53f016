"""A run no host was asked to start cannot be LOST (a reconciliation's "no host knows this
run" about a PENDING or placed run is dropped); a launched run can."""

from __future__ import annotations

import dataclasses

import pytest

from peloton.core.lifecycle.task_transitions import NOT_LAUNCHED, check_runtime_write
from peloton.core.model.task import TaskRuntime
from peloton.core.states import TaskState

S = TaskState


@pytest.mark.parametrize("state", sorted(NOT_LAUNCHED))
def test_a_run_never_launched_is_not_lost(state: TaskState) -> None:
    current = TaskRuntime(state=state, goal_state=S.RUNNING, run_id=1, desired_run_id=1)
    why = check_runtime_write(current, dataclasses.replace(current, state=S.LOST))
    assert why is not None and "never launched" in why


@pytest.mark.parametrize("state", [S.LAUNCHED, S.STARTING, S.RUNNING, S.KILLING])
def test_a_launched_run_the_host_does_not_know_is_lost(state: TaskState) -> None:
    current = TaskRuntime(state=state, goal_state=S.RUNNING, run_id=1, desired_run_id=1)
    assert check_runtime_write(current, dataclasses.replace(current, state=S.LOST)) is None


def test_never_launched_is_every_state_before_the_job_manager_writes_launched() -> None:
    assert {S.INITIALIZED, S.PENDING, S.READY, S.PLACING, S.RESERVED, S.PLACED} == NOT_LAUNCHED
