"""The ports over gRPC: what only the wire adds to the port contracts.

The port contracts themselves run both ways already: the resource manager,
host manager and placement unit suites are parametrized `direct` / `grpc`
(tests/harness/ports_wire.py).  Here: lossless conversion of every value,
errors keeping their field, the leader gate (non-leaders answer UNAVAILABLE,
callers retry until a leader answers, terms), the status stream surviving a
host manager restart, and the fence that stops a lost leader's writes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from peloton.api.client_transport import NON_LEADER, ServiceHandle, Transport
from peloton.api.convert.private_hosts import (
    event_from_pb,
    event_to_pb,
    launch_failure_from_pb,
    launch_failure_to_pb,
    launches_from_pb,
    launches_to_pb,
    offer_from_pb,
    offer_to_pb,
    summary_from_pb,
    summary_to_pb,
)
from peloton.api.convert.private_sched import NeedsTable, needs_from_pb, rm_task_from_pb, rm_task_to_pb
from peloton.api.gen.pelotonpy.internal.resmgr import resmgr_pb2 as resmgr_pb
from peloton.api.grpc_server import GrpcServer
from peloton.api.ports_grpc.channel import StaticTarget
from peloton.api.ports_grpc.hostmgr_client import GrpcHostManager
from peloton.api.ports_grpc.leader_gate import LeaderGate, ServiceRecorder
from peloton.api.ports_grpc.resmgr_client import GrpcResourceManager
from peloton.api.ports_grpc.resmgr_servicer import serve_resource_manager
from peloton.common.fencing import Fence, fenced
from peloton.core.errors import InvalidArgument, NotFound, Unavailable
from peloton.core.model.constraints import (
    AndConstraint,
    Condition,
    Label,
    LabelConstraint,
    LabelKind,
    OrConstraint,
)
from peloton.core.model.host import HostInfo, HostOffer
from peloton.core.model.ids import TaskId
from peloton.core.model.resources import PortRange, Resources
from peloton.core.model.sched import LaunchFailure, LaunchSpec
from peloton.core.model.task import (
    CommandSpec,
    HealthCheckSpec,
    HealthCheckType,
    PortSpec,
    RestartPolicy,
    TaskSpec,
    UriSpec,
    VolumeSpec,
)
from peloton.core.placement.request import PlacementNeeds, Strategy, TaskRequest
from peloton.core.ports import HostEvent, HostSummary
from peloton.core.respool.records import RmTask
from peloton.core.states import HostState, TaskState
from peloton.hostmgr.app import HostManager
from peloton.hostmgr.config import HostManagerConfig
from peloton.storage import Store, StoreOptions, open_store
from tests.fakes.hostmgr import FakeHostManager
from tests.harness.fake_host_backend import FakeBackend
from tests.harness.ports_wire import over_grpc
from tests.unit.resmgr.helpers import FakeClock, make_pool, make_rm

JOB = "6d1b7c0e-0000-4000-8000-000000000002"
S = TaskState
CONSTRAINT = AndConstraint((
    LabelConstraint(LabelKind.HOST, Condition.EQUAL, Label("zone", "a"), 1),
    OrConstraint((LabelConstraint(LabelKind.TASK, Condition.LESS_THAN, Label("job", JOB), 2),
                  LabelConstraint(LabelKind.HOST, Condition.GREATER_THAN, Label("ssd"), 0)))))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = open_store(f"sqlite:///{tmp_path / 'ports.db'}", StoreOptions(bootstrap=True))
    yield s
    s.close()


# -- conversion -----------------------------------------------------------------------------------
def test_every_task_spec_field_survives_the_wire_and_runs_share_their_spec() -> None:
    spec = TaskSpec(
        name="web", resources=Resources(0.5, 64, 10, 1), fd_limit=256,
        ports=(PortSpec("http", 0, "HTTP_PORT"), PortSpec("admin", 8081)),
        command=CommandSpec("serve", False, ("serve", "--fast"), (("A", "1"),),
                            (UriSpec("http://x/a.tgz#sha256=" + "0" * 64, executable=True, extract=False,
                                     cache=True, output_file="etc/a.tgz"),), "bob"),
        container_image="img:1", executor_data=b"\x00\x01", constraint=CONSTRAINT,
        health_check=HealthCheckSpec(HealthCheckType.HTTP, True, 1.5, 2.5, 3.5, 4, "", "https", 8080,
                                     "/health"),
        restart_policy=RestartPolicy(3), labels=(Label("team", "x"),), controller=True,
        kill_grace_period_secs=7.0, preemptible=False, kill_on_preempt=True, revocable=True,
        volume=VolumeSpec("/data", 100.0))
    launches = [LaunchSpec(f"{JOB}-{i}-1", spec, (("http", 31000 + i),)) for i in range(3)]
    specs, msgs = launches_to_pb(launches)
    assert len(specs) == 1  # one spec on the wire for the three runs
    back = launches_from_pb(specs, msgs)
    assert back == launches
    assert back[0].spec is back[2].spec
    bare = LaunchSpec(f"{JOB}-0-2", TaskSpec())
    assert launches_from_pb(*launches_to_pb([bare])) == [bare]


def test_tasks_keep_sharing_their_placement_needs() -> None:
    needs = PlacementNeeds(Resources(1, 2, 3, 0), 2, True, CONSTRAINT, Strategy.SPREAD)
    tasks = [RmTask(TaskRequest(TaskId(JOB, i), needs, (Label("i", str(i)),), "h1", True),
                    run_id=4, priority=7, preemptible=False, controller=True) for i in range(4)]
    table = NeedsTable()
    msgs = [rm_task_to_pb(t, table) for t in tasks]
    assert len(table.messages) == 1
    decoded_needs = needs_from_pb(table.messages)
    back = [rm_task_from_pb(m, decoded_needs) for m in msgs]
    assert back == tasks
    assert back[0].request.needs is back[3].request.needs


def test_offers_summaries_events_and_launch_failures_survive_the_wire() -> None:
    offer = HostOffer("h1", "agent-1", Resources(4, 8, 9, 1), Resources(1, 2, 3, 0),
                      (PortRange(31000, 31009),), (Label("zone", "a"),), HostState.DRAINING, 0.5,
                      ((Label("job", JOB), 2),))
    assert offer_from_pb(offer_to_pb(offer)) == offer
    summary = HostSummary(HostInfo("h1", "10.0.0.1", HostState.DOWN, HostState.UP,
                                   (Label("k", "v"),), "pool-a", "pool-b"),
                          Resources(4, 8), Resources(1, 1), "agent-1", False)
    assert summary_from_pb(summary_to_pb(summary)) == summary
    for exit_code in (None, 0, 3):
        event = HostEvent(7, f"{JOB}-0-1", S.FAILED, "h1", "agent-1", 12.5, "boom", "REASON_X",
                          exit_code, "UNHEALTHY")
        assert event_from_pb(event_to_pb(event)) == event
    for unreached in (False, True):
        failure = LaunchFailure(f"{JOB}-0-1", "host h1 is not connected", unreached=unreached)
        assert launch_failure_from_pb(launch_failure_to_pb(failure)) == failure


def test_a_value_this_process_does_not_know_is_refused_by_name() -> None:
    msg = event_to_pb(HostEvent(1, "r", S.RUNNING, "h", "a", 1.0))
    msg.state = "EXPLODED"
    with pytest.raises(InvalidArgument, match=r"event\.state: unknown TaskState 'EXPLODED'"):
        event_from_pb(msg)


# -- errors ---------------------------------------------------------------------------------------
def test_errors_keep_their_kind_message_and_field(store: Store) -> None:
    rm = make_rm(store, FakeHostManager(), FakeClock())
    wired = over_grpc(rm)
    try:
        with pytest.raises(NotFound) as direct:
            rm.validate_pool("nope")
        with pytest.raises(NotFound) as remote:
            wired.validate_pool("nope")
        assert (remote.value.message, remote.value.field) == (direct.value.message,
                                                              direct.value.field)
        assert remote.value.field == "respoolID"
    finally:
        wired.close()


# -- the leader gate --------------------------------------------------------------------------------
@pytest.fixture
def gated(store: Store) -> Iterator[tuple[LeaderGate, ServiceRecorder, str]]:
    """A resource manager's services behind a closed gate on a free port."""
    rm = make_rm(store, FakeHostManager(), FakeClock())
    make_pool(rm, "a")
    recorder = ServiceRecorder()
    serve_resource_manager(recorder, rm)
    gate = LeaderGate(recorder.names)
    server = GrpcServer("127.0.0.1:0")
    gate.install(server)
    server.start()
    yield gate, recorder, f"127.0.0.1:{server.port}"
    server.stop(0)


