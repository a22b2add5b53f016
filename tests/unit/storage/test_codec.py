"""The storage codec: every model type round-trips; bad data is DataCorruption naming the
entity; the encoding is canonical (one spelling per value)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from peloton.core.errors import DataCorruption
from peloton.core.model.constraints import (
    AndConstraint,
    Condition,
    Label,
    LabelConstraint,
    LabelKind,
    OrConstraint,
)
from peloton.core.model.events import PodEvent
from peloton.core.model.job import JobRuntime, JobSpec
from peloton.core.model.resources import PortRange, Resources
from peloton.core.model.storage_records import TaskConfigSet
from peloton.core.model.task import TaskRuntime, TaskSpec
from peloton.core.states import HealthState, JobState, TaskState
from peloton.storage import codec
from peloton.storage.codec_compile import (
    CHECKED,
    dataclass_decoder,
    dataclass_encoder,
    json_encode,
)
from tests.contract import factories as f

TEXT = st.text(max_size=20)
FLOATS = st.floats(allow_nan=False, allow_infinity=False, width=64)

runtimes = st.builds(
    TaskRuntime, state=st.sampled_from(TaskState), goal_state=st.sampled_from(TaskState),
    run_id=st.integers(0, 2**40), host=TEXT, ports=st.lists(
        st.tuples(TEXT, st.integers(1, 65535)), max_size=3).map(tuple),
    exit_code=st.none() | st.integers(-255, 255), healthy=st.sampled_from(HealthState),
    update_time=FLOATS, revision=st.integers(0, 2**62), message=TEXT)

leaves = st.builds(LabelConstraint, st.sampled_from([LabelKind.TASK, LabelKind.HOST]),
                   st.sampled_from(Condition), st.builds(Label, TEXT, TEXT), st.integers(0, 10)) | \
    st.builds(LabelConstraint, st.just(LabelKind.DOMAIN), st.just(Condition.LESS_THAN),
              st.builds(Label, TEXT, TEXT), st.integers(0, 10), domain=TEXT.filter(bool))
constraints = st.recursive(
    leaves, lambda kids: st.builds(AndConstraint, st.lists(kids, max_size=3).map(tuple))
    | st.builds(OrConstraint, st.lists(kids, max_size=3).map(tuple)), max_leaves=6)


@given(runtimes)
def test_task_runtime_round_trips(rt: TaskRuntime) -> None:
    assert codec.from_json(TaskRuntime, codec.to_json(rt), "x") == rt


@given(constraints, st.binary(max_size=16))
def test_constraint_trees_and_bytes_round_trip(c: LabelConstraint, data: bytes) -> None:
    spec = TaskSpec(constraint=c, executor_data=data)
    assert codec.from_json(TaskSpec, codec.to_json(spec), "x") == spec


@given(st.dictionaries(st.sampled_from(TaskState), st.integers(0, 10**6)))
def test_enum_keyed_mappings_round_trip(stats: dict[TaskState, int]) -> None:
    rt = JobRuntime(task_stats=stats)
    assert codec.from_json(JobRuntime, codec.to_json(rt), "x") == rt


def test_full_job_spec_round_trips_and_encodes_as_documented() -> None:
    spec = f.job_spec(labels=(Label("a", "b"),))
    data = json.loads(codec.to_json(spec))
    assert data["type"] == "BATCH"  # Enum by value
    assert data["document"] == "CAE="  # bytes as base64
    assert list(data["instance_tasks"]) == ["1"]  # int keys as strings
    assert data["default_task"]["constraint"]["_t"] == "AndConstraint"
    assert data["labels"] == [{"key": "a", "value": "b"}]  # tuples as arrays
    assert codec.from_json(JobSpec, codec.to_json(spec), "x") == spec


def test_encoding_is_canonical() -> None:
    # an int given for a float field, and a mapping built in another order, spell the same
    a = JobRuntime(creation_time=5, task_stats={TaskState.RUNNING: 1, TaskState.PENDING: 2})
    b = JobRuntime(creation_time=5.0, task_stats={TaskState.PENDING: 2, TaskState.RUNNING: 1})
    assert codec.to_json(a) == codec.to_json(b)


def test_resources_are_stored_as_the_same_four_floats() -> None:
    # Resources holds fixed-point integers but keeps its stored shape: the floats of the
    # user's units, under the field names it had when it held floats.
    spec = TaskSpec(resources=Resources(cpu=0.1, mem_mb=0.1, disk_mb=10, gpu=0.5))
    data = json.loads(codec.to_json(spec))
    assert data["resources"] == {"cpu": 0.1, "mem_mb": 0.1, "disk_mb": 10.0, "gpu": 0.5}
    # A row written before the change (exactly this spelling) reads back as the same value.
    old = '{"resources": {"cpu": 0.3, "mem_mb": 128.0, "disk_mb": 0.0, "gpu": 0.0}}'
    assert codec.from_json(TaskSpec, old, "x").resources == Resources(cpu=0.3, mem_mb=128)
    assert codec.from_json(TaskSpec, '{"resources": {"cpu": 2}}', "x").resources.cpu == 2.0
    with pytest.raises(DataCorruption, match="Resources"):
        codec.from_json(TaskSpec, '{"resources": {"cpu": "two"}}', "x")


@given(st.floats(0, 1e9, allow_nan=False))
def test_stored_resource_floats_read_back_the_same(x: float) -> None:
    once = codec.from_json(TaskSpec, codec.to_json(TaskSpec(resources=Resources(cpu=x, mem_mb=x))),
                           "x")
    again = codec.from_json(TaskSpec, codec.to_json(once), "x")
    assert codec.to_json(once) == codec.to_json(again)
    assert once.resources == again.resources
    assert abs(once.resources.cpu - x) <= 0.0005 * (1 + 1e-9)   # thousandths, like Mesos


def test_unknown_keys_are_ignored_and_missing_optional_fields_default() -> None:
    rt = codec.from_json(TaskRuntime, '{"state": "RUNNING", "added_by_a_newer_release": 1}',
                         "x")
    assert rt == TaskRuntime(state=TaskState.RUNNING)


@pytest.mark.parametrize(("cls", "text", "why"), [
    (TaskRuntime, "{not json", "expected a string key"),
    (TaskRuntime, '{"state": "EXPLODED"}', "'EXPLODED' is not a TaskState"),
    (TaskRuntime, '{"run_id": "7"}', "TaskRuntime.run_id: expected int, got str"),
    (TaskRuntime, '{"run_id": true}', "expected int, got bool"),
    (TaskRuntime, "[]", "expected an object"),
    (JobSpec, '{"name": "x"}', "missing field 'type'"),
    (TaskSpec, '{"executor_data": "!!"}', "bad base64"),
    (TaskSpec, '{"constraint": {"_t": "Nope"}}', "tagged with '_t'"),
    (JobRuntime, '{"task_stats": {"BOGUS": 1}}', "not a TaskState"),
    (PortRange, '{"begin": 9, "end": 2}', "invalid port range"),
])
def test_bad_data_is_data_corruption_naming_the_entity(cls: type, text: str, why: str) -> None:
    with pytest.raises(DataCorruption) as err:
        codec.from_json(cls, text, "task runtime of task j-3")
    assert str(err.value).startswith("task runtime of task j-3 is corrupt: ")
    assert why in str(err.value)


def test_empty_blob_is_corruption() -> None:
    with pytest.raises(DataCorruption, match="job runtime of job j is corrupt: the stored"):
        codec.from_json(JobRuntime, None, "job runtime of job j")


def test_records_with_optional_members_round_trip() -> None:
    tcs = TaskConfigSet("j", 2, None, {3: f.task_spec()})
    assert codec.from_json(TaskConfigSet, codec.to_json(tcs), "x") == tcs
    state = codec.from_json(JobRuntime, codec.to_json(JobRuntime(state=JobState.KILLED)), "x")
    assert state.state is JobState.KILLED


def test_unsupported_types_are_refused_when_compiled() -> None:
    @dataclass(frozen=True)
    class Odd:
        value: int | str

    with pytest.raises(TypeError, match="unsupported union"):
        codec.to_json(Odd(1))
    with pytest.raises(TypeError, match="unsupported union"):  # not cached half-built
        codec.to_json(Odd(1))


def _codec_text(obj: object) -> str:
    """What the codec's generic encoder writes (dict first, then JSON)."""
    return json_encode(dataclass_encoder(type(obj))(obj))


