"""The trace's JSON-lines format: strict reading with file:line: field errors, canonical writing."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from peloton.core.model.constraints import AndConstraint, Condition, Label, LabelConstraint, LabelKind
from peloton.core.model.resources import Resources
from peloton.core.states import JobType
from peloton.simulation.errors import InputError
from peloton.simulation.trace import Trace, TraceHeader, TraceJob
from peloton.simulation.trace_io import dump_trace, load_trace, read_trace

HEADER = '{"format": "peloton-sim-trace", "version": 1, "name": "t"}'
JOB = {"job": "j1", "submit": 5, "pool": "/batch", "instances": 2,
       "resources": {"cpu": 1, "mem_mb": 512}, "duration": 60}


def lines(*jobs: dict[str, object]) -> list[str]:
    return [HEADER, *(json.dumps(j) for j in jobs)]


def test_reads_a_job_with_every_field() -> None:
    job = {**JOB, "durations": [10, 20.5], "priority": 7, "preemptible": False, "one_per_host": True,
           "constraint": {"and": [{"kind": "host", "key": "zone", "value": "a"},
                                  {"kind": "TASK", "key": "app", "value": "x",
                                   "condition": "LESS_THAN", "requirement": 2}]}}
    trace = read_trace(lines(job), "t.jsonl")
    assert trace.header == TraceHeader(name="t")
    (parsed,) = trace.jobs
    assert parsed == TraceJob(
        job="j1", submit=5.0, pool="/batch", instances=2, resources=Resources(cpu=1, mem_mb=512),
        duration=60.0, durations=(10.0, 20.5), priority=7, preemptible=False, one_per_host=True,
        constraint=AndConstraint((
            LabelConstraint(LabelKind.HOST, Condition.EQUAL, Label("zone", "a"), 1),
            LabelConstraint(LabelKind.TASK, Condition.LESS_THAN, Label("app", "x"), 2))))
    assert parsed.duration_of(1) == 20.5


def test_a_service_runs_without_duration() -> None:
    job = {k: v for k, v in JOB.items() if k != "duration"} | {"type": "SERVICE"}
    (parsed,) = read_trace(lines(job)).jobs
    assert parsed.type is JobType.SERVICE and parsed.duration_of(0) is None


@pytest.mark.parametrize(("change", "line_field", "words"), [
    ({"resources": {"cpu": -1}}, "resources.cpu", "finite number >= 0"),
    ({"resources": {"cpu": 0}}, "resources", "ask for some"),
    ({"resources": {"cores": 1}}, "resources.cores", "unknown key"),
    ({"instances": True}, "instances", "expected an integer, got True"),
    ({"instances": 2.0}, "instances", "expected an integer, got 2.0"),
    ({"instances": 0}, "instances", "between 1 and"),
    ({"submit": "5"}, "submit", "expected a number, got '5'"),
    ({"pool": "batch"}, "pool", "absolute path"),
    ({"job": "has space"}, "job", "job id"),
    ({"duration": 0}, "duration", "> 0"),
    ({"duration": None}, "duration", "needs a duration"),
    ({"durations": [1]}, "durations", "1 entries for 2 instances"),
    ({"type": "DAEMON"}, "type", "BATCH or SERVICE"),
    ({"type": "SERVICE"}, "duration", "give no duration"),
    ({"priority": -1}, "priority", "between 0 and"),
    ({"preemptible": "yes"}, "preemptible", "true or false"),
    ({"constraint": {"kind": "rack", "key": "r"}}, "constraint.kind", "HOST or TASK"),
    ({"constraint": {"kind": "domain", "key": "r"}}, "constraint.kind", "HOST or TASK"),
    ({"constraint": {"or": []}}, "constraint.or", "non-empty"),
    ({"colour": "red"}, "colour", "unknown key 'colour'"),
])
def test_bad_fields_are_named_with_file_and_line(change: dict[str, object], line_field: str,
                                                 words: str) -> None:
    job = {**JOB, **change}
    job = {k: v for k, v in job.items() if v is not None}
    with pytest.raises(InputError) as err:
        read_trace(lines({**JOB, "job": "ok"}, job), "t.jsonl")
    assert str(err.value).startswith(f"t.jsonl:3: {line_field}: ")
    assert words in str(err.value)
    assert err.value.line == 3 and err.value.field == line_field


def test_ids_must_be_unique_and_jobs_in_submit_order() -> None:
    with pytest.raises(InputError, match=r"t.jsonl:3: job: job id 'j1' already used on line 2"):
        read_trace(lines(JOB, JOB), "t.jsonl")
    with pytest.raises(InputError, match=r"t.jsonl:3: submit: submit 1 is before the previous job's 5"):
        read_trace(lines(JOB, {**JOB, "job": "j2", "submit": 1}), "t.jsonl")


@pytest.mark.parametrize(("header", "message"), [
    ('{"format": "other", "version": 1}', "1: format: must be 'peloton-sim-trace'"),
    ('{"format": "peloton-sim-trace", "version": 2}', "1: version: trace format version 2 is not"),
    ('{"format": "peloton-sim-trace"}', "1: version: is required"),
    ("[1, 2]", "1: must be a mapping"),
    ("{not json", "1: not valid JSON"),
])
def test_the_header_is_checked_first(header: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        read_trace([header], "t.jsonl")


def test_empty_and_missing_files_are_named(tmp_path: object) -> None:
    with pytest.raises(InputError, match="empty trace"):
        read_trace(["", "  "], "t.jsonl")
    with pytest.raises(InputError, match=r"nope\.jsonl: cannot read"):
        load_trace("/nonexistent/nope.jsonl")


def test_nan_is_refused() -> None:
    with pytest.raises(InputError, match=r"t\.jsonl:2: not valid JSON: NaN"):
        read_trace([HEADER, '{"job": "a", "submit": NaN}'], "t.jsonl")


def test_writing_is_canonical_and_leaves_defaults_out() -> None:
    trace = read_trace(lines({**JOB, "priority": 0, "preemptible": True, "type": "BATCH"}))
    assert dump_trace(trace) == (
        '{"format": "peloton-sim-trace", "version": 1, "name": "t"}\n'
        '{"job": "j1", "submit": 5, "pool": "/batch", "instances": 2, '
        '"resources": {"cpu": 1, "mem_mb": 512}, "duration": 60}\n')


_names = st.from_regex(r"[a-z][a-z0-9-]{0,8}", fullmatch=True)
_amount = st.floats(min_value=0, max_value=1e6, allow_nan=False, allow_infinity=False)
_leaf = st.builds(LabelConstraint, st.sampled_from((LabelKind.HOST, LabelKind.TASK)),
                  st.sampled_from(Condition),
                  st.builds(Label, _names, _names), st.integers(0, 5))


@st.composite
def _jobs(draw: st.DrawFn) -> list[TraceJob]:
    count = draw(st.integers(0, 5))
    submits = sorted(draw(st.lists(st.floats(0, 1e7, allow_nan=False), min_size=count, max_size=count)))
    out = []
    for i, submit in enumerate(submits):
        instances = draw(st.integers(1, 4))
        service = draw(st.booleans())
        per_instance = not service and draw(st.booleans())
        durations = tuple(draw(st.lists(st.floats(0.001, 1e6), min_size=instances, max_size=instances))
                          ) if per_instance else ()
        out.append(TraceJob(
            job=f"j{i}-{draw(_names)}", submit=submit, pool="/" + draw(_names), instances=instances,
            resources=Resources(cpu=draw(_amount) + 0.5, mem_mb=draw(_amount), gpu=draw(_amount)),
            duration=None if service or per_instance else draw(st.floats(0.001, 1e6)),
            durations=durations, priority=draw(st.integers(0, 2**32 - 1)),
            preemptible=draw(st.booleans()), type=JobType.SERVICE if service else JobType.BATCH,
            constraint=draw(st.none() | _leaf | st.builds(lambda c: AndConstraint(tuple(c)),
                                                            st.lists(_leaf, min_size=1, max_size=3))),
            one_per_host=draw(st.booleans())))
    return out


@given(_jobs(), st.text(max_size=10), st.floats(0, 2e9, allow_nan=False))
def test_write_then_read_gives_the_same_trace(jobs: list[TraceJob], name: str, start: float) -> None:
    trace = Trace(TraceHeader(name=name, start=start, source="hypothesis"), tuple(jobs))
    text = dump_trace(trace)
    assert read_trace(text.splitlines()) == trace
    assert dump_trace(read_trace(text.splitlines())) == text


def test_unicode_line_breaks_in_names_do_not_split_lines() -> None:
    trace = Trace(TraceHeader(name="a\x85b\u2028c\u00e9"), ())
    text = dump_trace(trace)
    assert text.isascii() and len(text.splitlines()) == 1
    assert read_trace(text.splitlines()) == trace