def test_a_standby_answers_unavailable_and_callers_retry_until_a_leader_answers(
        gated: tuple[LeaderGate, ServiceRecorder, str]) -> None:
    gate, recorder, address = gated
    with grpc.insecure_channel(address) as channel:
        raw = channel.unary_unary("/pelotonpy.internal.resmgr.ResourceManagerService/PoolIdForPath")
        with pytest.raises(grpc.RpcError) as refused:
            raw(b"", timeout=5)
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
        assert refused.value.details() == NON_LEADER
    client = GrpcResourceManager(StaticTarget([address]), caller="test", timeout=0.5)
    with pytest.raises(Unavailable, match=NON_LEADER):
        client.pool_id_for_path("/a")
    client = GrpcResourceManager(StaticTarget([address]), caller="test", timeout=10)
    threading.Timer(0.5, gate.open, ("term-1", recorder)).start()  # the leader comes up
    assert client.pool_id_for_path("/a")  # retried through the refusals until it led
    assert client.channel.term == "term-1"
    client.close()


def test_a_new_term_is_reported_to_term_listeners(
        gated: tuple[LeaderGate, ServiceRecorder, str]) -> None:
    gate, recorder, address = gated
    client = GrpcResourceManager(StaticTarget([address]), caller="test", timeout=5)
    changes: list[tuple[str, str]] = []
    client.channel.add_term_listener(lambda old, new: changes.append((old, new)))
    gate.open("7", recorder)
    client.validate_pool(client.pool_id_for_path("/a"))
    gate.close()
    gate.open("9", recorder)  # another term: the daemon started over
    client.pool_id_for_path("/a")
    assert changes == [("7", "9")]
    client.close()


