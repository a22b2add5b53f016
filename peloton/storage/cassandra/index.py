"""The job index in Cassandra, maintained by the backend itself (no Lucene plugin).

`job_index` holds one row per job with the searchable fields of its newest
config and its runtime; `job_index_by_state / _owner / _respool / _label`
map a value to the ids of the jobs that have it.  A query narrows the
candidates with the lookup tables of the filters it has (intersecting
them; with none, it scans `job_index`, paged by the driver; the owning
team, name, keywords and time ranges have no lookup table), loads their
index rows, and then applies the reference filter of
peloton/storage/query.py to them, so a stale lookup row can cost a read
but never produce a wrong answer.  Sorting and paging happen in memory:
fine for the tens of thousands of jobs a cluster keeps (the archiver
removes old terminal jobs), and exactly the SQL backend's order.

The index is written after the data it describes (only by the winner of
a runtime CAS), so it can lag a crash behind the data, never run ahead
of it; the next write of the job repairs it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from peloton.core.model.constraints import Label
from peloton.core.model.job import JobRuntime, JobSpec, JobSummary
from peloton.storage.cassandra.base import IN_CHUNK, CassandraBase, chunks, key_of
from peloton.storage.cassandra.session import Row
from peloton.storage.cassandra.statements import INDEX_CONFIG_COLUMNS, INDEX_RUNTIME_COLUMNS
from peloton.storage.job_index import decode_labels, index_fields, runtime_columns, summary
from peloton.storage.query import JobQuery, JobQueryResult, matches, order_and_page

Items = list[tuple[str, Sequence[Any]]]


def label_key(label: Label) -> str:
    """A label as one lookup-table key (JSON, so '=' in keys or values cannot collide)."""
    return json.dumps([label.key, label.value], separators=(",", ":"))


class JobIndexWriter:
    """Builds the batched writes that keep the index and its lookup tables current."""

    def index_config_items(self, job_id: str, spec: JobSpec, old: Row | None) -> Items:
        """Writes pointing the index at config `spec` (`old`: the current index row)."""
        cols = index_fields(spec).columns()
        items: Items = [("job_index.set_config",
                         (*(cols[c] for c in INDEX_CONFIG_COLUMNS), job_id))]
        before = old or {}
        for table, key, new in (("job_index_by_owner", "owner", spec.owner),
                                ("job_index_by_respool", "respool_id", spec.respool_id)):
            if before.get(key) not in (None, new):
                items.append((f"{table}.remove", (key_of(before[key]), job_id)))
            items.append((f"{table}.add", (key_of(new), job_id)))
        old_labels = {label_key(lb) for lb in decode_labels(before.get("labels"), job_id)}
        new_labels = {label_key(lb) for lb in spec.labels}
        items += [("job_index_by_label.remove", (k, job_id)) for k in sorted(old_labels - new_labels)]
        items += [("job_index_by_label.add", (k, job_id)) for k in sorted(new_labels)]
        return items

    def index_runtime_items(self, job_id: str, runtime: JobRuntime, old: Row | None) -> Items:
        """Writes putting `runtime` into the index (`old`: the current index row)."""
        cols = runtime_columns(runtime)
        items: Items = [("job_index.set_runtime",
                         (*(cols[c] for c in INDEX_RUNTIME_COLUMNS), job_id))]
        old_state = (old or {}).get("state")
        if old_state not in (None, runtime.state.value):
            items.append(("job_index_by_state.remove", (old_state, job_id)))
        items.append(("job_index_by_state.add", (runtime.state.value, job_id)))
        return items

    def index_delete_items(self, job_id: str, old: Row | None) -> Items:
        """Writes removing a job's index row and lookup rows."""
        items: Items = [("job_index.delete", (job_id,))]
        if old is None:
            return items
        for table, key in (("job_index_by_state", "state"), ("job_index_by_owner", "owner"),
                           ("job_index_by_respool", "respool_id")):
            if old.get(key) is not None:
                items.append((f"{table}.remove", (key_of(old[key]), job_id)))
        items += [("job_index_by_label.remove", (label_key(lb), job_id))
                  for lb in decode_labels(old.get("labels"), job_id)]
        return items


class CassandraJobQuery(CassandraBase):
    """JobQueryStore over Cassandra."""

    def _candidates(self, query: JobQuery) -> set[str] | None:
        """Ids that may match (from lookup tables), or None: every job may."""
        sets: list[set[str]] = []
        for label in query.labels:
            sets.append({r["job_id"] for r in self.q("job_index_by_label.ids", label_key(label))})
        if query.owner is not None:
            sets.append({r["job_id"] for r in self.q("job_index_by_owner.ids", key_of(query.owner))})
        if query.respool_id is not None:
            sets.append({r["job_id"]
                         for r in self.q("job_index_by_respool.ids", key_of(query.respool_id))})
        if query.states:
            sets.append({r["job_id"] for s in query.states
                         for r in self.q("job_index_by_state.ids", s.value)})
        if not sets:
            return None
        return set.intersection(*sets)

    def query_jobs(self, query: JobQuery) -> JobQueryResult:
        ids = self._candidates(query)
        if ids is None:
            rows = self.q("job_index.all")
        else:
            rows = [r for part in chunks(sorted(ids), IN_CHUNK)
                    for r in self.q("job_index.get_many", list(part))]
        found: list[JobSummary] = []
        for row in rows:
            if row.get("runtime") is None or row.get("config_version") is None:
                continue  # mid-create or mid-copy: not a complete job yet
            job = summary(str(row["job_id"]), row)
            if matches(query, job):
                found.append(job)
        return order_and_page(query, found)
