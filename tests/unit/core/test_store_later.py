"""Which host reports may wait in the job manager's cache (core/lifecycle/store_later.py)."""

from __future__ import annotations

import dataclasses

import pytest

from peloton.core.lifecycle.store_later import KEPT_FROM, may_keep
from peloton.core.model.task import TaskRuntime
from peloton.core.states import TaskState

S = TaskState


def test_the_table_names_every_state() -> None:
    assert set(KEPT_FROM) == set(TaskState)


@pytest.mark.parametrize("before", list(TaskState))
@pytest.mark.parametrize("after", list(TaskState))
def test_only_a_starting_over_launched_may_wait(before: TaskState, after: TaskState) -> None:
    rt = TaskRuntime(state=before, goal_state=S.RUNNING, run_id=3, revision=7)
    new = dataclasses.replace(rt, state=after, host="host-1")
    assert may_keep(rt, new) is (before is S.LAUNCHED and after is S.STARTING)


def test_a_change_of_run_or_goal_is_never_kept() -> None:
    rt = TaskRuntime(state=S.LAUNCHED, goal_state=S.RUNNING, run_id=3, revision=7)
    assert may_keep(rt, dataclasses.replace(rt, state=S.STARTING))
    assert not may_keep(rt, dataclasses.replace(rt, state=S.STARTING, run_id=4))
    assert not may_keep(rt, dataclasses.replace(rt, state=S.STARTING, goal_state=S.KILLED))
