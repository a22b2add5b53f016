"""Contracts of the history tables: pod events, updates (workflows) and workflow events.

Pod events are append-only and bounded by retention: each backend keeps
an event for `pod_event_ttl` seconds after it was written (Cassandra by a
TTL on the row, SQL by an expiry column that `expire_pod_events` sweeps),
as Peloton kept them for 90 days.  An event's identity is (job, instance,
run, time, state): adding the same event twice stores it once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from peloton.core.model.events import PodEvent
from peloton.core.model.update import UpdateInfo, WorkflowEvent

#: Peloton's pod_events TTL: 90 days.
DEFAULT_POD_EVENT_TTL = 90 * 24 * 3600.0


class PodEventReads(Protocol):
    """Reading pod events (PodEventStore's reads)."""

    def get_pod_events(self, job_id: str, instance: int, run_id: int | None = None,
                       limit: int | None = None) -> list[PodEvent]:
        """Events of one instance (or one run of it), newest first: by run id
        descending, then time descending.  `limit` keeps the latest N.  [] if none."""
        ...


class PodEventStore(PodEventReads, Protocol):
    """History of every run of every task."""

    def add_pod_events(self, events: Sequence[PodEvent]) -> None:
        """Append events (all or nothing in SQL).  Idempotent per event identity."""
        ...

    def delete_pod_events(self, job_id: str, instance: int, from_run: int, to_run: int) -> None:
        """Delete the events of runs in [from_run, to_run).  Idempotent."""
        ...

    def expire_pod_events(self, now: float | None = None) -> int:
        """Delete events past their retention as of `now` (default: the wall clock) and
        return how many were deleted.  Backends that expire rows themselves (Cassandra
        TTLs) return 0."""
        ...


class UpdateReads(Protocol):
    """Reading workflows and their events (UpdateStore's reads)."""

    def get_update(self, update_id: str) -> UpdateInfo:
        """One workflow; NotFound if absent."""
        ...

    def get_updates_for_job(self, job_id: str) -> list[UpdateInfo]:
        """Workflows of a job, newest first (by creation time, then id).  [] if none."""
        ...

    def get_workflow_events(self, update_id: str, instance: int | None = None,
                            limit: int | None = None) -> list[WorkflowEvent]:
        """Events of the workflow itself (instance None) or of one instance, newest
        first, at most `limit`.  [] if none."""
        ...


class UpdateStore(UpdateReads, Protocol):
    """Workflows (updates, restarts, starts, stops) and their events."""

    def create_update(self, update: UpdateInfo) -> UpdateInfo:
        """Store a new workflow at revision 1 and return it.  AlreadyExists if the id
        is taken."""
        ...

    def update_update(self, update: UpdateInfo) -> UpdateInfo:
        """CAS on `update.revision`; returns the stored workflow (revision + 1).
        Conflict if the stored revision differs; NotFound if absent."""
        ...

    def delete_update(self, update_id: str) -> None:
        """Delete a workflow and its events.  Idempotent."""
        ...

    def add_workflow_event(self, event: WorkflowEvent) -> None:
        """Append an event of a workflow (instance None = the workflow itself).
        Idempotent per (update, instance, time, state)."""
        ...