def test_health_of_gated_services_follows_leadership(
        gated: tuple[LeaderGate, ServiceRecorder, str]) -> None:
    gate, recorder, address = gated
    name = "pelotonpy.internal.resmgr.ResourceManagerService"
    assert name in gate.names
    with grpc.insecure_channel(address) as channel:
        health = health_pb2_grpc.HealthStub(channel)

        def status(service: str) -> int:
            req = health_pb2.HealthCheckRequest(service=service)
            return int(health.Check(req, timeout=5).status)

        serving, not_serving = (health_pb2.HealthCheckResponse.SERVING,
                                health_pb2.HealthCheckResponse.NOT_SERVING)
        assert status(name) == not_serving          # a standby: balancers skip it
        assert status("") == serving                # but the process is alive
        gate.open("term-1", recorder)
        assert status(name) == serving
        gate.close()                                # leadership lost
        assert status(name) == not_serving
        assert status("") == serving


# -- the status stream across a host manager restart ----------------------------------------------
def test_a_consumer_resumes_from_its_acknowledged_offset_on_a_restarted_host_manager(
        store: Store) -> None:
    backend = FakeBackend()
    backend.add_host("h1")
    config = HostManagerConfig(consumers=("jobmgr",), recovery_grace=0.0)

    def host_manager() -> HostManager:
        hm = HostManager(store, backend, config)
        hm.maintenance.load()
        backend.start(hm.intake)
        return hm

    first = over_grpc(host_manager())
    run = f"{JOB}-0-1"
    for state in (S.STARTING, S.RUNNING):
        backend.report(run, state, "h1")
    client = GrpcHostManager(StaticTarget([first.server_address, "127.0.0.1:1"]), caller="test")
    stream = client.subscribe("jobmgr")
    assert [e.state for e in stream.poll(10, 0)] == [S.STARTING, S.RUNNING]
    stream.acknowledge(1)  # RUNNING is not acknowledged: a new stream must deliver it again
    first.settle()  # STARTING's acknowledgement reaches the agent
    first_stream = stream.stream_id
    first.close()

    second = over_grpc(host_manager())  # a new process: a new stream, new offsets
    client.channel.target = StaticTarget([second.server_address])
    backend.redeliver()  # agents re-send what was never acknowledged to them
    backend.report(run, S.SUCCEEDED, "h1")
    events = stream.poll(10, 0)
    assert stream.stream_id != first_stream
    assert [(e.offset, e.state) for e in events] == [(1, S.RUNNING), (2, S.SUCCEEDED)]
    stream.acknowledge(2)
    assert second.events.acknowledged() == {"jobmgr": 2}
    client.close()
    second.close()


