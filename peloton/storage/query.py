"""The job query: what can be asked, and the one definition of what matches.

Peloton answered job queries with a Lucene index inside Cassandra.  Here
the SQL backend translates a `JobQuery` into WHERE clauses over indexed
columns, and the Cassandra backend narrows candidates with index tables
it maintains itself and then filters with `matches` below.  Both must
agree; the contract suite checks that they do on the same data.

Semantics (all filters are ANDed; an empty filter matches everything):
- `states`: the job is in any of them.
- `owner`, `owning_team`, `respool_id`: exact.
- `labels`: the job carries every one of them (key and value).
- `name`: case-sensitive substring of the job name (Peloton's wildcard
  `*name*` on its case-sensitive name field).
- `keywords`: each keyword, case-insensitively, is a substring of the
  job's search text (name, owner, owning team, and `key=value` of every
  label, see `search_text`).
- time ranges are half-open [start, end); a bound of None is open.  A
  completion range matches only jobs that completed (completion time set).
- results are sorted by `order_by`, then by each of `then_by`, then by job
  id (so pages are stable); `offset`/`limit` cut a page, and `total` counts
  every match.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from peloton.core.errors import InvalidArgument
from peloton.core.model.constraints import Label
from peloton.core.model.job import JobSummary
from peloton.core.states import JobState

#: Separates the parts of a search text so a keyword cannot span two of them by accident.
_SEP = "\x1f"


class SortField(StrEnum):
    """Job fields a query can sort by."""

    CREATION_TIME = "creation_time"
    COMPLETION_TIME = "completion_time"
    UPDATE_TIME = "update_time"
    NAME = "name"
    OWNER = "owner"
    OWNING_TEAM = "owning_team"
    RESPOOL_ID = "respool_id"
    INSTANCE_COUNT = "instance_count"
    STATE = "state"
    JOB_ID = "job_id"


@dataclass(frozen=True, slots=True)
class TimeRange:
    """A half-open interval [start, end) of epoch seconds; None is unbounded."""

    start: float | None = None
    end: float | None = None

    def contains(self, value: float) -> bool:
        """Whether `value` lies in the range."""
        return ((self.start is None or value >= self.start)
                and (self.end is None or value < self.end))


@dataclass(frozen=True, slots=True)
class JobQuery:
    """A job search with sorting and one page of results."""

    states: frozenset[JobState] = frozenset()
    owner: str | None = None
    owning_team: str | None = None
    respool_id: str | None = None
    labels: tuple[Label, ...] = ()
    name: str | None = None
    keywords: tuple[str, ...] = ()
    creation_time: TimeRange | None = None
    completion_time: TimeRange | None = None
    order_by: SortField = SortField.CREATION_TIME
    descending: bool = True
    #: Further sort keys, (field, descending), for jobs equal on `order_by`.
    then_by: tuple[tuple[SortField, bool], ...] = ()
    offset: int = 0
    limit: int | None = None

    def __post_init__(self) -> None:
        if self.offset < 0:
            raise InvalidArgument("query offset must be >= 0", field="pagination.offset")
        if self.limit is not None and self.limit < 0:
            raise InvalidArgument("query limit must be >= 0", field="pagination.limit")


@dataclass(frozen=True, slots=True)
class JobQueryResult:
    """One page of matching jobs and the number of matches in all pages."""

    jobs: tuple[JobSummary, ...]
    total: int


def search_text(name: str, owner: str, owning_team: str, labels: Iterable[Label]) -> str:
    """The lower-cased text keywords are matched against (stored by every backend)."""
    parts = [name, owner, owning_team, *(f"{lb.key}={lb.value}" for lb in labels)]
    return _SEP.join(parts).lower()


def matches(query: JobQuery, job: JobSummary) -> bool:
    """Whether `job` satisfies every filter of `query` (sorting and paging aside)."""
    rt = job.runtime
    if query.states and rt.state not in query.states:
        return False
    if query.owner is not None and job.owner != query.owner:
        return False
    if query.owning_team is not None and job.owning_team != query.owning_team:
        return False
    if query.respool_id is not None and job.respool_id != query.respool_id:
        return False
    if query.labels and not set(query.labels) <= set(job.labels):
        return False
    if query.name is not None and query.name not in job.name:
        return False
    if query.keywords:
        text = search_text(job.name, job.owner, job.owning_team, job.labels)
        if any(k.lower() not in text for k in query.keywords):
            return False
    if query.creation_time is not None and not query.creation_time.contains(rt.creation_time):
        return False
    return query.completion_time is None or (
        rt.completion_time > 0 and query.completion_time.contains(rt.completion_time))


def sort_value(field: SortField, job: JobSummary) -> str | float:
    """The value of `job` that `field` sorts by."""
    values: dict[SortField, str | float] = {
        SortField.CREATION_TIME: job.runtime.creation_time,
        SortField.COMPLETION_TIME: job.runtime.completion_time,
        SortField.UPDATE_TIME: job.runtime.update_time,
        SortField.NAME: job.name,
        SortField.OWNER: job.owner,
        SortField.OWNING_TEAM: job.owning_team,
        SortField.RESPOOL_ID: job.respool_id,
        SortField.INSTANCE_COUNT: job.instance_count,
        SortField.STATE: job.runtime.state.value,
    }
    return values.get(field, job.job_id)


def order_and_page(query: JobQuery, found: Sequence[JobSummary]) -> JobQueryResult:
    """Sort matches as the query asks (ties by job id ascending) and cut out its page."""
    ordered = sorted(found, key=lambda j: j.job_id)
    # Stable sorts, least significant key first.
    for field, descending in reversed(((query.order_by, query.descending), *query.then_by)):
        ordered.sort(key=functools.partial(sort_value, field), reverse=descending)
    end = None if query.limit is None else query.offset + query.limit
    return JobQueryResult(tuple(ordered[query.offset:end]), len(ordered))
