"""Ids as people type them: a unique prefix of 6 or more characters stands for a job id.

Tables show ids cut to 8 characters (cli/views.py) and `--wait` bars name
jobs that way, so every argument that takes a job id (or a pod name
`<job>-<instance>`, or a run id `<job>-<instance>-<run>`) accepts such a
prefix back.  A full UUID is used as it is, with no extra call; a prefix
is looked up among the cluster's jobs (one v0 Query).  Fewer than 6
characters, no match and several matches are errors; the last lists the
matches so the user can pick one.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

import click

from cli import context
from peloton.api.gen.peloton.api.v0.job import job_pb2
from peloton.api.gen.peloton.api.v0.query import query_pb2
from peloton.core.errors import InvalidArgument, NotFound

F = TypeVar("F", bound=Callable[..., Any])

MIN_PREFIX = 6
#: Context meta key: parse arguments without resolving ids (the help-example test).
CHECK_ONLY = "peloton.check_only"
#: Jobs a prefix is matched against (the job index's page cap).
_SCAN = 5000
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_PREFIX = re.compile(r"^[0-9a-f-]+$")
_POD = re.compile(r"^(?P<job>.+?)-(?P<inst>\d+)$")
_RUN = re.compile(r"^(?P<job>.+?)-(?P<inst>\d+)-(?P<run>\d+)$")


def resolve_job(text: str, field: str = "JOB") -> str:
    """The full id of the job `text` names (a UUID, or a unique prefix of >= 6 characters)."""
    value = text.strip().lower()
    if _UUID.match(value):
        return value
    if not _PREFIX.match(value):
        raise InvalidArgument(f"{field}: {text!r} is not a job id (a UUID, or the first "
                              f"{MIN_PREFIX} or more characters of one)", field=field)
    if len(value) < MIN_PREFIX:
        raise InvalidArgument(f"{field}: {text!r} is too short; give at least {MIN_PREFIX} "
                              "characters of the job id", field=field)
    spec = job_pb2.QuerySpec(pagination=query_pb2.PaginationSpec(limit=_SCAN, maxLimit=_SCAN))
    found = context.client().query_jobs(spec, summary_only=True)
    matches = sorted({j.id.value for j in found.results if j.id.value.startswith(value)})
    if not matches:
        raise NotFound(f"{field}: no job id starts with {text!r} (see `peloton job list`)",
                       field=field)
    if len(matches) > 1:
        names = {j.id.value: j.name for j in found.results}
        listed = ", ".join(f"{m} ({names.get(m, '')})" for m in matches[:10])
        more = f" and {len(matches) - 10} more" if len(matches) > 10 else ""
        raise InvalidArgument(f"{field}: {text!r} matches {len(matches)} jobs: {listed}{more}; "
                              "give more characters", field=field)
    return matches[0]


def resolve_pod(text: str, field: str = "POD") -> str:
    """A pod name `<job>-<instance>` with the job part resolved."""
    m = _POD.match(text.strip())
    if not m:
        raise InvalidArgument(f"{field}: {text!r} is not a pod name (<job id>-<instance>)",
                              field=field)
    return f"{resolve_job(m['job'], field)}-{m['inst']}"


def resolve_run(text: str, field: str = "ID") -> str:
    """A run id `<job>-<instance>-<run>` with the job part resolved (anything else as is)."""
    m = _RUN.match(text.strip())
    if not m or not _PREFIX.match(m["job"]):
        return text  # not one of ours to shorten: the server judges it
    return f"{resolve_job(m['job'], field)}-{m['inst']}-{m['run']}"


class _Resolved(click.ParamType):  # type: ignore[type-arg]  # generic only in click >= 8.2
    """Resolves on conversion, after the global flags (and so the client) are known."""

    def __init__(self, name: str, kind: str) -> None:
        self.name = name
        self.kind = kind

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if (not isinstance(value, str) or not value or ctx is None or ctx.resilient_parsing
                or ctx.meta.get(CHECK_ONLY)):
            return value
        field = param.human_readable_name if param is not None else self.name
        if self.kind == "pod":
            return resolve_pod(value, field)
        if self.kind == "run":
            return resolve_run(value, field)
        return resolve_job(value, field)


JOB_ID = _Resolved("job", "job")
POD_NAME = _Resolved("pod", "pod")
RUN_ID = _Resolved("run", "run")


def job_argument(metavar: str = "JOB", **kw: Any) -> Callable[[F], F]:
    """The `job_id` argument, accepting a unique prefix."""
    decorate: Callable[[F], F] = click.argument("job_id", metavar=metavar, type=JOB_ID, **kw)
    return decorate
