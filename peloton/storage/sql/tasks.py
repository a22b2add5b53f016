"""SQL task tables: task configs by version and task runtimes written by CAS.

`write_task_runtimes` is the hot path (the group committer calls it with
up to a thousand writes).  It is one transaction that
- on PostgreSQL, is a single `UPDATE ... FROM unnest(arrays) ... WHERE
  revision = expected RETURNING key` with the arrays sent in binary (so no
  JSON body is escaped in Python): the rows returned were written, and
  PostgreSQL re-checks the WHERE against a row another transaction just
  changed, so a concurrent writer can never be overwritten;
- on SQLite, is one executemany UPDATE guarded by `revision = expected`
  inside a savepoint; if its row count shows that some write lost, the
  savepoint is rolled back, the stored revisions are read, and only the
  writes that match are applied (the transaction holds SQLite's write
  lock from BEGIN IMMEDIATE, so nothing changes between read and write).
Either way the writes that lost are reported, not applied, and the rest
commit together.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from operator import itemgetter
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from peloton.core.errors import AlreadyExists, Conflict, InvalidArgument, NotFound
from peloton.core.model.evolve import replacer
from peloton.core.model.ids import TaskId
from peloton.core.model.storage_records import TaskConfigSet
from peloton.core.model.task import TaskRuntime, TaskSpec
from peloton.core.states import TaskState
from peloton.storage import codec
from peloton.storage.codec_rows import decode_rows
from peloton.storage.sql.database import Database
from peloton.storage.sql.history import insert_pod_events, pod_event_rows
from peloton.storage.sql.tables import task_configs, task_runtimes
from peloton.storage.sql.task_rows import task_config_rows
from peloton.storage.task_store import RuntimeWrite, WriteResult

#: Bound parameters per IN list (SQLite allows 32766 per statement).
CHUNK = 900
#: Writes of at least this many rows let small waiting writes go first (Database.run).
BULK_ROWS = 500
#: A runtime with its revision replaced (the stored copy of every compare-and-set).
_stamp = replacer(TaskRuntime, "revision")
_task_id = tuple.__new__


_PG_CAS = """
UPDATE task_runtimes AS t SET state = v.state, revision = v.new_rev, body = v.body
FROM unnest(CAST(%b AS text[]), CAST(%b AS bigint[]), CAST(%b AS text[]),
            CAST(%b AS text[]), CAST(%b AS integer[]), CAST(%b AS bigint[]))
     AS v(state, new_rev, body, job_id, instance, old_rev)
WHERE t.job_id = v.job_id AND t.instance = v.instance AND t.revision = v.old_rev
RETURNING t.job_id, t.instance
"""
_PG_CREATE = """
INSERT INTO task_runtimes (job_id, instance, state, revision, body)
SELECT * FROM unnest(CAST(%b AS text[]), CAST(%b AS integer[]), CAST(%b AS text[]),
                     CAST(%b AS bigint[]), CAST(%b AS text[]))
ON CONFLICT (job_id, instance) DO NOTHING
"""
_SQLITE_CREATE = ("INSERT INTO task_runtimes (job_id, instance, state, revision, body) "
                  "VALUES (?, ?, ?, ?, ?) ON CONFLICT (job_id, instance) DO NOTHING")
_SQLITE_CAS = ("UPDATE task_runtimes SET state = ?, revision = ?, body = ? "
               "WHERE job_id = ? AND instance = ? AND revision = ?")


def task_entity(job_id: str, instance: int) -> str:
    """How errors name a task's runtime."""
    return f"task runtime of task {job_id}-{instance}"


def runtime_row(job_id: str, instance: int, runtime: TaskRuntime) -> dict[str, Any]:
    """The task_runtimes row of a runtime (stored as given, revision included)."""
    return {"job_id": job_id, "instance": instance, "state": runtime.state.value,
            "revision": runtime.revision, "body": codec.to_json(runtime)}


