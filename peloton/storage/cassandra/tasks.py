"""Cassandra task tables: configs per (job, version) partition, runtimes by LWT.

Every runtime write is `UPDATE ... IF revision = ?`.  A job's tasks share
one partition, and Paxos runs per partition, so a batch of writes goes as
one conditional batch per job (one Paxos round for up to BATCH_ROWS tasks),
the jobs' batches concurrently; each answer says which tasks won, lost
(their stored revision differs) or found no row (see write_task_runtimes).  Creating runtimes first reads the
job's existing rows (AlreadyExists if one differs; identical ones are a
retried create's own), then inserts the rest in single-partition batches;
the job manager is the only writer of a job's tasks (leader election),
which is what makes read-then-insert safe here.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from peloton.core.errors import AlreadyExists, Conflict, InvalidArgument, NotFound
from peloton.core.model.events import PodEvent
from peloton.core.model.ids import TaskId
from peloton.core.model.storage_records import TaskConfigSet
from peloton.core.model.task import TaskRuntime, TaskSpec
from peloton.core.states import TaskState
from peloton.storage import codec
from peloton.storage.cassandra.base import (
    BATCH_BYTES,
    BATCH_ROWS,
    IN_CHUNK,
    CassandraBase,
    chunks,
)
from peloton.storage.codec_rows import decode_rows
from peloton.storage.task_store import RuntimeWrite, WriteResult


@dataclass(frozen=True, slots=True)
class _Cas:
    """One task's compare-and-set: the write, the runtime it stores, the statement's values."""

    write: RuntimeWrite
    runtime: TaskRuntime
    params: tuple[Any, ...]


def task_entity(job_id: str, instance: int) -> str:
    """How errors name a task's runtime."""
    return f"task runtime of task {job_id}-{instance}"


class CassandraTasks(CassandraBase):
    """TaskConfigStore and TaskRuntimeStore over Cassandra."""

    #: The history mixin's (CassandraHistory): the events of applied runtime writes.
    add_pod_events: Callable[[Sequence[PodEvent]], None]

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
        out = decode_rows(TaskRuntime, ((int(r["instance_id"]), r["body"]) for r in rows),
                          lambda instance: task_entity(job_id, instance))
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
        pending: dict[str, list[_Cas]] = {}
        for w in writes:
            rt = codec.replace_field(w.runtime, "revision", w.runtime.revision + 1)
            pending.setdefault(w.job_id, []).append(_Cas(w, rt, (
                rt.revision, rt.state.value, codec.to_json(rt), w.job_id, w.instance,
                w.runtime.revision)))
        written: dict[TaskId, TaskRuntime] = {}
        conflicts: set[TaskId] = set()
        missing: set[TaskId] = set()
        # One conditional batch per job (its partition) per round, the jobs' batches side by
        # side: Paxos serializes LWTs per partition, so a job's tasks written as separate
        # concurrent LWTs would contend with each other (and time out on a real server).
        # A batch applies whole or not at all; when it does not, its answer names each
        # task's stored revision, and the tasks still at theirs go again in the next round.
        while pending:
            round_ = {job: self._cas_chunk(items) for job, items in pending.items()}
            answers = self.cas_batches("task_runtime.cas",
                                       [[c.params for c in chunk] for chunk in round_.values()])
            for (job, chunk), rows in zip(round_.items(), answers, strict=True):
                rest = pending[job][len(chunk):]
                if rows and rows[0].get("[applied]"):
                    written.update((c.write.task, c.runtime) for c in chunk)
                else:
                    stored = {int(r["instance_id"]): r.get("revision") for r in rows
                              if r.get("instance_id") is not None}
                    retry = []
                    for c in chunk:
                        now = stored.get(c.write.instance)
                        if now is None:
                            missing.add(c.write.task)
                        elif now != c.write.runtime.revision:
                            conflicts.add(c.write.task)
                        else:
                            retry.append(c)  # refused only for another task's sake
                    rest = retry + rest
                if rest:
                    pending[job] = rest
                else:
                    del pending[job]
        events = [e for w in writes if w.events and w.task in written for e in w.events]
        if events:
            self.add_pod_events(events)
        return WriteResult(written, frozenset(conflicts), frozenset(missing))

    @staticmethod
    def _cas_chunk(items: list[_Cas]) -> list[_Cas]:
        """The head of a job's writes that fits one batch (BATCH_ROWS, about BATCH_BYTES)."""
        size = 0
        for n, c in enumerate(items):
            size += len(c.params[2])
            if n and (n >= BATCH_ROWS or size > BATCH_BYTES):
                return items[:n]
        return items

    def delete_task_runtimes(self, job_id: str, instances: Collection[int] | None = None) -> None:
        if instances is None:
            self.q("task_runtime.delete_all", job_id)
        else:
            self.many("task_runtime.delete", [(job_id, i) for i in sorted(set(instances))])
