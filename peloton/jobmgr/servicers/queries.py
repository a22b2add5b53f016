"""Job and task queries answered as Peloton's store answered them (v0 and v1alpha alike).

Jobs (Peloton's pkg/storage/cassandra/store.go QueryJobs over its Lucene index):
- `owner` is the owning team (Peloton indexed `owningTeam` in the owner field);
  `name` a case-sensitive substring; labels, keywords, states, pool as in
  peloton/storage/query.py.
- A time range needs both bounds ("timestamp: nil Timestamp") with min not after
  max ("Incorrect timerange"); it is [min, max) at whole seconds (the index kept
  `yyyyMMddHHmmss`).  A query for a terminal state with no time range only sees
  jobs created in the last 7 days (Peloton's default window, 30 s of jitter ahead).
- Order: the `orderBy` list in turn (Peloton's property names: creation_time,
  completion_time, update_time, name, owner, respool_id, instance_count, state,
  and our job_id), newest created first when none.
- Pages: the matches are cut to the first `maxLimit` (default 100) first; `total`
  counts those; then `offset` and `limit` (default 10) pick the page.

Tasks (QueryTasks / GetTasksByQuerySpec): states, task names (the task config's
name) and hosts filter; `orderBy` sorts by creation_time (the run's start; runs
not started go last), host, instanceId (also spelled instance_id), message,
name, reason or state (its v0 number), ties by instance; any other property is
refused with Peloton's text; `limit` defaults to 10 and `total` counts every
match.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from peloton.api import peloton_texts as texts
from peloton.api.convert.v0_job import JobQuerySpec
from peloton.api.convert.v0_task_runtime import TaskQuery, task_state_to_v0
from peloton.core.errors import InvalidArgument
from peloton.core.model.task import TaskRuntime
from peloton.storage import JobQuery, JobQueryResult, SortField, TimeRange

#: Peloton's page size and match cap when a query names none (_defaultQueryLimit,
#: _defaultQueryMaxLimit).
DEFAULT_LIMIT = 10
DEFAULT_MAX_LIMIT = 100
#: The creation window of a terminal-state query without a time range, and how far
#: ahead of now it ends (jobQueryDefaultSpanInDays, jobQueryJitter).
TERMINAL_WINDOW = 7 * 24 * 3600.0
WINDOW_JITTER = 30.0

#: Peloton's job sort properties (its Lucene index fields) -> ours.
JOB_SORT: dict[str, SortField] = {
    "creation_time": SortField.CREATION_TIME, "completion_time": SortField.COMPLETION_TIME,
    "update_time": SortField.UPDATE_TIME, "name": SortField.NAME,
    "owner": SortField.OWNING_TEAM, "respool_id": SortField.RESPOOL_ID,
    "instance_count": SortField.INSTANCE_COUNT, "state": SortField.STATE,
    "job_id": SortField.JOB_ID,
}

TASK_SORT_TEXT = ("Sort only supports fields: creation_time, host, instanceId, message, name, "
                  "reason, state")


class QueryRefused(InvalidArgument):
    """A query Peloton's store refuses; `message` is Peloton's text (its handlers place it)."""


@dataclass(frozen=True, slots=True)
class JobPage:
    """A job query cut to Peloton's page: the storage query and the cap on `total`."""

    query: JobQuery
    cap: int

    def answer(self, result: JobQueryResult) -> JobQueryResult:
        """The storage result with Peloton's total (matches beyond the cap not counted)."""
        return JobQueryResult(result.jobs, min(result.total, self.cap))


def _time_range(bounds: tuple[float | None, float | None] | None) -> TimeRange | None:
    if bounds is None:
        return None
    low, high = bounds
    if low is None or high is None:
        raise QueryRefused(texts.NIL_TIMESTAMP, field="spec")
    if high < low:
        raise QueryRefused(texts.INCORRECT_TIME_RANGE, field="spec")
    return TimeRange(float(math.floor(low)), float(math.floor(high)))