# -- fencing ----------------------------------------------------------------------------------------
def test_a_fenced_store_refuses_writes_once_the_term_is_over(store: Store) -> None:
    leading = [True]
    guarded = fenced(store, Fence(lambda: leading[0], "resmgr term 5"))
    rm = make_rm(guarded, FakeHostManager(), FakeClock())
    pool = make_pool(rm, "a")
    leading[0] = False
    with pytest.raises(Unavailable, match="resmgr term 5 is over"):
        make_pool(rm, "b")
    assert pool in [p.pool_id for p in guarded.get_resource_pools()]  # reads still work
    assert guarded.url == store.url


# -- recovery in batches --------------------------------------------------------------------------
def test_recovered_runs_travel_in_one_call_and_hold_their_allocation(store: Store) -> None:
    """RecoverTasks (what a restarted job manager sends, RECOVER_CHUNK runs at a time) tracks
    every run with its state, host and allocation, as RecoverTask does for one."""
    from peloton.core.ports import RecoveredRun
    from tests.unit.resmgr.helpers import state_of, tasks

    rm = make_rm(store, FakeHostManager(), FakeClock())
    pool = make_pool(rm, "a", cpu=(0, 8))
    running, launched = tasks(3), tasks(2, cpu=0.5)
    wired = over_grpc(rm)
    try:
        wired.recover_tasks([RecoveredRun(pool, t, S.RUNNING, "host-1") for t in running]
                            + [RecoveredRun(pool, t, S.STARTING, "host-2") for t in launched])
        wired.recover_tasks([])  # nothing to send: no call
        assert rm.pools.get(pool).allocation.cpu == 4
        assert {state_of(rm, t) for t in running} == {S.RUNNING}
        assert {state_of(rm, t) for t in launched} == {S.LAUNCHED}
        with pytest.raises(InvalidArgument):
            wired.recover_tasks([RecoveredRun(pool, tasks(1)[0], S.PENDING)])
        assert rm.pools.get(pool).allocation.cpu == 4
    finally:
        wired.close()


