"""Host registry accounting, leases and reservations, as placement and launch see them."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from peloton.common.clock import FakeClock
from peloton.core.errors import NotFound, Unavailable
from peloton.core.model.constraints import Label
from peloton.core.model.host import HostOffer
from peloton.core.model.resources import PortRange, Resources
from peloton.core.states import TaskState
from peloton.hostmgr.app import HostManager
from peloton.placement.config import PlacementEngineConfig
from tests.harness.fake_host_backend import FakeBackend
from tests.unit.hostmgr.conftest import reservation, rid, spec


def offers(hm: HostManager) -> dict[str, HostOffer]:
    """Lease everything offerable, give it back, and return the snapshots by host."""
    lease = hm.acquire_hosts()
    hm.release_lease(lease.lease_id)
    return {o.hostname: o for o in lease.offers}


def test_hosts_are_booked_from_the_backend(hm: HostManager, backend: FakeBackend) -> None:
    got = offers(hm)
    assert sorted(got) == ["h1", "h2"]
    h1 = got["h1"]
    assert h1.capacity == h1.available == Resources(4, 4096, 10_000)
    assert h1.agent_id == "agent-h1" and h1.ports == (PortRange(31000, 31009),)
    assert hm.cluster_capacity() == (Resources(6, 6144, 20_000), 0.0)
    backend.add_host("h3", cpu=8, revocable_cpu=2.0, labels=(Label("zone", "a"),))
    assert hm.cluster_capacity() == (Resources(14, 10240, 30_000), 2.0)
    assert offers(hm)["h3"].labels == (Label("zone", "a"),)
    backend.remove_host("h3")
    assert "h3" not in offers(hm)
    assert hm.cluster_capacity() == (Resources(6, 6144, 20_000), 0.0)
    summary = {s.info.hostname: s for s in hm.host_summaries()}
    assert not summary["h3"].connected and summary["h1"].connected


def test_launch_books_resources_ports_and_labels_until_the_run_ends(
        hm: HostManager, backend: FakeBackend) -> None:
    web = Label("job", "web")
    assert hm.launch("h1", [spec(0, cpu=1.5, mem=1000, ports=(31000, 31005), labels=(web,)),
                            spec(1, cpu=0.5, labels=(web,))]) == []
    assert backend.launched == [("h1", [rid(0), rid(1)])]
    h1 = offers(hm)["h1"]
    assert h1.available == Resources(2, 2996, 10_000)
    assert h1.ports == (PortRange(31001, 31004), PortRange(31006, 31009))
    assert h1.task_labels == ((web, 2),)
    backend.report(rid(0), TaskState.RUNNING)
    backend.report(rid(0), TaskState.SUCCEEDED)
    h1 = offers(hm)["h1"]
    assert h1.available == Resources(3.5, 3996, 10_000)
    assert h1.ports == (PortRange(31000, 31009),) and h1.task_labels == ((web, 1),)


def test_launch_failures_name_the_reason(hm: HostManager, backend: FakeBackend) -> None:
    assert [(f.reason, f.unreached) for f in hm.launch("nowhere", [spec(0)])] == [
        ("unknown host", True)]
    failures = hm.launch("h2", [spec(1, cpu=1.5), spec(2, cpu=1.0)])
    assert [f.run_id for f in failures] == [rid(2)]
    assert "no room on h2" in failures[0].reason and "cpu" in failures[0].reason
    assert not failures[0].unreached  # the host is there: the run did not fit
    assert "already in use" in hm.launch("h1", [spec(3, ports=(31002,)), spec(4, ports=(31002,))]
                                         )[0].reason
    backend.remove_host("h2")
    (gone,) = hm.launch("h2", [spec(5)])
    assert "not connected" in gone.reason and gone.unreached


def test_launch_again_is_idempotent_and_a_backend_refusal_unbooks(
        hm: HostManager, backend: FakeBackend) -> None:
    assert hm.launch("h1", [spec(0)]) == [] and hm.launch("h1", [spec(0)]) == []
    assert backend.launched == [("h1", [rid(0)])]  # handed to the host once
    assert "already launched on h1" in hm.launch("h2", [spec(0)])[0].reason
    backend.failure = ConnectionError("agent unreachable")
    failures = hm.launch("h1", [spec(1, cpu=2)])
    assert [f.run_id for f in failures] == [rid(1)] and "agent unreachable" in failures[0].reason
    assert not failures[0].unreached  # an error the backend did not map: nothing is known
    assert offers(hm)["h1"].available.cpu == 3  # the refused run holds nothing


@pytest.mark.parametrize("error", [Unavailable("agent h1: Launch failed: UNAVAILABLE"),
                                   NotFound("no agent registered as 'h1'")])
def test_a_launch_the_backend_could_not_get_to_its_host_is_unreached(
        hm: HostManager, backend: FakeBackend, error: Exception) -> None:
    # An agent killed -9 is still connected until its heartbeats time out.
    backend.failure = error
    (failure,) = hm.launch("h1", [spec(1, cpu=2)])
    assert failure.run_id == rid(1) and failure.unreached
    h1 = {s.info.hostname: s for s in hm.host_summaries()}["h1"]
    assert h1.allocated == Resources() and h1.runs == ()  # the refused run holds nothing


def test_a_leased_host_is_not_offered_again_until_released_or_expired(
        hm: HostManager, clock: FakeClock) -> None:
    first = hm.acquire_hosts(max_hosts=1)
    assert len(first.offers) == 1
    second = hm.acquire_hosts()
    assert {o.hostname for o in second.offers} == {"h1", "h2"} - {first.offers[0].hostname}
    assert hm.acquire_hosts().offers == ()
    hm.release_lease(first.lease_id)
    hm.release_lease(first.lease_id)  # idempotent
    assert [o.hostname for o in hm.acquire_hosts().offers] == [first.offers[0].hostname]
    clock.advance(31)  # past the lease timeout
    hm.prune()
    assert len(hm.acquire_hosts().offers) == 2


def test_commit_reserves_for_placed_runs_and_frees_the_rest_at_once(
        hm: HostManager, backend: FakeBackend) -> None:
    lease = hm.acquire_hosts()
    web = Label("job", "web")
    hm.commit_lease(lease.lease_id, [reservation("h1", 0, cpu=3, ports=(31000,), labels=(web,))])
    # Both hosts are offered again at once; h1 without what the reservation holds.
    got = offers(hm)
    assert got["h1"].available.cpu == 1 and got["h2"].available.cpu == 2
    assert got["h1"].task_labels == ((web, 1),)
    assert got["h1"].ports[0] == PortRange(31001, 31009)
    # The launch consumes the reservation: nothing is booked twice, its labels stay counted.
    assert hm.launch("h1", [spec(0, cpu=3, ports=(31000,))]) == []
    assert offers(hm)["h1"].available.cpu == 1
    assert offers(hm)["h1"].task_labels == ((web, 1),)
    assert hm.leases.reservation_count == 0
    backend.report(rid(0), TaskState.FAILED)
    assert offers(hm)["h1"].task_labels == () and offers(hm)["h1"].available.cpu == 4


def test_reservations_that_no_longer_fit_are_refused(hm: HostManager) -> None:
    lease = hm.acquire_hosts()
    assert hm.launch("h2", [spec(9, cpu=1.5)]) == []  # launched meanwhile without a reservation
    hm.commit_lease(lease.lease_id, [reservation("h2", 0, cpu=1), reservation("h1", 1, cpu=1)])
    assert hm.leases.reservation_host(rid(0)) is None
    assert hm.leases.reservation_host(rid(1)) == "h1"
    # A run without a reservation is launched only if its host has room.
    assert "no room" in hm.launch("h2", [spec(0, cpu=1)])[0].reason


def test_unlaunched_reservations_expire(hm: HostManager, clock: FakeClock) -> None:
    hm.commit_lease(hm.acquire_hosts().lease_id, [reservation("h1", 0, cpu=4)])
    assert "h1" not in offers(hm)  # nothing free left on it
    clock.advance(61)
    hm.prune()
    assert offers(hm)["h1"].available.cpu == 4


def test_revocable_runs_use_slack_cpu(make_hm: Callable[..., HostManager],
                                      backend: FakeBackend) -> None:
    backend.add_host("slack", cpu=1, revocable_cpu=3)
    hm = make_hm()
    assert hm.launch("slack", [spec(0, cpu=2.5, mem=500, revocable=True)]) == []
    got = offers(hm)["slack"]
    assert got.available == Resources(1, 3596, 10_000) and got.revocable_cpu == 0.5
    assert "revocable cpu" in hm.launch("slack", [spec(1, cpu=1, revocable=True)])[0].reason


def test_kill_is_routed_to_the_host_running_the_run(hm: HostManager, backend: FakeBackend) -> None:
    hm.launch("h1", [spec(0)])
    hm.launch("h2", [spec(1), spec(2)])
    hm.kill([rid(0), rid(2)], 3.0)
    assert sorted(backend.killed) == [("h1", [rid(0)], 3.0), ("h2", [rid(2)], 3.0)]
    assert hm.launch("h1", [spec(0)])[0].reason == "run has already ended"
    hm.kill([rid(0)], 3.0)  # already ended: nothing to do
    assert len(backend.killed) == 2 and backend.reconciled == []


def test_killing_a_placed_run_frees_its_reservation(hm: HostManager) -> None:
    hm.commit_lease(hm.acquire_hosts().lease_id, [reservation("h2", 0, cpu=2)])
    hm.kill([rid(0)])
    assert offers(hm)["h2"].available.cpu == 2 and hm.leases.reservation_count == 0


def test_a_kill_before_the_run_is_reported_waits_for_it(
        hm: HostManager, backend: FakeBackend) -> None:
    ghost = rid(7)
    backend.runs[ghost] = ("h1", TaskState.LAUNCHED)  # running, not reported yet
    hm.kill([ghost], 1.0)
    assert backend.reconciled == [[ghost]] and backend.killed == []
    backend.report(ghost, TaskState.RUNNING, "h1")  # the host reports it: now it is killed
    hm.settle()
    assert backend.killed == [("h1", [ghost], 1.0)]
    assert ghost not in hm.registry.runs


def test_a_kill_missed_while_the_host_was_away_is_sent_when_it_returns(
        hm: HostManager, backend: FakeBackend) -> None:
    hm.launch("h1", [spec(0)])
    backend.report(rid(0), TaskState.RUNNING)
    h1 = backend.hosts["h1"]
    backend.remove_host("h1")
    hm.kill([rid(0)])
    assert backend.killed == []
    backend.hosts["h1"] = h1
    backend.listener.host_up(h1)  # type: ignore[union-attr]
    hm.settle()
    assert backend.killed == [("h1", [rid(0)], 5.0)]


def test_partial_leases_rotate_through_every_offerable_host(hm: HostManager,
                                                            backend: FakeBackend) -> None:
    for i in range(3, 8):
        backend.add_host(f"h{i}")
    seen: list[list[str]] = []
    for _ in range(4):
        lease = hm.acquire_hosts(3)
        seen.append(sorted(o.hostname for o in lease.offers))
        hm.release_lease(lease.lease_id)
    assert all(len(names) == 3 for names in seen)
    # 7 hosts, 3 per lease: after three leases every host was offered at least once.
    assert set().union(*seen[:3]) == {f"h{i}" for i in range(1, 8)}
    assert seen[0] != seen[1]


def test_lease_size_follows_the_round() -> None:
    config = PlacementEngineConfig()
    assert config.lease_size(10) == config.min_hosts
    assert config.lease_size(1000) == 4000
    assert PlacementEngineConfig(max_hosts=1500).lease_size(1000) == 1500
    assert PlacementEngineConfig(hosts_per_task=0).lease_size(1000) == 0  # every host