def job_query(spec: JobQuerySpec, pool_id: str | None, now: float) -> JobPage:
    """Peloton's job query as a storage query (QueryRefused for what Peloton refused).

    `pool_id` is the pool to filter by (None: every pool); `now` the wall clock.
    """
    creation = _time_range(spec.creation_time)
    completion = _time_range(spec.completion_time)
    if creation is None and completion is None and any(s.terminal for s in spec.states):
        end = now + WINDOW_JITTER
        creation = TimeRange(float(math.floor(end - TERMINAL_WINDOW)), float(math.floor(end)))
    keys: list[tuple[SortField, bool]] = []
    for name, descending in spec.order_by or (("creation_time", True),):
        if name not in JOB_SORT:
            raise QueryRefused(f"cannot sort jobs by {name!r}: sort by one of "
                               f"{', '.join(JOB_SORT)}", field="pagination.orderBy")
        keys.append((JOB_SORT[name], descending))
    cap = spec.max_limit or DEFAULT_MAX_LIMIT
    start = min(spec.offset, cap)
    count = min(spec.limit or DEFAULT_LIMIT, cap - start)
    (first, first_desc), *rest = keys
    query = JobQuery(states=spec.states, owning_team=spec.owner, respool_id=pool_id,
                     labels=spec.labels, name=spec.name, keywords=spec.keywords,
                     creation_time=creation, completion_time=completion, order_by=first,
                     descending=first_desc, then_by=tuple(rest), offset=start, limit=count)
    return JobPage(query, cap)


# -- tasks ----------------------------------------------------------------------------------

Row = tuple[int, TaskRuntime]
_TASK_SORT = frozenset({"creation_time", "host", "instanceId", "message", "name", "reason", "state"})
#: Our CLI's spelling, which Peloton refused.
_TASK_ALIASES = {"instance_id": "instanceId"}


def _compare(order: Sequence[tuple[str, bool]], name_of: Callable[[Row], str],
             a: Row, b: Row) -> int:
    """Peloton's task Less as a comparison: each property in turn, then instance."""
    for prop, desc in order:
        sign = -1 if desc else 1
        if prop == "creation_time":
            ta, tb = a[1].start_time, b[1].start_time
            if not ta or not tb:
                if ta:  # a run that started sorts before one that did not, either way
                    return -1
                if tb:
                    return 1
                continue
            va: object = ta
            vb: object = tb
        elif prop == "host":
            va, vb = a[1].host, b[1].host
        elif prop == "instanceId":
            va, vb = a[0], b[0]
        elif prop == "message":
            va, vb = a[1].message, b[1].message
        elif prop == "name":
            va, vb = name_of(a), name_of(b)
        elif prop == "reason":
            va, vb = a[1].reason, b[1].reason
        else:  # state, by its v0 number
            va, vb = int(task_state_to_v0(a[1].state)), int(task_state_to_v0(b[1].state))
        if va < vb:  # type: ignore[operator]
            return -sign
        if va > vb:  # type: ignore[operator]
            return sign
    return (a[0] > b[0]) - (a[0] < b[0])


def select_tasks(rows: Sequence[Row], query: TaskQuery, name_of: Callable[[Row], str],
                 also_named: Callable[[Row], str] | None = None) -> tuple[list[Row], int]:
    """Peloton's QueryTasks over a job's (instance, runtime) rows: (page, total matches).

    `name_of` gives a row's task name (its config's), read only when names filter or sort;
    `also_named` another name a row matches a names filter by (v1alpha pod names: ours,
    Peloton compared only the task name).
    """
    order = [(_TASK_ALIASES.get(prop, prop), desc) for prop, desc in query.order_by]
    if any(prop not in _TASK_SORT for prop, _ in order):
        raise QueryRefused(TASK_SORT_TEXT, field="pagination.orderBy")
    found = [r for r in rows if (not query.states or r[1].state in query.states)
             and (not query.hosts or r[1].host in query.hosts)]
    if query.names:
        names = set(query.names)
        found = [r for r in found if name_of(r) in names
                 or (also_named is not None and also_named(r) in names)]
    found.sort(key=functools.cmp_to_key(functools.partial(_compare, order, name_of)))
    limit = query.limit or DEFAULT_LIMIT
    return found[query.offset:query.offset + limit], len(found)