@given(runtimes, st.sampled_from([0, 7, -3]), st.sampled_from(["start_time", "update_time"]))
def test_orjson_fast_path_writes_the_codecs_text(rt: TaskRuntime, whole: int, name: str) -> None:
    # orjson serializes flat dataclasses itself; the text must be the codec's, including
    # for an int stored in a float field (the codec writes 7.0, orjson alone would write 7).
    assert codec.to_json(rt) == _codec_text(rt)
    with_int = codec.replace_field(rt, name, whole)
    assert codec.to_json(with_int) == _codec_text(with_int)
    assert json.loads(codec.to_json(with_int))[name] == float(whole)
    event = PodEvent(job_id="j", instance=rt.run_id % 7, run_id=rt.run_id, state=rt.state,
                     goal_state=rt.goal_state, time=rt.update_time, host=rt.host,
                     message=rt.message, healthy=rt.healthy)
    assert codec.to_json(event) == _codec_text(event)


#: Values put in place of a field (or the field left out) to try the generated decoders.
ODD = [None, 0, 1, -1, True, False, 1.5, 2**70, "", "x", "RUNNING", "DISABLED", [], [["a", 1]],
       {}, {"_t": "Nope"}, {"cpu": 1}]
LEFT_OUT = object()


@pytest.mark.parametrize("cls", [TaskRuntime, JobRuntime, TaskSpec, JobSpec, PodEvent])
@given(data=st.data())
def test_generated_decoders_accept_and_refuse_what_the_checked_ones_do(
        cls: type, data: st.DataObject) -> None:
    # The generated decoder takes the fast path only for data that fits and hands
    # anything else to the field-by-field one, so both give the same value or the same
    # error, whatever one field holds.
    base = codec.encode({TaskRuntime: f.task_runtime(), JobRuntime: f.job_runtime(),
                         TaskSpec: f.task_spec("job"), JobSpec: f.job_spec(),
                         PodEvent: f.pod_event("job", 1, 2, 3.0)}[cls])
    name = data.draw(st.sampled_from(sorted(base)))
    value = data.draw(st.sampled_from([LEFT_OUT, *ODD]))
    doc = {k: v for k, v in base.items() if k != name}
    if value is not LEFT_OUT:
        doc[name] = value

    def outcome(decode: Any) -> object:
        try:
            return decode(dict(doc))
        except Exception as exc:
            return (type(exc), str(exc))

    assert outcome(dataclass_decoder(cls)) == outcome(CHECKED[cls])
