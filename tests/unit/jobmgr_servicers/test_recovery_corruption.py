"""A corrupt row costs one job, not the job manager: recovery loads the others, and
the API answers DATA_LOSS naming the job instead of crashing a handler."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import sqlalchemy as sa

from peloton.api.gen.peloton.api.v1alpha.job.stateless.svc import (
    stateless_svc_pb2,
    stateless_svc_pb2_grpc,
)
from peloton.api.grpc_server import GrpcServer
from peloton.core.states import JobState, TaskState
from peloton.jobmgr.app import JobManager
from peloton.jobmgr.config import JobManagerConfig
from peloton.storage import Store, StoreOptions, open_store
from peloton.storage.sql import tables
from tests.contract import factories as f
from tests.fakes.hostmgr import FakeHostManager
from tests.fakes.resmgr import FakeResourceManager


def _seed(store: Store) -> tuple[str, str]:
    """Two active jobs of two pending tasks each; the second one's runtime is then corrupted."""
    ids = []
    for name in ("healthy", "broken"):
        jid = f.job_id()
        store.create_job(jid, f.job_spec(name, instances=2), f.job_runtime(JobState.PENDING))
        store.create_task_runtimes(jid, {i: f.task_runtime(TaskState.INITIALIZED)
                                         for i in range(2)})
        store.add_active_job(jid)
        ids.append(jid)
    healthy, broken = ids
    store.db.run("corrupt", lambda c: c.execute(  # type: ignore[attr-defined]
        sa.update(tables.jobs).where(tables.jobs.c.job_id == broken)
        .values(runtime="not json{")))
    return healthy, broken


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Any, JobManager, str, str]]:
    store = open_store(f"sqlite:///{tmp_path / 'state.db'}", StoreOptions(bootstrap=True))
    ids = _seed(store)
    hosts = FakeHostManager()
    hosts.add_host("host-0", cpu=64, mem=65536)
    server = GrpcServer("127.0.0.1:0", max_workers=8)
    jm = JobManager(store, FakeResourceManager(hosts), hosts,
                    JobManagerConfig(poll_timeout=0.05), grpc=server)
    jm.start()
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
    try:
        yield (stateless_svc_pb2_grpc.JobServiceStub(channel), jm, *ids)
    finally:
        channel.close()
        server.stop(0)
        jm.stop()
        store.close()


def _get(stub: Any, job_id: str) -> Any:
    req = stateless_svc_pb2.GetJobRequest(summary_only=True)
    req.job_id.value = job_id
    return stub.GetJob(req, timeout=5)


def test_recovery_skips_the_corrupt_job_and_serves_the_rest(served: Any) -> None:
    stub, jm, healthy, broken = served
    assert jm.cache.get(healthy) is not None      # recovered and cached
    assert jm.cache.get(broken) is None           # skipped, not fatal
    assert _get(stub, healthy).summary.status.state   # the API still serves the healthy job
    with pytest.raises(grpc.RpcError) as err:
        _get(stub, broken)
    assert err.value.code() is grpc.StatusCode.DATA_LOSS
    assert broken in (err.value.details() or "")
