"""The storage gateway: a `Store` Protocol and its SQL and Cassandra backends.

Typical use in a composition root::

    store = open_store("sqlite:///var/peloton/state.db")
    check_schema(store)          # refuse to start on an old schema

See peloton/storage/README.md for the tables, the CAS rules and group commit.
"""

from peloton.storage.group_commit import GroupCommitter
from peloton.storage.query import JobQuery, JobQueryResult, SortField, TimeRange
from peloton.storage.registry import BackendRegistry, open_store, redact, register_backend
from peloton.storage.schema import SchemaMismatch, SchemaStatus, check_schema
from peloton.storage.store import ReadOnlyStore, Store, StoreOptions
from peloton.storage.task_store import RuntimeWrite, WriteResult

__all__ = [
    "BackendRegistry",
    "GroupCommitter",
    "JobQuery",
    "JobQueryResult",
    "ReadOnlyStore",
    "RuntimeWrite",
    "SchemaMismatch",
    "SchemaStatus",
    "SortField",
    "Store",
    "StoreOptions",
    "TimeRange",
    "WriteResult",
    "check_schema",
    "open_store",
    "redact",
    "register_backend",
]
