"""Decoding many stored rows at once (codec_rows.py) gives what `from_json` of each row
gives: the same values, the same defaults for a missing field, the same DataCorruption
naming the same entity, whatever a field holds."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from peloton.core.errors import DataCorruption
from peloton.core.model.events import PodEvent
from peloton.core.model.job import JobRuntime, JobSpec
from peloton.core.model.resources import PortRange
from peloton.core.model.task import TaskRuntime, TaskSpec
from peloton.core.states import TaskState
from peloton.storage import codec
from peloton.storage.codec_rows import decode_rows
from tests.contract import factories as f
from tests.unit.storage.test_codec import LEFT_OUT, ODD, runtimes


def entity(key: int) -> str:
    return f"task runtime of task j-{key}"


def outcome(decode: Any) -> object:
    try:
        return decode()
    except Exception as exc:
        return (type(exc), str(exc))


@pytest.mark.parametrize("cls", [TaskRuntime, JobRuntime, TaskSpec, JobSpec, PodEvent])
@given(data=st.data())
def test_rows_decode_as_from_json_decodes_each_whatever_a_field_holds(
        cls: type, data: st.DataObject) -> None:
    base = codec.encode({TaskRuntime: f.task_runtime(), JobRuntime: f.job_runtime(),
                         TaskSpec: f.task_spec("job"), JobSpec: f.job_spec(),
                         PodEvent: f.pod_event("job", 1, 2, 3.0)}[cls])
    name = data.draw(st.sampled_from(sorted(base)))
    value = data.draw(st.sampled_from([LEFT_OUT, *ODD]))
    doc = {k: v for k, v in base.items() if k != name}
    if value is not LEFT_OUT:
        doc[name] = value
    text = json.dumps(doc)
    rows = [(1, codec.to_json(codec.decode(cls, base))), (7, text)]

    assert outcome(lambda: decode_rows(cls, rows, entity)) == outcome(
        lambda: {key: codec.from_json(cls, body, entity(key)) for key, body in rows})


@given(st.lists(runtimes, max_size=5))
def test_task_runtimes_round_trip_in_row_order(rts: list[TaskRuntime]) -> None:
    rows = [(i * 3, codec.to_json(rt)) for i, rt in enumerate(rts)]
    decoded = decode_rows(TaskRuntime, rows, entity)
    assert list(decoded) == [key for key, _ in rows]
    assert list(decoded.values()) == rts


@pytest.mark.parametrize(("body", "why"), [
    ("{not json", "expected a string key"),
    (None, "the stored value is empty"),
    ('{"state": "EXPLODED"}', "'EXPLODED' is not a TaskState"),
    ('{"run_id": true}', "expected int, got bool"),
    ("[]", "expected an object"),
])
def test_a_bad_row_is_data_corruption_naming_its_own_entity(body: str | None, why: str) -> None:
    good = codec.to_json(TaskRuntime(state=TaskState.RUNNING))
    with pytest.raises(DataCorruption) as err:
        decode_rows(TaskRuntime, [(0, good), (4, body), (5, good)], entity)
    assert str(err.value).startswith("task runtime of task j-4 is corrupt: ")
    assert why in str(err.value)


def test_an_older_row_missing_fields_takes_their_defaults() -> None:
    old = '{"state": "RUNNING", "run_id": 3, "added_by_a_newer_release": 1}'
    decoded = decode_rows(TaskRuntime, [(2, old), (0, old.encode())], entity)
    assert decoded == {2: TaskRuntime(state=TaskState.RUNNING, run_id=3),
                       0: TaskRuntime(state=TaskState.RUNNING, run_id=3)}


def test_a_class_with_its_own_validation_is_decoded_through_its_constructor() -> None:
    # PortRange checks itself in __post_init__: never built slot by slot.
    assert decode_rows(PortRange, [(0, '{"begin": 2, "end": 9}')], entity) == {
        0: PortRange(2, 9)}
    with pytest.raises(DataCorruption, match=r"j-1 is corrupt: .*invalid port range"):
        decode_rows(PortRange, [(1, '{"begin": 9, "end": 2}')], entity)


def test_values_are_built_whole_with_their_own_field_values() -> None:
    rt = dataclasses.replace(f.task_runtime(), ports=(("http", 8080),), exit_code=3)
    (decoded,) = decode_rows(TaskRuntime, [(0, codec.to_json(rt))], entity).values()
    assert decoded == rt and type(decoded) is TaskRuntime
    assert decoded.ports == (("http", 8080),) and decoded.exit_code == 3


def test_equal_texts_and_zero_times_of_many_rows_are_held_once() -> None:
    # A job manager holds every active task's runtime: equal hosts, agents, messages and
    # reasons, and the unset (zero) times, are one object each, not one per row.
    rt = dataclasses.replace(f.task_runtime(), host="host-7", agent_id="agent-7-S1",
                             message="Command exited with status 0", reason="REASON_X",
                             desired_host="host-7", completion_time=0.0, healthy_time=0.0,
                             start_time=5.0)
    text = codec.to_json(rt)
    decoded = decode_rows(TaskRuntime, [(0, text), (1, text.encode())], entity)
    first, second = decoded[0], decoded[1]
    assert first == second == rt and codec.to_json(second) == text
    for name in ("host", "agent_id", "message", "reason", "desired_host", "completion_time",
                 "healthy_time"):
        assert getattr(first, name) is getattr(second, name), name
    assert first.host is first.desired_host

    # Only a positive zero is shared: -0.0 keeps its sign (and its stored text).
    negative = dataclasses.replace(rt, start_time=-0.0, completion_time=0)
    (back,) = decode_rows(TaskRuntime, [(0, codec.to_json(negative))], entity).values()
    assert codec.to_json(back) == codec.to_json(negative) and str(back.start_time) == "-0.0"
    assert type(back.completion_time) is float
