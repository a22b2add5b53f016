"""A host a launch could not get to is not offered until it is heard from again (reach.py).

An agent killed -9 stays registered until its heartbeats time out and looks empty, so
without this placement keeps choosing it and a task goes through a run per placement
round there, each LOST before it started."""

from __future__ import annotations

import pytest

from peloton.api.gen.pelotonpy.internal.agent import agent_pb2 as pb
from peloton.common.clock import FakeClock
from peloton.core.errors import NotFound, Unavailable
from peloton.core.lifecycle.host_reach import CONNECTED, OFFERED, REACH, Reach, ReachEvent, next_reach
from peloton.core.model.resources import Resources
from peloton.core.states import TaskState
from peloton.hostmgr.app import HostManager
from peloton.hostmgr.backends.local import LocalBackend
from tests.harness.agents import Recorder
from tests.harness.fake_host_backend import FakeBackend
from tests.unit.hostmgr.conftest import CONFIG, rid, spec

DEAD_AGENT = Unavailable("agent h1: Launch failed: UNAVAILABLE failed to connect to all addresses")


def offered(hm: HostManager) -> set[str]:
    """The hosts a placement round would be offered now (the lease is given back)."""
    lease = hm.acquire_hosts()
    hm.release_lease(lease.lease_id)
    return {o.hostname for o in lease.offers}


def connected(hm: HostManager) -> dict[str, bool]:
    return {s.info.hostname: s.connected for s in hm.host_summaries()}


def unreach(hm: HostManager, backend: FakeBackend, hostname: str = "h1",
            error: Exception = DEAD_AGENT) -> None:
    """A launch on `hostname` that the backend cannot get to the host."""
    backend.failure = error
    (failure,) = hm.launch(hostname, [spec(1)])
    backend.failure = None
    assert failure.unreached


def test_the_reach_table_names_every_pair() -> None:
    assert set(REACH) == set(Reach)
    for state in Reach:
        assert set(REACH[state]) == set(ReachEvent), state
    assert OFFERED <= CONNECTED
    # Only a registration brings back a host the backend reported gone.
    assert [e for e in ReachEvent if next_reach(Reach.DISCONNECTED, e) is not Reach.DISCONNECTED
            ] == [ReachEvent.REGISTERED]
    # Every sign of life, and the end of the hold, offers an unreached host again.
    for event in (ReachEvent.REGISTERED, ReachEvent.HEARD, ReachEvent.HOLD_EXPIRED):
        assert next_reach(Reach.UNREACHED, event) in OFFERED


@pytest.mark.parametrize("error", [DEAD_AGENT, NotFound("no agent registered as 'h1'")])
def test_a_host_no_launch_could_reach_is_offered_again_after_its_next_heartbeat(
        hm: HostManager, backend: FakeBackend, error: Exception) -> None:
    assert offered(hm) == {"h1", "h2"}
    unreach(hm, backend, error=error)
    assert offered(hm) == {"h2"}
    # Still registered: its capacity counts and it is shown connected.
    assert connected(hm) == {"h1": True, "h2": True}
    assert hm.cluster_capacity()[0] == Resources(6, 6144, 20_000)
    backend.heartbeat("h2")  # another host's heartbeat changes nothing
    assert offered(hm) == {"h2"}
    backend.heartbeat("h1")
    assert offered(hm) == {"h1", "h2"}
    assert hm.launch("h1", [spec(2)]) == []


def test_a_plain_launch_failure_does_not_hold_the_host(
        hm: HostManager, backend: FakeBackend) -> None:
    backend.failure = ConnectionError("nothing the backend mapped")
    (failure,) = hm.launch("h1", [spec(1)])
    assert not failure.unreached
    (failure,) = hm.launch("h2", [spec(2, cpu=8)])  # no room: the host is there
    assert not failure.unreached
    assert offered(hm) == {"h1", "h2"}


def test_a_reregistration_ends_the_hold(hm: HostManager, backend: FakeBackend) -> None:
    unreach(hm, backend)
    backend.add_host("h1", cpu=4, mem_mb=4096)  # the agent restarted and registered again
    assert offered(hm) == {"h1", "h2"}


def test_a_heartbeat_does_not_bring_back_a_host_reported_gone(
        hm: HostManager, backend: FakeBackend) -> None:
    unreach(hm, backend)
    backend.remove_host("h1")  # its heartbeats timed out
    hm.intake.host_seen("h1")  # a late heartbeat: the backend would ask it to re-register
    assert offered(hm) == {"h2"} and connected(hm)["h1"] is False
    backend.add_host("h1", cpu=4, mem_mb=4096)
    assert offered(hm) == {"h1", "h2"}


def test_a_host_never_heard_from_is_offered_again_after_the_hold(
        hm: HostManager, backend: FakeBackend, clock: FakeClock) -> None:
    # Backends that report no heartbeats (Mesos, Kubernetes) rely on this.
    unreach(hm, backend)
    clock.advance(CONFIG.unreached_hold - 1)
    hm.prune()
    assert offered(hm) == {"h2"}
    unreach(hm, backend)  # failing again holds it from now
    clock.advance(2)
    hm.prune()
    assert offered(hm) == {"h2"}
    clock.advance(CONFIG.unreached_hold)
    hm.prune()
    assert offered(hm) == {"h1", "h2"}


def test_runs_on_an_unreached_host_stay_booked_and_can_be_killed(
        hm: HostManager, backend: FakeBackend) -> None:
    assert hm.launch("h1", [spec(0, cpu=1)]) == []
    backend.report(rid(0), TaskState.RUNNING)
    unreach(hm, backend)
    hm.kill([rid(0)], 0.0)
    assert backend.killed == [("h1", [rid(0)], 0.0)]


def test_our_agents_heartbeats_and_reports_are_signs_of_life() -> None:
    backend = LocalBackend(heartbeat_secs=60, heartbeat_timeout_secs=600)
    recorder = Recorder(backend)
    backend.start(recorder)
    try:
        backend.agent_registered(pb.AgentInfo(hostname="h1", agent_id="a1",
                                              address="127.0.0.1:1"))
        assert backend.agent_seen("h1", "a1")
        assert not backend.agent_seen("h1", "another-agent")  # must register again
        assert not backend.agent_seen("h2", "a2")
        assert recorder.seen == ["h1"]
    finally:
        backend.stop()
