"""Wire-neutral query values (from the converters) -> storage queries."""

from __future__ import annotations

from peloton.api.convert.v0_job import JobQuerySpec
from peloton.core.errors import InvalidArgument
from peloton.core.ports import ResourceManagerPort
from peloton.storage import JobQuery, SortField, TimeRange

#: Peloton's default and maximum page size for job queries.
DEFAULT_LIMIT = 100
MAX_LIMIT = 5000


def _range(bounds: tuple[float | None, float | None] | None) -> TimeRange | None:
    return None if bounds is None else TimeRange(bounds[0], bounds[1])


def job_query(resmgr: ResourceManagerPort, spec: JobQuerySpec) -> JobQuery:
    """A storage JobQuery; a respool path is resolved to its id (NotFound if unknown)."""
    pool = spec.respool_id
    if not pool and spec.respool_path:
        pool = resmgr.pool_id_for_path(spec.respool_path)
    order, descending = SortField.CREATION_TIME, True
    if spec.order_by:
        name, descending = spec.order_by[0]
        try:
            order = SortField(name)
        except ValueError:
            raise InvalidArgument(f"cannot sort jobs by {name!r}",
                                  field="pagination.orderBy") from None
    limit = min(spec.limit or DEFAULT_LIMIT, spec.max_limit or MAX_LIMIT, MAX_LIMIT)
    return JobQuery(states=spec.states, owner=spec.owner, respool_id=pool or None,
                    labels=spec.labels, name=spec.name, keywords=spec.keywords,
                    creation_time=_range(spec.creation_time),
                    completion_time=_range(spec.completion_time), order_by=order,
                    descending=descending, offset=spec.offset, limit=limit)