def chunks(items: Sequence[Any], size: int = CHUNK) -> Iterator[Sequence[Any]]:
    """`items` in slices of at most `size`."""
    for i in range(0, len(items), size):
        yield items[i:i + size]


class SqlTasks:
    """TaskConfigStore and TaskRuntimeStore over SQL."""

    db: Database

    # -- configs -----------------------------------------------------------
    def create_task_configs(self, job_id: str, version: int, default: TaskSpec,
                            overrides: Mapping[int, TaskSpec] | None = None) -> None:
        given = overrides or {}
        rows = (self.db.compute(lambda: task_config_rows(job_id, version, default, given))
                if isinstance(given, dict) and len(given) >= 64  # off the hub, as jobs.py
                else task_config_rows(job_id, version, default, given))

        def tx(conn: Connection) -> None:
            conn.execute(sa.delete(task_configs).where(task_configs.c.job_id == job_id,
                                                       task_configs.c.version == version))
            conn.execute(sa.insert(task_configs), rows)
        self.db.run("create task configs", tx)

    def get_task_config(self, job_id: str, instance: int, version: int) -> TaskSpec:
        q = (sa.select(task_configs.c.instance, task_configs.c.body)
             .where(task_configs.c.job_id == job_id, task_configs.c.version == version,
                    task_configs.c.instance.in_([instance, -1]))
             .order_by(task_configs.c.instance.desc()).limit(1))
        row = self.db.run("get task config", lambda c: c.execute(q).first(), write=False)
        if row is None:
            raise NotFound(f"no task config v{version} for task {job_id}-{instance}")
        return codec.from_json(TaskSpec, row.body,
                               f"task config v{version} of task {job_id}-{row.instance}")

    def get_task_configs(self, job_id: str, version: int) -> TaskConfigSet:
        q = sa.select(task_configs.c.instance, task_configs.c.body).where(
            task_configs.c.job_id == job_id, task_configs.c.version == version)
        rows = self.db.run("get task configs", lambda c: list(c.execute(q)), write=False)
        if not rows:
            raise NotFound(f"no task configs v{version} for job {job_id}")
        specs = {r.instance: codec.from_json(
            TaskSpec, r.body, f"task config v{version} of task {job_id}-{r.instance}")
            for r in rows}
        default = specs.pop(-1, None)
        return TaskConfigSet(job_id, version, default, specs)

    # -- runtimes ----------------------------------------------------------
    def create_task_runtimes(self, job_id: str, runtimes: Mapping[int, TaskRuntime]) -> None:
        # Stored at revision 1; a runtime already at 1 (the job manager stamps its own) is
        # encoded as it is, without a copy.
        rows = [(job_id, i, rt.state.value, 1, codec.to_json(
                    rt if rt.revision == 1 else codec.replace_field(rt, "revision", 1)))
                for i, rt in sorted(runtimes.items())]
        refused = AlreadyExists(f"job {job_id}: some of the task runtimes already exist")
        insert = _PG_CREATE if self.db.dialect == "postgresql" else _SQLITE_CREATE

        def tx(conn: Connection) -> None:
            # Insert what is not there yet; rows already there must be exactly ours (a retry
            # of a create that did commit) or the whole create is refused.  Only the
            # instances of this call are ever read: a job created in chunks does not
            # re-read its earlier chunks.
            cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
            if self.db.dialect == "postgresql":
                cursor.execute(insert, tuple(list(c) for c in zip(*rows, strict=True)))
            else:
                cursor.executemany(insert, rows)
            if cursor.rowcount == len(rows):
                return
            c = task_runtimes.c
            ours = {r[1]: r[4] for r in rows}
            for part in chunks(sorted(ours)):
                q = sa.select(c.instance, c.body).where(c.job_id == job_id, c.instance.in_(part))
                if any(ours[inst] != body for inst, body in conn.execute(q)):
                    raise refused

        if rows:
            self.db.run("create task runtimes", tx, duplicate=lambda: refused,
                        bulk=len(rows) >= BULK_ROWS)

    def get_task_runtime(self, job_id: str, instance: int) -> TaskRuntime:
        q = sa.select(task_runtimes.c.body).where(task_runtimes.c.job_id == job_id,
                                                  task_runtimes.c.instance == instance)
        body = self.db.run("get task runtime", lambda c: c.execute(q).scalar(), write=False)
        if body is None:
            raise NotFound(f"task {job_id}-{instance} not found")
        return codec.from_json(TaskRuntime, body, task_entity(job_id, instance))

    def get_task_runtimes(self, job_id: str, instances: Collection[int] | None = None,
                          states: Collection[TaskState] | None = None) -> dict[int, TaskRuntime]:
        base = sa.select(task_runtimes.c.instance, task_runtimes.c.body).where(
            task_runtimes.c.job_id == job_id)
        if states is not None:
            base = base.where(task_runtimes.c.state.in_(sorted(s.value for s in states)))
        wanted = None if instances is None else sorted(set(instances))

        def read(conn: Connection) -> list[Any]:
            if wanted is None:
                return list(conn.execute(base))
            return [r for part in chunks(wanted)
                    for r in conn.execute(base.where(task_runtimes.c.instance.in_(part)))]

        rows = self.db.run("get task runtimes", read, write=False)
        # A job's every runtime at once on load (recovery: a million), decoded in one loop.
        # The rows are (instance, body) and read by position: a Row's attribute access
        # cost a microsecond or two each.
        rows.sort(key=itemgetter(0))
        return decode_rows(TaskRuntime, rows, lambda instance: task_entity(job_id, instance))

    def update_task_runtime(self, job_id: str, instance: int, runtime: TaskRuntime) -> TaskRuntime:
        result = self.write_task_runtimes([RuntimeWrite(job_id, instance, runtime)])
        task = TaskId(job_id, instance)
        if task in result.missing:
            raise NotFound(f"task {task} not found")
        if task in result.conflicts:
            raise Conflict(f"task {task}: runtime changed since revision {runtime.revision}")
        return result.written[task]

    def write_task_runtimes(self, writes: Sequence[RuntimeWrite]) -> WriteResult:
        if not writes:
            return WriteResult({})
        # This runs for every state change of every task, so it avoids the generic
        # helpers' overheads: the revision is stamped by a copy compiled for that one
        # field, each step is one comprehension, and the keys are built as the tuples they
        # are (TaskId's own constructor costs twice as much).  The statement parameters
        # are (state, new revision, body, job, instance, expected revision).
        to_json = codec.dataclass_json(TaskRuntime)
        stored = [_stamp(w.runtime, w.runtime.revision + 1) for w in writes]
        params = [(rt.state._value_, rt.revision, to_json(rt), w.job_id, w.instance,
                   rt.revision - 1) for w, rt in zip(writes, stored, strict=True)]
        written = {_task_id(TaskId, (p[3], p[4])): rt
                   for p, rt in zip(params, stored, strict=True)}
        if len(written) != len(writes):  # a task repeated: one key for two writes
            raise InvalidArgument("a task may be written only once per batch", field="writes")
        cas = self._cas_postgres if self.db.dialect == "postgresql" else self._cas_sqlite
        history = [(w.job_id, w.instance, w.events) for w in writes if w.events]
        event_rows = pod_event_rows(self.db, [e for _, _, evs in history for e in evs])

        def tx(conn: Connection) -> set[Any] | None:
            done = cas(conn, params)
            if event_rows:
                # The events of the writes applied, in the same transaction.
                rows: Sequence[tuple[Any, ...]] = event_rows
                if done is not None and len(done) < len(params):
                    keep = [(job, inst) in done for job, inst, evs in history for _ in evs]
                    rows = [r for r, k in zip(event_rows, keep, strict=True) if k]
                if rows:
                    insert_pod_events(self.db, conn, rows)
            return done

        done = self.db.run("write task runtimes", tx, bulk=len(params) >= BULK_ROWS)
        if done is None or len(done) == len(writes):
            return WriteResult(written)
        lost = [w for w in writes if (w.job_id, w.instance) not in done]
        present = self._existing_keys(lost)
        return WriteResult(
            {key: rt for key, rt in written.items() if key in done},
            frozenset(w.task for w in lost if (w.job_id, w.instance) in present),
            frozenset(w.task for w in lost if (w.job_id, w.instance) not in present))

    # The compare-and-sets below return the (job, instance) keys of the writes applied,
    # or None when every write was (SQLite's common case, which then builds no set).
    def _cas_postgres(self, conn: Connection, params: list[tuple[Any, ...]]) -> set[Any] | None:
        if len(params) == 1:
            return self._cas_one(conn, params[0])
        columns = tuple(list(c) for c in zip(*params, strict=True))  # arrays, not records
        # %b placeholders make psycopg send the arrays in binary: the text format would
        # escape every quote of every JSON body in Python, costing more than the UPDATE.
        rows = conn.exec_driver_sql(_PG_CAS, columns)
        return {(r[0], r[1]) for r in rows}

    def _cas_one(self, conn: Connection, p: tuple[Any, ...]) -> set[Any] | None:
        c = task_runtimes.c
        done = conn.execute(sa.update(task_runtimes).where(
            c.job_id == p[3], c.instance == p[4], c.revision == p[5],
        ).values(state=p[0], revision=p[1], body=p[2])).rowcount
        return {(p[3], p[4])} if done == 1 else set()

    def _cas_sqlite(self, conn: Connection, params: list[tuple[Any, ...]]) -> set[Any] | None:
        if len(params) == 1:
            return self._cas_one(conn, params[0])
        # Optimistic: most batches have no conflict, and then one executemany is all it
        # takes.  Its total row count cannot say *which* rows lost, so if any did, undo it
        # and write exactly the rows whose revision matches (the write lock from BEGIN
        # IMMEDIATE means nothing changes between that read and the write).
        conn.exec_driver_sql("SAVEPOINT cas")
        # The DB-API cursor directly: SQLAlchemy's executemany bookkeeping per row costs
        # more than SQLite's own work here.
        cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        cursor.executemany(_SQLITE_CAS, params)
        if cursor.rowcount == len(params):
            conn.exec_driver_sql("RELEASE cas")
            return None
        conn.exec_driver_sql("ROLLBACK TO cas")
        conn.exec_driver_sql("RELEASE cas")
        current = self._revisions(conn, [(p[3], p[4]) for p in params])
        ok = [p for p in params if current.get((p[3], p[4])) == p[5]]
        if ok:
            conn.exec_driver_sql(_SQLITE_CAS, ok)
        return {(p[3], p[4]) for p in ok}

    def _revisions(self, conn: Connection, keys: Sequence[tuple[str, int]]) -> dict[Any, int]:
        by_job: dict[str, list[int]] = {}
        for job_id, instance in keys:
            by_job.setdefault(job_id, []).append(instance)
        out: dict[Any, int] = {}
        for job_id, instances in by_job.items():
            for part in chunks(instances):
                q = sa.select(task_runtimes.c.instance, task_runtimes.c.revision).where(
                    task_runtimes.c.job_id == job_id, task_runtimes.c.instance.in_(part))
                out.update({(job_id, r[0]): r[1] for r in conn.execute(q)})
        return out

    def _existing_keys(self, writes: Sequence[RuntimeWrite]) -> set[tuple[str, int]]:
        keys = [(w.job_id, w.instance) for w in writes]
        found = self.db.run("read task revisions", lambda c: self._revisions(c, keys),
                            write=False)
        return set(found)

    def delete_task_runtimes(self, job_id: str, instances: Collection[int] | None = None) -> None:
        def tx(conn: Connection) -> None:
            q = sa.delete(task_runtimes).where(task_runtimes.c.job_id == job_id)
            if instances is None:
                conn.execute(q)
                return
            for part in chunks(sorted(set(instances))):
                conn.execute(q.where(task_runtimes.c.instance.in_(part)))
        self.db.run("delete task runtimes", tx)
