"""The trace's JSON-lines format: read it strictly, write it canonically.

Line 1 is the header, every further line one job (README.md beside this file has
the field table).  Reading is strict: an unknown key, a value of the wrong JSON
type (a boolean is not a number, 2.0 is not an integer), a rule of
`trace.check_job` broken, a duplicate id or a job out of submit order is an
`InputError` naming the file, the line and the field.  Blank lines are skipped.

Writing is canonical: keys in a fixed order, defaults left out, integral numbers
written as integers, non-ASCII characters escaped (so no Unicode line break can
split a line), and the same trace always gives the same bytes (exporters and
importers rely on it for reproducible files).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from peloton.core.errors import InvalidArgument
from peloton.core.model.constraints import (
    AndConstraint,
    Condition,
    Constraint,
    Label,
    LabelConstraint,
    LabelKind,
    OrConstraint,
)
from peloton.core.model.resources import Resources
from peloton.core.states import JobType
from peloton.simulation.errors import InputError
from peloton.simulation.fields import Fields, kind_of, number
from peloton.simulation.trace import FORMAT, VERSION, Trace, TraceHeader, TraceJob, check_job

_HEADER_KEYS = ("format", "version", "name", "start", "source")
_JOB_KEYS = ("job", "submit", "pool", "instances", "resources", "duration", "durations", "priority",
             "preemptible", "type", "one_per_host", "constraint")
_RESOURCE_KEYS = ("cpu", "mem_mb", "disk_mb", "gpu")
_LEAF_KEYS = ("kind", "key", "value", "condition", "requirement")
#: Deepest constraint tree accepted (Peloton's own trees are two levels).
MAX_CONSTRAINT_DEPTH = 8


# -- constraints ---------------------------------------------------------------------------
def constraint_from_json(data: object, field: str = "constraint", depth: int = 0) -> Constraint:
    """A constraint object: a leaf {kind, key, value, condition, requirement}, or {"and"|"or": [...]}."""
    if depth > MAX_CONSTRAINT_DEPTH:
        raise InvalidArgument(f"nested deeper than {MAX_CONSTRAINT_DEPTH} levels", field=field)
    if isinstance(data, dict) and len(data) == 1 and next(iter(data)) in ("and", "or"):
        op = next(iter(data))
        children = data[op]
        if not isinstance(children, list) or not children:
            raise InvalidArgument("must be a non-empty array of constraints", field=f"{field}.{op}")
        parsed = tuple(constraint_from_json(c, f"{field}.{op}[{i}]", depth + 1)
                       for i, c in enumerate(children))
        return AndConstraint(parsed) if op == "and" else OrConstraint(parsed)
    leaf = Fields(data, field, _LEAF_KEYS)
    kind_text = leaf.string("kind", required=True)
    cond_text = leaf.string("condition", "EQUAL")
    # Traces name host and task labels only; per-domain limits are not part of format v1.
    kind = {"HOST": LabelKind.HOST, "TASK": LabelKind.TASK}.get(kind_text.upper())
    if kind is None:
        raise InvalidArgument(f"must be HOST or TASK, got {kind_text!r}", field=leaf.field("kind"))
    try:
        condition = Condition(cond_text.upper())
    except ValueError:
        raise InvalidArgument(f"must be LESS_THAN, EQUAL or GREATER_THAN, got {cond_text!r}",
                              field=leaf.field("condition")) from None
    key = leaf.string("key", required=True)
    if not key:
        raise InvalidArgument("must not be empty", field=leaf.field("key"))
    requirement = leaf.integer("requirement", 1)
    if requirement < 0:
        raise InvalidArgument(f"must be >= 0, got {requirement}", field=leaf.field("requirement"))
    return LabelConstraint(kind, condition, Label(key, leaf.string("value")), requirement)


def constraint_to_json(constraint: Constraint) -> dict[str, Any]:
    """The inverse of `constraint_from_json` (leaf keys always written, in a fixed order)."""
    if isinstance(constraint, AndConstraint):
        return {"and": [constraint_to_json(c) for c in constraint.children]}
    if isinstance(constraint, OrConstraint):
        return {"or": [constraint_to_json(c) for c in constraint.children]}
    return {"kind": constraint.kind.value, "key": constraint.label.key, "value": constraint.label.value,
            "condition": constraint.condition.value, "requirement": constraint.requirement}


# -- reading -------------------------------------------------------------------------------
def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number JSON allows")


def _parse_line(text: str) -> object:
    return json.loads(text, parse_constant=_reject_constant)


def header_from_json(data: object) -> TraceHeader:
    """The header object (format name and version checked first)."""
    fields = Fields(data, "", _HEADER_KEYS)
    fmt = fields.string("format", required=True)
    if fmt != FORMAT:
        raise InvalidArgument(f"must be {FORMAT!r}, got {fmt!r} (is line 1 the header?)", field="format")
    version = fields.integer("version", required=True)
    if version != VERSION:
        raise InvalidArgument(f"trace format version {version} is not supported (this release reads "
                              f"version {VERSION})", field="version")
    start = fields.number("start")
    if start < 0:
        raise InvalidArgument(f"must be >= 0, got {start:g}", field="start")
    return TraceHeader(version=version, name=fields.string("name"), start=start,
                       source=fields.string("source"))


def job_from_json(data: object) -> TraceJob:
    """One job object, type-checked and checked against `trace.check_job`."""
    fields = Fields(data, "", _JOB_KEYS)
    res = Fields(fields.get("resources", required=True), "resources", _RESOURCE_KEYS)
    resources = Resources(cpu=res.number("cpu"), mem_mb=res.number("mem_mb"),
                          disk_mb=res.number("disk_mb"), gpu=res.number("gpu"))
    type_text = fields.string("type", JobType.BATCH.value)
    try:
        job_type = JobType(type_text.upper())
    except ValueError:
        raise InvalidArgument(f"must be BATCH or SERVICE, got {type_text!r}", field="type") from None
    durations_raw = fields.get("durations")
    durations: tuple[float, ...] = ()
    if durations_raw is not None:
        if not isinstance(durations_raw, list):
            raise InvalidArgument(f"must be an array of numbers, got {kind_of(durations_raw)}",
                                  field="durations")
        durations = tuple(number(v, f"durations[{i}]") for i, v in enumerate(durations_raw))
    job = TraceJob(
        job=fields.string("job", required=True), submit=fields.number("submit", required=True),
        pool=fields.string("pool", required=True), instances=fields.integer("instances", required=True),
        resources=resources,
        duration=fields.number("duration") if fields.has("duration") else None,
        durations=durations, priority=fields.integer("priority"),
        preemptible=fields.boolean("preemptible", True), type=job_type,
        constraint=(constraint_from_json(fields.get("constraint")) if fields.has("constraint")
                    else None),
        one_per_host=fields.boolean("one_per_host", False))
    check_job(job)
    return job


def read_trace(lines: Iterable[str], source: str = "trace") -> Trace:
    """Parse a whole trace; InputError (file, line, field) at the first problem."""
    header: TraceHeader | None = None
    jobs: list[TraceJob] = []
    seen: dict[str, int] = {}
    last_submit = 0.0
    for lineno, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            data = _parse_line(text)
        except ValueError as exc:
            raise InputError(source, f"not valid JSON: {exc}", line=lineno) from None
        try:
            if header is None:
                header = header_from_json(data)
                continue
            job = job_from_json(data)
        except InvalidArgument as exc:
            raise InputError(source, exc.message, line=lineno, field=exc.field) from None
        if job.job in seen:
            raise InputError(source, f"job id {job.job!r} already used on line {seen[job.job]}",
                             line=lineno, field="job")
        if job.submit < last_submit:
            raise InputError(source, f"submit {job.submit:g} is before the previous job's "
                             f"{last_submit:g}; jobs must be in submit order", line=lineno,
                             field="submit")
        seen[job.job] = lineno
        last_submit = job.submit
        jobs.append(job)
    if header is None:
        raise InputError(source, f"empty trace: line 1 must be the header "
                         f'{{"format": "{FORMAT}", "version": {VERSION}}}')
    return Trace(header, tuple(jobs))


def load_trace(path: str | Path) -> Trace:
    """Read the trace file at `path` (UTF-8)."""
    p = Path(path)
    try:
        with p.open(encoding="utf-8") as stream:
            return read_trace(stream, source=str(path))
    except OSError as exc:
        raise InputError(str(path), f"cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise InputError(str(path), f"not UTF-8 text: {exc}") from None


# -- writing -------------------------------------------------------------------------------
def _num(value: float) -> int | float:
    """Integral values as ints (so 60.0 is written 60), others as floats."""
    value = float(value)
    if value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


def header_to_json(header: TraceHeader) -> dict[str, Any]:
    """The header object, defaults left out."""
    out: dict[str, Any] = {"format": FORMAT, "version": header.version}
    if header.name:
        out["name"] = header.name
    if header.start:
        out["start"] = _num(header.start)
    if header.source:
        out["source"] = header.source
    return out


def job_to_json(job: TraceJob) -> dict[str, Any]:
    """One job object in the canonical key order, defaults left out."""
    out: dict[str, Any] = {"job": job.job, "submit": _num(job.submit), "pool": job.pool,
                           "instances": job.instances}
    res = job.resources
    out["resources"] = {k: _num(v) for k, v in (("cpu", res.cpu), ("mem_mb", res.mem_mb),
                                                 ("disk_mb", res.disk_mb), ("gpu", res.gpu)) if v}
    if job.duration is not None:
        out["duration"] = _num(job.duration)
    if job.durations:
        out["durations"] = [_num(d) for d in job.durations]
    if job.priority:
        out["priority"] = job.priority
    if not job.preemptible:
        out["preemptible"] = False
    if job.type is not JobType.BATCH:
        out["type"] = job.type.value
    if job.one_per_host:
        out["one_per_host"] = True
    if job.constraint is not None:
        out["constraint"] = constraint_to_json(job.constraint)
    return out


def _dumps(data: Mapping[str, Any]) -> str:
    # ASCII only: a raw U+0085 or U+2028 in a name would split the line for readers that
    # treat every Unicode line break as one (str.splitlines does).
    return json.dumps(data, separators=(", ", ": "), ensure_ascii=True, allow_nan=False)


def trace_lines(trace: Trace) -> Iterator[str]:
    """The trace as lines of text (each ending in a newline)."""
    yield _dumps(header_to_json(trace.header)) + "\n"
    for job in trace.jobs:
        yield _dumps(job_to_json(job)) + "\n"


def dump_trace(trace: Trace) -> str:
    """The whole trace as one string."""
    return "".join(trace_lines(trace))
