"""Cassandra task tables: configs per (job, version) partition, runtimes by LWT.

Every runtime write is `UPDATE ... IF revision = ?`, one Paxos round per
task; a batch of writes is sent concurrently (the driver pipelines them),
and each write's `[applied]` row says whether it won, lost (the row shows
the stored revision) or found no row.  Creating runtimes first reads the
job's existing rows (AlreadyExists if one differs; identical ones are a
retried create's own), then inserts the rest in single-partition batches;
the job manager is the only writer of a job's tasks (leader election),
which is what makes read-then-insert safe here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from peloton.core.errors import AlreadyExists, Conflict, InvalidArgument, NotFound
from peloton.core.model.ids import TaskId
from peloton.core.model.storage_records import TaskConfigSet
from peloton.core.model.task import TaskRuntime, TaskSpec
from peloton.core.states import TaskState
from peloton.storage import codec
from peloton.storage.cassandra.base import IN_CHUNK, CassandraBase, chunks
from peloton.storage.task_store import RuntimeWrite, WriteResult


def task_entity(job_id: str, instance: int) -> str:
    """How errors name a task's runtime."""
    return f"task runtime of task {job_id}-{instance}"


class CassandraTasks(CassandraBase):
    """TaskConfigStore and TaskRuntimeStore over Cassandra."""

    # -- configs -----------------------------------------------------------
    def create_task_configs(self, job_id: str, version: int, default: TaskSpec,
                            overrides: Mapping[int, TaskSpec] | None = None) -> None:
        rows = [(job_id, version, -1, codec.to_json(default))]
        rows += [(job_id, version, i, codec.to_json(s)) for i, s in sorted((overrides or {}).items())]
        self.q("task_config_versions.add", job_id, version)
        self.q("task_config.delete", job_id, version)
        self.partition_batches("task_config.put", rows)

    def get_task_config(self, job_id: str, instance: int, version: int) -> TaskSpec:
        rows = self.q("task_config.get", job_id, version, [instance, -1])
        if not rows:
            raise NotFound(f"no task config v{version} for task {job_id}-{instance}")
        row = max(rows, key=lambda r: int(r["instance_id"]))
        return codec.from_json(TaskSpec, row["body"],
                               f"task config v{version} of task {job_id}-{row['instance_id']}")

    def get_task_configs(self, job_id: str, version: int) -> TaskConfigSet:
        rows = self.q("task_config.all", job_id, version)
        if not rows:
            raise NotFound(f"no task configs v{version} for job {job_id}")
        specs = {int(r["instance_id"]): codec.from_json(
            TaskSpec, r["body"], f"task config v{version} of task {job_id}-{r['instance_id']}")
            for r in rows}
        default = specs.pop(-1, None)
        return TaskConfigSet(job_id, version, default, specs)

    # -- runtimes ----------------------------------------------------------
    def create_task_runtimes(self, job_id: str, runtimes: Mapping[int, TaskRuntime]) -> None:
        stored = {int(r["instance_id"]): r["body"] for r in self.q("task_runtime.all", job_id)}
        rows = []
        for i, rt in sorted(runtimes.items()):
            first = codec.replace_field(rt, "revision", 1)
            rows.append((job_id, i, 1, first.state.value, codec.to_json(first)))
        # A retry after a crash finds the batches that made it: identical rows are fine.
        if any(stored[r[1]] != r[4] for r in rows if r[1] in stored):
            raise AlreadyExists(f"job {job_id}: some of the task runtimes already exist")
        self.partition_batches("task_runtime.put", [r for r in rows if r[1] not in stored])

    def get_task_runtime(self, job_id: str, instance: int) -> TaskRuntime:
        row = self.q1("task_runtime.get", job_id, instance)
        if row is None:
            raise NotFound(f"task {job_id}-{instance} not found")
        return codec.from_json(TaskRuntime, row["body"], task_entity(job_id, instance))

    def get_task_runtimes(self, job_id: str, instances: Collection[int] | None = None,
                          states: Collection[TaskState] | None = None) -> dict[int, TaskRuntime]:
        if instances is None:
            rows = self.q("task_runtime.all", job_id)
        else:
            rows = [r for part in chunks(sorted(set(instances)), IN_CHUNK)
                    for r in self.q("task_runtime.get_many", job_id, list(part))]
        out = {int(r["instance_id"]): codec.from_json(
            TaskRuntime, r["body"], task_entity(job_id, int(r["instance_id"]))) for r in rows}
        if states is not None:
            wanted = set(states)
            out = {i: rt for i, rt in out.items() if rt.state in wanted}
        return dict(sorted(out.items()))

    def update_task_runtime(self, job_id: str, instance: int, runtime: TaskRuntime) -> TaskRuntime:
        result = self.write_task_runtimes([RuntimeWrite(job_id, instance, runtime)])
        task = TaskId(job_id, instance)
        if task in result.missing:
            raise NotFound(f"task {task} not found")
        if task in result.conflicts:
            raise Conflict(f"task {task}: runtime changed since revision {runtime.revision}")
        return result.written[task]

    def write_task_runtimes(self, writes: Sequence[RuntimeWrite]) -> WriteResult:
        if len({(w.job_id, w.instance) for w in writes}) != len(writes):
            raise InvalidArgument("a task may be written only once per batch", field="writes")
        new = [dataclasses.replace(w.runtime, revision=w.runtime.revision + 1) for w in writes]
        params: list[Sequence[Any]] = [
            (rt.revision, rt.state.value, codec.to_json(rt), w.job_id, w.instance,
             w.runtime.revision) for w, rt in zip(writes, new, strict=True)]
        results = self.many("task_runtime.cas", params)
        written: dict[TaskId, TaskRuntime] = {}
        conflicts: set[TaskId] = set()
        missing: set[TaskId] = set()
        for w, rt, rows in zip(writes, new, results, strict=True):
            row = rows[0] if rows else {}
            if row.get("[applied]"):
                written[w.task] = rt
            elif row.get("revision") is None:
                missing.add(w.task)
            else:
                conflicts.add(w.task)
        return WriteResult(written, frozenset(conflicts), frozenset(missing))

    def delete_task_runtimes(self, job_id: str, instances: Collection[int] | None = None) -> None:
        if instances is None:
            self.q("task_runtime.delete_all", job_id)
        else:
            self.many("task_runtime.delete", [(job_id, i) for i in sorted(set(instances))])
