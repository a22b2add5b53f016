"""The bridge's Thrift handlers in front of a real job manager (served on real gRPC).

`Bridge.call("method", ...)` decodes nothing by hand: it goes through the
ThriftProcessor as an HTTP request would (request maxima, the caller's
identity, dispatch), to handlers that talk to the job manager of
tests/unit/jobmgr_servicers/conftest.py through the real PelotonClient.
The fake host manager runs launched runs at once unless a test turns
`hosts.auto_run` off and drives runs itself (`run_all`, `fail`).  Pools are
the fake resource manager's default pool.  Waits poll with a deadline.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest

from aurorabridge import caller
from aurorabridge.config import HandlerSettings
from aurorabridge.handlers import handler_table, updates
from aurorabridge.handlers.context import BridgeContext
from aurorabridge.processor import ThriftProcessor
from aurorabridge.thrift_api import api, args_class
from peloton.api.client import PelotonClient
from peloton.core.states import TaskState
from tests.unit.jobmgr_servicers.conftest import Cluster

T = TypeVar("T")
POOL = "respool-default"
U = api.JobUpdateStatus


class DefaultPool:
    """Every role's jobs go to the fake resource manager's one pool."""

    def load(self, gpu: bool = False, role: str = "") -> str:
        return POOL


@dataclass
class Bridge:
    """The bridge over a served job manager; `call` as an Aurora client would."""

    cluster: Cluster
    ctx: BridgeContext
    processor: ThriftProcessor

    def call(self, method: str, *, user: str = "", **kwargs: Any) -> Any:
        """The Response of one call, made as `user` (Aurora's UNSECURE caller if empty)."""
        with caller.acting_as(user or caller.UNSECURE):
            return self.processor.guarded(method, args_class(method)(**kwargs))

    def ok(self, method: str, **kwargs: Any) -> Any:
        resp = self.call(method, **kwargs)
        assert resp.responseCode == api.ResponseCode.OK, [d.message for d in resp.details or []]
        return resp.result

    def until(self, probe: Callable[[], T | None], what: str) -> T:
        return self.cluster.until(probe, what)

    # -- reading --------------------------------------------------------------------------
    def details(self, key: Any) -> Any:
        return self.ok("getJobUpdateDetails", key=key, query=None).getJobUpdateDetailsResult.detailsList[0]

    def status(self, key: Any) -> int:
        return int(self.details(key).update.summary.state.status)

    def tasks(self, job: Any, statuses: set[int] | None = None) -> list[Any]:
        query = api.TaskQuery(jobKeys=[job], statuses=statuses)
        return list(self.ok("getTasksWithoutConfigs", query=query).scheduleStatusResult.tasks)

    # -- driving runs ---------------------------------------------------------------------
    def launched(self, job_id: str) -> dict[str, str]:
        """Launched runs of the job that the test has not answered yet -> host."""
        events = {e.run_id for e in self.cluster.hosts.events}
        return {r: h for r, h in self.cluster.hosts.runs().items()
                if r.startswith(job_id) and r not in events}

    def run(self, run_id: str, host: str) -> None:
        self.cluster.hosts.emit(run_id, TaskState.RUNNING, host)


def job_key(name: str = "hello") -> Any:
    return api.JobKey(role="www", environment="devel", name=name)


def bridge_on(cluster: Cluster, handlers: HandlerSettings | None = None) -> Iterator[Bridge]:
    """A Bridge in front of `cluster`'s job manager (with `handlers`, or 4 workers)."""
    # The served job manager; grpc names the target `dns:///host:port`.
    address = cluster.channel._channel.target().decode().removeprefix("dns:///")
    client = PelotonClient(jobmgr=address, resmgr=address, hostmgr=address, timeout=10)
    ctx = BridgeContext(client, DefaultPool(),  # type: ignore[arg-type]
                        handlers or HandlerSettings(workers=4), on_pulse_expired=updates.pulse_expired)
    try:
        yield Bridge(cluster, ctx, ThriftProcessor(handler_table(ctx)))
    finally:
        ctx.pulses.stop()
        client.close()


@pytest.fixture(name="bridge")
def bridge_fixture(cluster: Cluster) -> Iterator[Bridge]:
    yield from bridge_on(cluster)
