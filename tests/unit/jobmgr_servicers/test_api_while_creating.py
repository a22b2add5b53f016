"""The API keeps answering while a big job's tasks are being created, even when the
database makes that creation wait.

The test holds SQLite's write lock from a connection of its own, then lets the job
engine create the tasks of a 5,000-instance batch job: the engine's transaction waits
for the lock inside sqlite3 (up to its 10 s busy timeout).  That wait runs on the
store's thread pool (peloton.common.blocking), so the hub keeps serving: the engine is
seen waiting at once, and for a whole second reads from the cache and from storage
answer promptly.  Were the transaction run on the hub, the engine would only be seen
after the busy timeout, and calls would wait that long too.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from peloton.api.gen.peloton.api.v0.job import job_pb2
from peloton.api.gen.peloton.api.v1alpha.admin.svc import admin_svc_pb2 as admin
from peloton.api.gen.peloton.api.v1alpha.job.stateless.svc import stateless_svc_pb2 as svc
from tests.unit.jobmgr_servicers.conftest import Cluster
from tests.unit.jobmgr_servicers.helpers import POOL, create, job_id, service_spec, wait_running

BIG = 5000
#: Far below SQLite's 10 s busy timeout, far above a served call.
PROMPT = 2.0
#: How long the API is exercised while the database holds the creation back (seconds).
WINDOW = 1.0


def _big_batch(c: Cluster) -> str:
    config = job_pb2.JobConfig(name="batch/big", owner="alice", type=job_pb2.BATCH,
                               instanceCount=BIG)
    config.respoolID.value = POOL
    res = config.defaultConfig.resource
    res.cpuLimit, res.memLimitMb, res.diskLimitMb = 0.01, 1, 1
    config.defaultConfig.command.value = "sleep 600"
    resp = c.v0jobs.Create(job_pb2.CreateRequest(config=config), timeout=10)
    assert not resp.HasField("error"), resp.error
    return str(resp.jobId.value)


def test_the_api_answers_while_a_big_jobs_tasks_wait_for_the_database(
        cluster: Cluster, tmp_path: Path) -> None:
    c = cluster
    small = create(c, service_spec(2, name="www/prod/small")).job_id.value
    wait_running(c, small, 2)
    engines = [admin.GoalStateEngine]
    c.admin.Lockdown(admin.LockdownRequest(components=engines), timeout=10)
    big = _big_batch(c)  # stored; its tasks are created by the job engine, locked down now

    holder = sqlite3.connect(tmp_path / "state.db", isolation_level=None, timeout=10)
    try:
        holder.execute("BEGIN IMMEDIATE")  # the database's write lock, held by the test
        jobs = c.jm.queue.jobs
        asked = time.monotonic()
        c.admin.RemoveLockdown(admin.RemoveLockdownRequest(components=engines), timeout=10)
        c.until(lambda: jobs.is_running(big), "the job engine creating the big job's tasks")
        assert time.monotonic() - asked < PROMPT, "the hub was blocked by the database"

        end = time.monotonic() + WINDOW
        while time.monotonic() < end:
            got = c.jobs.GetJob(svc.GetJobRequest(job_id=job_id(small)), timeout=PROMPT)
            assert got.job_info.status.state
            listed = c.jobs.QueryPods(svc.QueryPodsRequest(job_id=job_id(small)), timeout=PROMPT)
            assert len(listed.pods) == 2
            ids = c.jobs.GetJobIDFromJobName(
                svc.GetJobIDFromJobNameRequest(job_name="www/prod/small"), timeout=PROMPT)
            assert [i.value for i in ids.job_id] == [small]
            info = c.v0jobs.Get(job_pb2.GetRequest(id={"value": big}), timeout=PROMPT)
            assert info.jobInfo.config.instanceCount == BIG
        assert jobs.is_running(big) and len(c.jm.cache.get(big) or ()) == 0  # still waiting
    finally:
        holder.rollback()
        holder.close()
    c.until(lambda: len(c.jm.cache.get(big) or ()) == BIG, f"{BIG} tasks created", 60)
