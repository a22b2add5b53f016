"""SQL job query: a `JobQuery` as WHERE clauses over the indexed `jobs` columns.

Filters map one to one onto peloton/storage/query.py's `matches` (the
reference semantics): states -> `state IN`, owner / owning team / pool ->
equality, each label -> `job_id IN` the ids `job_labels` (indexed by key
and value) has for it, name -> case-sensitive substring of the name
(`replace`, which is case-sensitive in every dialect, where SQLite's LIKE is
not), keywords -> substrings of the lower-cased search text.  The total
count and the page are read in one transaction so they agree.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from peloton.storage.job_index import summary
from peloton.storage.query import JobQuery, JobQueryResult, SortField
from peloton.storage.sql.database import Database
from peloton.storage.sql.tables import job_labels, jobs

_SORT_COLUMNS = {
    SortField.CREATION_TIME: jobs.c.creation_time,
    SortField.COMPLETION_TIME: jobs.c.completion_time,
    SortField.UPDATE_TIME: jobs.c.update_time,
    SortField.NAME: jobs.c.name,
    SortField.OWNER: jobs.c.owner,
    SortField.OWNING_TEAM: jobs.c.owning_team,
    SortField.RESPOOL_ID: jobs.c.respool_id,
    SortField.INSTANCE_COUNT: jobs.c.instance_count,
    SortField.STATE: jobs.c.state,
    SortField.JOB_ID: jobs.c.job_id,
}


def _contains(column: Any, text: str) -> Any:
    """`column` contains `text` literally (LIKE wildcards in `text` escaped)."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return column.like(f"%{escaped}%", escape="\\")


def where_clauses(query: JobQuery) -> list[Any]:
    """The WHERE conditions of a query (a job must also have a runtime and a config)."""
    conds: list[Any] = [jobs.c.revision.is_not(None), jobs.c.config_version.is_not(None)]
    if query.states:
        conds.append(jobs.c.state.in_(sorted(s.value for s in query.states)))
    if query.owner is not None:
        conds.append(jobs.c.owner == query.owner)
    if query.owning_team is not None:
        conds.append(jobs.c.owning_team == query.owning_team)
    if query.respool_id is not None:
        conds.append(jobs.c.respool_id == query.respool_id)
    for label in dict.fromkeys(query.labels):
        # IN (subquery), not EXISTS: lets the planner drive from the (key, value) index
        # instead of probing it once per job.
        conds.append(jobs.c.job_id.in_(sa.select(job_labels.c.job_id).where(
            job_labels.c.key == label.key, job_labels.c.value == label.value)))
    if query.name:
        conds.append(sa.func.replace(jobs.c.name, query.name, "") != jobs.c.name)
    for keyword in query.keywords:
        conds.append(_contains(jobs.c.search_text, keyword.lower()))
    if query.completion_time is not None:
        conds.append(jobs.c.completion_time > 0)
    for column, rng in ((jobs.c.creation_time, query.creation_time),
                        (jobs.c.completion_time, query.completion_time)):
        if rng is not None and rng.start is not None:
            conds.append(column >= rng.start)
        if rng is not None and rng.end is not None:
            conds.append(column < rng.end)
    return conds


class SqlJobQuery:
    """JobQueryStore over SQL."""

    db: Database

    def query_jobs(self, query: JobQuery) -> JobQueryResult:
        conds = where_clauses(query)
        order = []
        for field, descending in ((query.order_by, query.descending), *query.then_by):
            column = _SORT_COLUMNS[field]
            order.append(column.desc() if descending else column.asc())
        order.append(jobs.c.job_id.asc())
        page = (sa.select(jobs.c.job_id, jobs.c.runtime, jobs.c.name, jobs.c.job_type,
                          jobs.c.owner, jobs.c.owning_team, jobs.c.respool_id,
                          jobs.c.instance_count, jobs.c.labels, jobs.c.sla)
                .where(*conds).order_by(*order).offset(query.offset))
        if query.limit is not None:
            page = page.limit(query.limit)
        count = sa.select(sa.func.count()).select_from(jobs).where(*conds)

        def read(conn: Connection) -> tuple[int, list[Any]]:
            return int(conn.execute(count).scalar() or 0), list(conn.execute(page))

        total, rows = self.db.run("query jobs", read, write=False)
        return JobQueryResult(tuple(summary(r.job_id, r) for r in rows), total)
