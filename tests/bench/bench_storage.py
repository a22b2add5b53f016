"""Storage benchmark: task-runtime writes/s one-by-one vs grouped, and a 10,000-task job.

Run as `python -m tests.bench.bench_storage` (make bench does;
BENCH_STORAGE=sqlite,cassandra picks backends).  Backends: SQLite (a file in
a temp dir, WAL, synchronous=NORMAL: the embedded default), PostgreSQL (a
server of its own from tests/harness, with fsync and synchronous_commit ON,
i.e. durable) and Cassandra (one node of its own from tests/harness, 512 MB
heap, commit log synced in 2 ms groups before a write is acknowledged, so
durable on one node like the others; smaller runs: LWT writes cost a Paxos
round each).  Every figure goes through
the public Store API and so includes JSON encoding and the revision CAS:

- `one_by_one`: `update_task_runtime`, one transaction per row;
- `grouped`: `write_task_runtimes` batches of 1,000 (the group commit size);
- `group_commit`: 32 threads each calling `GroupCommitter.write` for its
  own tasks, the daemon hot path (batches form from whatever is waiting);
- `create_job_10k`: create_job + the job's task configs + 10,000 task
  runtimes, wall time.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import threading
import time
import uuid

from migrations import sql_runner
from peloton.common import gcpolicy
from peloton.core.model.job import JobRuntime, JobSpec
from peloton.core.model.resources import Resources
from peloton.core.model.task import CommandSpec, TaskRuntime, TaskSpec
from peloton.core.states import JobState, JobType, TaskState
from peloton.storage import GroupCommitter, RuntimeWrite, Store, open_store
from tests.bench.common import report

GROUPED_ROWS = 50_000
BATCH = 1_000


def runtime(i: int) -> TaskRuntime:
    """A realistic runtime (~380 bytes of JSON)."""
    return TaskRuntime(state=TaskState.PENDING, host=f"host-{i % 500}",
                       agent_id=f"agent-{i % 500:04d}", ports=(("http", 31000 + i % 1000),),
                       config_version=1, desired_config_version=1, update_time=1.7e9)


def seed(store: Store, tasks: int) -> str:
    """A job id with `tasks` runtimes at revision 1."""
    job_id = str(uuid.uuid4())
    for start in range(0, tasks, 10_000):
        store.create_task_runtimes(job_id, {i: runtime(i) for i in
                                            range(start, min(tasks, start + 10_000))})
    return job_id


def one_by_one(store: Store, n: int) -> float:
    """Rows/s with one transaction per row."""
    job_id = seed(store, n)
    current = store.get_task_runtimes(job_id)
    t0 = time.perf_counter()
    for i, rt in current.items():
        store.update_task_runtime(job_id, i, dataclasses.replace(rt, state=TaskState.RUNNING))
    return n / (time.perf_counter() - t0)


def grouped(store: Store, rows: int = GROUPED_ROWS) -> tuple[float, float]:
    """(rows/s of wall time, rows per CPU-second of this process) with batches of BATCH."""
    job_id = seed(store, rows)
    current = store.get_task_runtimes(job_id)
    writes = [RuntimeWrite(job_id, i, dataclasses.replace(rt, state=TaskState.RUNNING))
              for i, rt in current.items()]
    t0, c0 = time.perf_counter(), time.process_time()
    for start in range(0, len(writes), BATCH):
        result = store.write_task_runtimes(writes[start:start + BATCH])
        assert result.ok
    return (len(writes) / (time.perf_counter() - t0),
            len(writes) / (time.process_time() - c0))


def group_commit(store: Store, threads: int, per_thread: int) -> tuple[float, float]:
    """(rows/s, mean batch size) with `threads` callers through a GroupCommitter."""
    job_id = seed(store, threads)
    committer = GroupCommitter(store, flush_interval=0.002, max_batch=BATCH)
    committer.start()

    def worker(instance: int) -> None:
        rt = store.get_task_runtime(job_id, instance)
        for _ in range(per_thread):
            rt = committer.write(job_id, instance, dataclasses.replace(
                rt, failure_count=rt.failure_count + 1))

    pool = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    t0 = time.perf_counter()
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    elapsed = time.perf_counter() - t0
    committer.stop()
    total = threads * per_thread
    return total / elapsed, total / max(1, committer.batches)


def create_job_10k(store: Store) -> float:
    """Seconds to persist a new 10,000-task job."""
    job_id = str(uuid.uuid4())
    task = TaskSpec(name="worker", resources=Resources(cpu=1, mem_mb=512, disk_mb=100),
                    command=CommandSpec("python worker.py"))
    spec = JobSpec(name="big", type=JobType.BATCH, instance_count=10_000, default_task=task,
                   respool_id="pool", owner="bench")
    t0 = time.perf_counter()
    store.create_job(job_id, spec, JobRuntime(state=JobState.INITIALIZED, creation_time=1.0))
    store.create_task_configs(job_id, spec.version, task)
    store.create_task_runtimes(job_id, {i: TaskRuntime(config_version=1) for i in
                                        range(10_000)})
    return time.perf_counter() - t0


def run(name: str, store: Store, single_n: int, targets: dict[str, str], note: str,
        grouped_rows: int = GROUPED_ROWS, per_thread: int = 150) -> None:
    """All figures for one backend."""
    rate = one_by_one(store, single_n)
    report(f"storage.{name}.task_runtime.one_by_one", rate, "rows/s", note=f"{single_n} rows; {note}")
    rate, cpu_rate = grouped(store, grouped_rows)
    report(f"storage.{name}.task_runtime.grouped", rate, "rows/s", targets.get("grouped", ""),
           f"write_task_runtimes batches of {BATCH}, {grouped_rows} rows, JSON encode + CAS "
           f"included; {note}")
    report(f"storage.{name}.task_runtime.grouped_per_client_cpu_s", cpu_rate, "rows/cpu-s",
           note="the same run per CPU-second of the benchmark process (less sensitive to "
           "other load on the machine; for SQLite this includes the database work)")
    rate, size = group_commit(store, 32, per_thread)
    report(f"storage.{name}.task_runtime.group_commit_32_threads", rate, "rows/s",
           note=f"GroupCommitter, 32 writer threads, mean batch {size:.0f} rows; {note}")
    secs = create_job_10k(store)
    report(f"storage.{name}.create_job_10k_tasks", secs, "s", targets.get("create", ""),
           f"config + task configs + 10,000 runtimes; {note}")


def main() -> None:
    # The garbage collector's settings of every daemon (peloton.common.gcpolicy): with
    # CPython's defaults, full collections walking the benchmark's runtimes take 12 % of
    # a grouped write.
    gcpolicy.tune()
    load = os.getloadavg()[0]
    report("storage.load_average_at_start", load, "procs",
           note=f"{os.cpu_count()} cores; figures below shrink when this exceeds the cores")
    wanted = set((os.environ.get("BENCH_STORAGE") or "sqlite,postgresql,cassandra").split(","))
    if "sqlite" in wanted:
        bench_sqlite()
    if "postgresql" in wanted:
        bench_postgresql()
    if "cassandra" in wanted:
        bench_cassandra()


def bench_sqlite() -> None:
    """The embedded default."""
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{os.path.join(tmp, 'bench.db')}"
        sql_runner.upgrade(url)
        store = open_store(url)
        run("sqlite", store, 5_000, {"grouped": ">=100000", "create": "<=0.5"},
            "SQLite WAL synchronous=NORMAL")
        store.close()


def bench_postgresql() -> None:
    """A durable PostgreSQL server of the benchmark's own."""
    from tests.harness.postgres import PostgresServer

    with PostgresServer(durable=True) as pg:
        url = pg.create_database("bench")
        sql_runner.upgrade(url)
        store = open_store(url)
        run("postgresql", store, 1_000, {"grouped": ">=50000"},
            "PostgreSQL 127.0.0.1 fsync+synchronous_commit on")
        store.close()


def bench_cassandra() -> None:
    """One Cassandra node of the benchmark's own (tests/harness/cassandra.py), smaller runs."""
    from migrations import cql_runner
    from tests.harness.cassandra import running_cassandra

    with running_cassandra() as node:
        url = node.url("bench")
        cql_runner.upgrade(url)
        store = open_store(url)
        run("cassandra", store, 500, {},
            "Cassandra 5.0.6, one node on 127.0.0.1, 512 MB heap, commit log group-synced; "
            "LWT (Paxos) per write, one conditional batch per job and round",
            grouped_rows=10_000, per_thread=30)
        store.close()


if __name__ == "__main__":
    main()
