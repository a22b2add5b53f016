"""Host maintenance: UP -> DRAINING -> DRAINED -> DOWN -> UP, persisted, across restarts."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from peloton.common.clock import FakeClock
from peloton.core.errors import FailedPrecondition, InvalidArgument, NotFound
from peloton.core.model.sla_policy import DrainMode, DrainRequest, PercentageSla
from peloton.core.states import HostState, TaskState
from peloton.hostmgr.app import HostManager
from peloton.hostmgr.config import HostManagerConfig
from peloton.storage import Store, StoreOptions, open_store
from tests.harness.fake_host_backend import FakeBackend
from tests.unit.hostmgr.conftest import CONFIG, connect, reservation, rid, spec

H = HostState


def test_drain_moves_runs_off_then_goes_down_and_comes_back_up(
        hm: HostManager, backend: FakeBackend, store: Store) -> None:
    hm.launch("h1", [spec(0), spec(1)])
    hm.commit_lease(hm.acquire_hosts().lease_id, [reservation("h1", 2)])
    info = hm.start_maintenance("h1")
    assert (info.state, info.goal_state) == (H.DRAINING, H.DOWN)
    assert store.get_host("h1").state is H.DRAINING  # persisted before it took effect
    assert hm.leases.reservation_count == 0  # reservations on it are freed
    lease = hm.acquire_hosts()
    assert [o.hostname for o in lease.offers] == ["h2"]  # never offered
    hm.release_lease(lease.lease_id)
    assert "DRAINING" in hm.launch("h1", [spec(3)])[0].reason
    assert hm.cluster_capacity()[0].cpu == 2
    hm.settle()
    assert hm.draining_runs() == [("h1", rid(0)), ("h1", rid(1))]
    # The job manager moves the runs: they end one by one; the host drains once empty.
    hm.kill([rid(0)])
    hm.settle()
    assert hm.host_states()["h1"] is H.DRAINING and hm.draining_runs() == [("h1", rid(1))]
    backend.report(rid(1), TaskState.SUCCEEDED)
    hm.settle()
    assert hm.host_states()["h1"] is H.DOWN and hm.draining_runs() == []
    assert store.get_host("h1").state is H.DOWN
    info = hm.complete_maintenance("h1")
    assert (info.state, info.goal_state) == (H.UP, H.UP)
    assert store.get_host("h1").state is H.UP
    assert {o.hostname for o in hm.acquire_hosts().offers} == {"h1", "h2"}


def test_an_empty_host_goes_straight_down(hm: HostManager) -> None:
    hm.start_maintenance("h2")
    hm.settle()
    assert [i.hostname for i in hm.query_hosts([H.DOWN])] == ["h2"]
    assert [i.hostname for i in hm.query_hosts([H.UP])] == ["h1"]
    assert [i.hostname for i in hm.query_hosts()] == ["h1", "h2"]
    h1 = hm.query_hosts([H.UP])[0]
    assert h1.ip == "10.0.0.1"


def test_maintenance_errors_and_idempotence(hm: HostManager) -> None:
    with pytest.raises(NotFound):
        hm.start_maintenance("nope")
    with pytest.raises(NotFound):
        hm.complete_maintenance("nope")
    assert hm.complete_maintenance("h1").state is H.UP  # already UP: nothing to do
    hm.launch("h1", [spec(0)])
    hm.start_maintenance("h1")
    assert hm.start_maintenance("h1").state is H.DRAINING  # again: unchanged
    with pytest.raises(FailedPrecondition, match="DRAINING, not DOWN"):
        hm.complete_maintenance("h1")


def test_ending_maintenance_mid_drain_stops_the_drain_and_keeps_the_runs(
        hm: HostManager, backend: FakeBackend, store: Store) -> None:
    """Aurora's endMaintenance: from DRAINING (and every other state) the host is UP again at
    once; its runs not moved yet stay, none is listed for moving, and it is offered again."""
    hm.launch("h1", [spec(0), spec(1)])
    backend.report(rid(0), TaskState.RUNNING)
    hm.start_maintenance("h1", SLA)
    hm.settle()
    assert hm.host_states()["h1"] is H.DRAINING and len(hm.draining_runs()) == 2
    with pytest.raises(FailedPrecondition):  # Peloton's CompleteMaintenance still needs DOWN
        hm.complete_maintenance("h1")
    info = hm.end_maintenance("h1")
    assert (info.state, info.goal_state, info.drain) == (H.UP, H.UP, None)
    stored = store.get_host("h1")
    assert (stored.state, stored.goal_state, stored.drain) == (H.UP, H.UP, None)
    hm.settle()
    assert hm.host_states()["h1"] is H.UP and hm.draining_runs() == [] and hm.drain_requests() == {}
    assert set(hm.registry.hosts["h1"].runs) == {rid(0), rid(1)}  # nothing was stopped
    assert not backend.killed
    assert hm.launch("h1", [spec(2)]) == []  # takes new runs again
    lease = hm.acquire_hosts()
    assert "h1" in {o.hostname for o in lease.offers}
    hm.release_lease(lease.lease_id)
    assert hm.end_maintenance("h1") == info  # idempotent
    # From DOWN too (and SCHEDULED/NONE are UP to the host manager).
    hm.start_maintenance("h2")
    hm.settle()
    assert hm.host_states()["h2"] is H.DOWN
    assert hm.end_maintenance("h2").state is H.UP
    with pytest.raises(NotFound):
        hm.end_maintenance("nope")


def test_maintenance_survives_a_restart(store_url: str, clock: FakeClock) -> None:
    config = HostManagerConfig(consumers=("jobmgr",), recovery_grace=10.0)
    backend = FakeBackend()
    backend.add_host("h1")
    store = open_store(store_url, StoreOptions(bootstrap=True))
    first = connect(HostManager(store, backend, config, clock=clock))
    first.launch("h1", [spec(0)])
    backend.report(rid(0), TaskState.RUNNING)
    first.start_maintenance("h1")
    first.settle()
    backend.stop()
    store.close()

    # A new host manager over the same file: the host is still DRAINING, and its run, which
    # the backend re-reports, is known again (so the drain does not end early).
    store = open_store(store_url, StoreOptions(bootstrap=True))
    second = HostManager(store, backend, config, clock=clock)
    second.start()
    try:
        second.settle()  # the deferred reconciliation re-reports the running run
        assert second.host_states() == {"h1": H.DRAINING}
        assert second.draining_runs() == [("h1", rid(0))]
        second.kill([rid(0)])
        second.settle()
        assert second.host_states() == {"h1": H.DRAINING}  # within the recovery grace
        clock.advance(11)
        second.settle()
        assert second.host_states() == {"h1": H.DOWN}
    finally:
        second.stop()
        store.close()
    store = open_store(store_url, StoreOptions(bootstrap=True))
    assert store.get_host("h1").state is H.DOWN
    store.close()


def test_a_restart_rebuilds_runs_from_backend_reports_and_adoption(
        make_hm: Callable[..., HostManager], backend: FakeBackend) -> None:
    first = make_hm()
    first.launch("h1", [spec(0, cpu=3, ports=(31000,))])
    backend.report(rid(0), TaskState.RUNNING)
    backend.stop()

    second = make_hm(CONFIG)
    second.reconcile()  # what start() asks for: every run re-reported
    assert second.registry.runs[rid(0)].hostname == "h1"
    second.adopt("h1", [spec(0, cpu=3, ports=(31000,))])  # the job manager recovered its spec
    lease = second.acquire_hosts()
    h1 = next(o for o in lease.offers if o.hostname == "h1")
    assert h1.available.cpu == 1 and h1.ports[0].begin == 31001
    second.release_lease(lease.lease_id)
    second.kill([rid(0)], 0.0)
    assert backend.killed[-1] == ("h1", [rid(0)], 0.0)


# -- how each host is drained ------------------------------------------------------------------
SLA = DrainRequest(DrainMode.SLA_POLICY, PercentageSla(90.0, 60), timeout_secs=600.0,
                   min_required_instances=20, check_non_production=False)


def test_each_draining_host_says_how_it_is_drained(hm: HostManager, store: Store,
                                                   clock: FakeClock) -> None:
    hm.launch("h1", [spec(0)])
    hm.launch("h2", [spec(1)])
    hm.start_maintenance("h1")  # Peloton's: within each job's maximum unavailable instances
    peloton = DrainRequest(started_at=clock.wall())
    assert hm.drain_requests() == {"h1": peloton}
    clock.advance(5)
    info = hm.start_maintenance("h2", SLA)
    assert info.drain == dataclasses.replace(SLA, started_at=clock.wall())
    assert hm.drain_requests() == {"h1": peloton, "h2": info.drain}
    assert store.get_host("h2").drain == info.drain  # persisted
    # Peloton's StartMaintenance again leaves a drain alone; a new request replaces it,
    # timed from now (Aurora keeps one request per host).
    assert hm.start_maintenance("h2").drain == info.drain
    clock.advance(5)
    forced = hm.start_maintenance("h2", DrainRequest(DrainMode.FORCE))
    assert forced.drain == DrainRequest(DrainMode.FORCE, started_at=clock.wall())
    assert hm.drain_requests()["h2"] == forced.drain


def test_completing_maintenance_forgets_the_drain(hm: HostManager, store: Store) -> None:
    hm.start_maintenance("h2", SLA)
    hm.settle()
    assert hm.host_states()["h2"] is H.DOWN and hm.drain_requests() == {}
    hm.complete_maintenance("h2")
    assert store.get_host("h2").drain is None


def test_a_bad_drain_request_changes_nothing(hm: HostManager, store: Store) -> None:
    for bad, field in ((DrainRequest(DrainMode.SLA_POLICY), "drain.default_policy"),
                       (dataclasses.replace(SLA, timeout_secs=-1.0), "drain.timeout_secs"),
                       (dataclasses.replace(SLA, default_policy=PercentageSla(120.0)),
                        "drain.default_policy.percentage")):
        with pytest.raises(InvalidArgument) as err:
            hm.start_maintenance("h1", bad)
        assert err.value.field == field
    assert hm.host_states()["h1"] is H.UP and store.get_hosts() == []


def test_a_drain_request_survives_a_restart(store_url: str, clock: FakeClock) -> None:
    backend = FakeBackend()
    backend.add_host("h1")
    store = open_store(store_url, StoreOptions(bootstrap=True))
    first = connect(HostManager(store, backend, CONFIG, clock=clock))
    first.launch("h1", [spec(0)])
    request = first.start_maintenance("h1", SLA).drain
    backend.stop()
    store.close()
    store = open_store(store_url, StoreOptions(bootstrap=True))
    try:
        second = connect(HostManager(store, backend, CONFIG, clock=clock))
        assert second.drain_requests() == {"h1": request}
    finally:
        store.close()
