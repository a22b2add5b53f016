"""The storage gateway: one `Store` Protocol composed of small per-entity contracts.

Daemons depend on the narrow Protocols they use (a job manager component
that only writes task runtimes takes a `TaskRuntimeStore`; one that only
reads jobs takes a `ReadOnlyStore`, so mypy refuses a write through it);
composition roots open a whole `Store` with `peloton.storage.open_store(url)`.  Every
backend (SQL: SQLite and PostgreSQL; Cassandra) implements all of it and
passes the same contract suite in tests/contract/.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from peloton.common.retry import Retrier, RetryPolicy
from peloton.storage.bulk import BulkStore
from peloton.storage.cluster_store import (
    FrameworkStore,
    HostStore,
    ResourcePoolStore,
    SecretStore,
    VolumeStore,
)
from peloton.storage.cron_store import CronJobStore
from peloton.storage.history_store import (
    DEFAULT_POD_EVENT_TTL,
    PodEventReads,
    PodEventStore,
    UpdateReads,
    UpdateStore,
)
from peloton.storage.job_store import (
    ActiveJobReads,
    ActiveJobStore,
    JobConfigReads,
    JobConfigStore,
    JobNameStore,
    JobQueryStore,
    JobRuntimeReads,
    JobRuntimeStore,
)
from peloton.storage.leader_store import LeaderEpochStore
from peloton.storage.schema import SchemaStore
from peloton.storage.task_store import (
    TaskConfigReads,
    TaskConfigStore,
    TaskRuntimeReads,
    TaskRuntimeStore,
)


@dataclass(frozen=True)
class StoreOptions:
    """How a store behaves, independent of its backend.

    `retrier` retries a lost connection (default: 5 attempts, 50 ms doubling
    to 2 s) before `Unavailable`.  `bootstrap` lets an *empty* database get
    the current schema at open (the embedded SQLite default uses it; a
    database with an older schema still needs `peloton migrate schema up`).
    `clock` stamps pod-event expiry; tests pass a fake one.  `sqlite_threads`: native
    threads SQLite transactions run on in a monkey-patched process, so a transaction
    waiting for the database never stops the hub (peloton.common.blocking; None: 4 for
    a file, 1 in memory; 0: run on the caller, as deterministic tests do).  PostgreSQL
    and Cassandra wait cooperatively on the hub and need no threads.
    """

    retrier: Retrier = field(default_factory=lambda: Retrier(RetryPolicy()))
    bootstrap: bool = False
    pod_event_ttl: float = DEFAULT_POD_EVENT_TTL
    clock: Callable[[], float] = time.time
    sqlite_threads: int | None = None


class ReadOnlyStore(JobConfigReads, JobRuntimeReads, JobQueryStore, JobNameStore,
                    ActiveJobReads, TaskConfigReads, TaskRuntimeReads, PodEventReads,
                    UpdateReads, Protocol):
    """Every read of jobs, tasks and workflows, and nothing that writes.

    What a job manager component that is not the job aggregate holds (API operations,
    servicers, the simulation's exporter): every change to a job goes through
    peloton/jobmgr/aggregate.py, and with this type mypy refuses a store write anywhere
    else (tests/unit/jobmgr/test_one_writer.py checks the same by name).  A `Store` is one.
    """


class Store(JobConfigStore, JobRuntimeStore, JobQueryStore, JobNameStore, ActiveJobStore,
            TaskConfigStore, TaskRuntimeStore, PodEventStore, UpdateStore,
            ResourcePoolStore, HostStore, SecretStore, VolumeStore, FrameworkStore,
            CronJobStore, SchemaStore, BulkStore, LeaderEpochStore, Protocol):
    """Everything a Peloton cluster keeps.  Thread-safe (also under gevent)."""

    #: The URL the store was opened with, password redacted (safe to log).
    url: str
    #: The backend family: "sqlite", "postgresql" or "cassandra".
    backend: str

    def close(self) -> None:
        """Release connections.  Idempotent; the store is unusable afterwards."""
        ...