def test_recovered_runs_reach_an_older_resource_manager_run_by_run(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """A resource manager without RecoverRuns (an older version in a rolling upgrade)
    answers UNIMPLEMENTED: the client falls back to RecoverTasks and the runs are tracked
    with their allocation all the same."""
    from peloton.api.ports_grpc.resmgr_servicer import ResourceManagerServicer
    from peloton.core.ports import RecoveredRun
    from tests.unit.resmgr.helpers import state_of, tasks

    monkeypatch.delattr(ResourceManagerServicer, "RecoverRuns")
    rm = make_rm(store, FakeHostManager(), FakeClock())
    pool = make_pool(rm, "a", cpu=(0, 8))
    running = tasks(3)
    wired = over_grpc(rm)
    try:
        wired.recover_tasks([RecoveredRun(pool, t, S.RUNNING, "host-1") for t in running])
        wired.recover_tasks([RecoveredRun(pool, t, S.RUNNING, "host-1") for t in tasks(1)])
        assert rm.pools.get(pool).allocation.cpu == 4
        assert {state_of(rm, t) for t in running} == {S.RUNNING}
    finally:
        wired.close()


def test_runs_are_adopted_host_by_host_by_an_older_host_manager(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A host manager without AdoptHosts answers UNIMPLEMENTED: the client adopts host by
    host, and each host's runs hold their room as with AdoptHosts."""
    from peloton.api.ports_grpc.hostmgr_servicer import HostManagerServicer
    from peloton.common.clock import FakeClock as Clock

    monkeypatch.delattr(HostManagerServicer, "AdoptHosts")
    store = open_store(f"sqlite:///{tmp_path / 'hm.db'}", StoreOptions(bootstrap=True))
    backend = FakeBackend()
    backend.add_host("h1", cpu=4, mem_mb=4096)
    backend.add_host("h2", cpu=2, mem_mb=2048)
    hm = HostManager(store, backend, HostManagerConfig(consumers=("jobmgr",),
                                                       recovery_grace=0.0), clock=Clock())
    hm.maintenance.load()
    backend.start(hm.intake)
    runs = {f"{JOB}-0-1": "h1", f"{JOB}-1-1": "h1", f"{JOB}-2-1": "h2"}
    for run_id, host in runs.items():  # running since before the restart, specs unknown
        backend.report(run_id, S.RUNNING, host)
    wired = over_grpc(hm)
    try:
        spec = TaskSpec(resources=Resources(1, 100))
        wired.adopt_hosts({"h1": [LaunchSpec(f"{JOB}-0-1", spec), LaunchSpec(f"{JOB}-1-1", spec)],
                           "h2": [LaunchSpec(f"{JOB}-2-1", spec)]})
        lease = hm.acquire_hosts()
        hm.release_lease(lease.lease_id)
        assert {o.hostname: o.available.cpu for o in lease.offers} == {"h1": 2, "h2": 1}
    finally:
        wired.close()
        store.close()


def test_a_client_that_found_the_leader_in_zookeeper_waits_for_its_recovery(
        gated: tuple[LeaderGate, ServiceRecorder, str]) -> None:
    """The leader znode names a candidate as soon as it is elected; it answers "non-leader"
    until its recovery is done.  A client that read the address from ZooKeeper retries within
    its deadline; one given a fixed address is told at once (as Peloton's clients are)."""
    gate, recorder, address = gated
    service = "pelotonpy.internal.resmgr.ResourceManagerService"
    request = resmgr_pb.PoolIdForPathRequest(path="/a")
    fixed = ServiceHandle(Transport(caller="test", timeout=10), address, "peloton-resmgr", service)
    started = time.monotonic()
    with pytest.raises(Unavailable, match=NON_LEADER):
        fixed.call("PoolIdForPath", request, resmgr_pb.PoolIdForPathResponse)
    assert time.monotonic() - started < 5  # not held for the deadline
    brief = ServiceHandle(Transport(caller="test", timeout=0.5, await_leader=True), address,
                          "peloton-resmgr", service)
    with pytest.raises(Unavailable, match=NON_LEADER):  # still refused when the deadline ends
        brief.call("PoolIdForPath", request, resmgr_pb.PoolIdForPathResponse)
    found = ServiceHandle(Transport(caller="test", timeout=30, await_leader=True), address,
                          "peloton-resmgr", service)
    threading.Timer(0.5, gate.open, ("term-1", recorder)).start()  # its recovery ends
    assert found.call("PoolIdForPath", request, resmgr_pb.PoolIdForPathResponse).pool_id
    for handle in (fixed, brief, found):
        handle.transport.close()
