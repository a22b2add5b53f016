"""Contracts of the task tables: configs by version and runtimes written by CAS.

Task configs are immutable per (job, config version): a default spec
(Peloton's instance -1 row) plus full specs for the instances that differ.
Task runtimes are the hottest table: every state change of every task is a
compare-and-set on `revision`, so the batch form `write_task_runtimes`
exists for the group committer (peloton/storage/group_commit.py), which
turns many callers' single writes into one transaction.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from peloton.core.model.events import PodEvent
from peloton.core.model.ids import TaskId
from peloton.core.model.storage_records import TaskConfigSet
from peloton.core.model.task import TaskRuntime, TaskSpec
from peloton.core.states import TaskState


@dataclass(frozen=True, slots=True)
class RuntimeWrite:
    """One compare-and-set of a task runtime: `runtime.revision` is the revision read.

    `events` are the pod events the change leaves (its history): stored only if the write
    is applied, and by SQL stores in the same transaction, so one state wave of many
    tasks is one commit and no acknowledged state change lacks its event.
    """

    job_id: str
    instance: int
    runtime: TaskRuntime
    events: tuple[PodEvent, ...] = ()

    @property
    def task(self) -> TaskId:
        """The task written."""
        return TaskId(self.job_id, self.instance)


@dataclass(frozen=True, slots=True)
class WriteResult:
    """Outcome of a batch of runtime writes.

    `written` maps each written task to its stored runtime (revision + 1);
    `conflicts` lists tasks whose stored revision differed (left unchanged)
    and `missing` tasks that have no runtime.  Every write is in exactly one.
    """

    written: Mapping[TaskId, TaskRuntime]
    conflicts: frozenset[TaskId] = frozenset()
    missing: frozenset[TaskId] = frozenset()

    @property
    def ok(self) -> bool:
        """Every write was applied."""
        return not self.conflicts and not self.missing


class TaskConfigReads(Protocol):
    """Reading task configs (TaskConfigStore's reads)."""

    def get_task_config(self, job_id: str, instance: int, version: int) -> TaskSpec:
        """The spec `instance` runs with at `version` (its override, else the default).
        NotFound if the version has neither."""
        ...

    def get_task_configs(self, job_id: str, version: int) -> TaskConfigSet:
        """The default and every override of one version; NotFound if none is stored."""
        ...


class TaskConfigStore(TaskConfigReads, Protocol):
    """Task configs per job config version (Peloton's task_config_v2)."""

    def create_task_configs(self, job_id: str, version: int, default: TaskSpec,
                            overrides: Mapping[int, TaskSpec] | None = None) -> None:
        """Store the default spec and per-instance overrides of one version (SQL: one
        transaction; Cassandra: single-partition batches).  Idempotent: storing a version
        again replaces it, so a retry completes an interrupted write."""
        ...


class TaskRuntimeReads(Protocol):
    """Reading task runtimes (TaskRuntimeStore's reads)."""

    def get_task_runtime(self, job_id: str, instance: int) -> TaskRuntime:
        """One runtime; NotFound if absent."""
        ...

    def get_task_runtimes(self, job_id: str, instances: Collection[int] | None = None,
                          states: Collection[TaskState] | None = None) -> dict[int, TaskRuntime]:
        """Runtimes of a job by instance: all, or only the given instances and/or states.
        Absent instances are simply not in the result."""
        ...


class TaskRuntimeStore(TaskRuntimeReads, Protocol):
    """Task runtimes, one row per (job, instance), written by compare-and-set."""

    def create_task_runtimes(self, job_id: str, runtimes: Mapping[int, TaskRuntime]) -> None:
        """Insert new runtimes at revision 1.  AlreadyExists (and nothing written) if any
        instance has a different runtime already; instances stored with exactly this
        runtime at revision 1 are accepted, so retrying a create whose outcome was unknown
        is safe.  SQL writes all in one transaction; Cassandra in single-partition batches
        (a crash can leave some, which the retry completes)."""
        ...

    def update_task_runtime(self, job_id: str, instance: int, runtime: TaskRuntime) -> TaskRuntime:
        """CAS on `runtime.revision`; returns the stored runtime (revision + 1).
        Conflict if the stored revision differs; NotFound if absent."""
        ...

    def write_task_runtimes(self, writes: Sequence[RuntimeWrite]) -> WriteResult:
        """Apply many CAS writes in one transaction (SQL) or one round of LWTs
        (Cassandra), with the pod events of the writes applied (`RuntimeWrite.events`;
        SQL: in the same transaction; Cassandra: after them).  A conflicting or missing
        task does not stop the others; the result says which were written.  A task may
        appear only once per call (InvalidArgument otherwise)."""
        ...

    def delete_task_runtimes(self, job_id: str, instances: Collection[int] | None = None) -> None:
        """Delete some (or, with None, all) runtimes of a job.  Idempotent."""
        ...
