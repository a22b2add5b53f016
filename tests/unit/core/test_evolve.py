"""`evolve` is `dataclasses.replace` for the values on the hot path: same results, same errors."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from peloton.core.errors import InvalidArgument
from peloton.core.model.events import PodEvent
from peloton.core.model.evolve import constructor, evolve, evolver, replacer
from peloton.core.model.resources import PortRange
from peloton.core.model.task import TaskRuntime
from peloton.core.states import HealthState, TaskState

runtimes = st.builds(
    TaskRuntime, state=st.sampled_from(TaskState), goal_state=st.sampled_from(TaskState),
    run_id=st.integers(1, 10**6), host=st.text(max_size=8), ports=st.tuples(
        st.tuples(st.text(max_size=4), st.integers(0, 65535))),
    exit_code=st.none() | st.integers(-255, 255), healthy=st.sampled_from(HealthState),
    update_time=st.floats(0, 2e9), revision=st.integers(0, 10**9))
changes = st.fixed_dictionaries({}, optional={
    "state": st.sampled_from(TaskState), "host": st.text(max_size=8),
    "exit_code": st.none() | st.integers(-255, 255), "revision": st.integers(0, 10**9),
    "message": st.text(max_size=20)})


@given(runtimes, changes)
def test_evolve_equals_replace(rt: TaskRuntime, kw: dict[str, object]) -> None:
    new = evolve(rt, **kw)
    assert new == dataclasses.replace(rt, **kw)  # type: ignore[arg-type]
    assert type(new) is TaskRuntime and new is not rt
    assert hash(new) == hash(dataclasses.replace(rt, **kw))  # type: ignore[arg-type]


def test_the_copy_is_still_frozen_and_the_original_unchanged() -> None:
    rt = TaskRuntime(host="a")
    new = evolve(rt, host="b")
    with pytest.raises(dataclasses.FrozenInstanceError):
        new.host = "c"  # type: ignore[misc]
    assert rt.host == "a" and new.host == "b"


def test_unknown_field_is_a_type_error_like_replace() -> None:
    with pytest.raises(TypeError):
        evolve(TaskRuntime(), colour="red")
    with pytest.raises(TypeError):
        evolve(object())


def test_a_class_with_post_init_still_validates() -> None:
    # PortRange checks its bounds in __post_init__: evolve must not skip that.
    ports = PortRange(10, 20)
    with pytest.raises(InvalidArgument):
        evolve(ports, begin=30)
    assert evolve(ports, end=30) == PortRange(10, 30)


def test_other_hot_values() -> None:
    ev = PodEvent(job_id="j", instance=1, run_id=2, state=TaskState.RUNNING,
                  goal_state=TaskState.SUCCEEDED, time=1.0)
    assert evolve(ev, run_id=3) == dataclasses.replace(ev, run_id=3)


@given(runtimes)
def test_constructor_builds_what_the_class_builds(rt: TaskRuntime) -> None:
    new_event = constructor(PodEvent)
    fields = {"job_id": "j", "instance": 3, "run_id": rt.run_id, "state": rt.state,
              "goal_state": rt.goal_state, "time": rt.update_time, "host": rt.host}
    built = new_event(**fields)
    assert built == PodEvent(**fields) and type(built) is PodEvent  # type: ignore[arg-type]
    assert new_event("j", 1, 2, rt.state, rt.goal_state, 1.0) == PodEvent(
        "j", 1, 2, rt.state, rt.goal_state, 1.0)  # positional, defaults for the rest
    with pytest.raises(TypeError):
        new_event(job_id="j")  # required fields stay required
    assert constructor(PortRange) is PortRange  # __post_init__: its own constructor


@given(runtimes, st.integers(0, 10**9))
def test_replacer_equals_replace(rt: TaskRuntime, revision: int) -> None:
    new = replacer(TaskRuntime, "revision")(rt, revision)
    assert new == dataclasses.replace(rt, revision=revision) and new is not rt
    assert type(new) is TaskRuntime and new.revision == revision
    assert hash(new) == hash(dataclasses.replace(rt, revision=revision))
    with pytest.raises(dataclasses.FrozenInstanceError):
        new.host = "c"  # type: ignore[misc]


def test_replacer_and_evolver_errors_and_validation() -> None:
    with pytest.raises(TypeError):
        replacer(TaskRuntime, "colour")
    with pytest.raises(InvalidArgument):  # __post_init__ still runs
        replacer(PortRange, "begin")(PortRange(10, 20), 30)
    assert replacer(PortRange, "end")(PortRange(10, 20), 30) == PortRange(10, 30)
    assert evolver(TaskRuntime)(TaskRuntime(host="a"), host="b") == TaskRuntime(host="b")
