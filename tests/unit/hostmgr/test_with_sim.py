"""The host manager over the simulated backend (virtual hosts on a manual clock)."""

from __future__ import annotations

from peloton.core.model.resources import Resources
from peloton.core.states import HostState, TaskState
from peloton.hostmgr.app import HostManager
from peloton.hostmgr.backends.sim import SimBackend
from peloton.hostmgr.backends.sim_clock import ManualClock
from peloton.storage import Store
from tests.unit.hostmgr.conftest import CONFIG, connect, reservation, rid, spec

S = TaskState


def sim_manager(store: Store, hosts: int) -> tuple[HostManager, ManualClock]:
    clock = ManualClock()
    sim = SimBackend(hosts=hosts, capacity=Resources(cpu=2, mem_mb=1024, disk_mb=1024),
                     task_secs=1.0, start_secs=0.1, clock=clock, resend_secs=5.0)
    hm = connect(HostManager(store, sim, CONFIG))
    clock.run_due()  # hosts are announced from the clock
    return hm, clock


def test_place_launch_run_and_acknowledge(store: Store) -> None:
    hm, clock = sim_manager(store, hosts=3)
    lease = hm.acquire_hosts()
    assert sorted(o.hostname for o in lease.offers) == ["sim-00000", "sim-00001", "sim-00002"]
    hm.commit_lease(lease.lease_id, [reservation("sim-00000", i, cpu=1, mem=10) for i in range(2)])
    assert hm.launch("sim-00000", [spec(i, cpu=1, mem=10) for i in range(2)]) == []
    assert "no room" in hm.launch("sim-00000", [spec(2, cpu=1, mem=10)])[0].reason
    stream = hm.subscribe("jobmgr")
    clock.advance(2.0)
    events = stream.poll(100, 0)
    assert [e.state for e in events if e.run_id == rid(0)] == [S.STARTING, S.RUNNING, S.SUCCEEDED]
    assert hm.launch("sim-00000", [spec(2, cpu=1, mem=10)]) == []  # room again
    stream.acknowledge(events[-1].offset)
    hm.settle()
    clock.advance(10.0)  # past the resend period: nothing acknowledged comes back
    assert [e.run_id for e in stream.poll(100, 0)] == [rid(2)] * 3


def test_drain_a_simulated_host(store: Store) -> None:
    hm, clock = sim_manager(store, hosts=2)
    assert hm.launch("sim-00001", [spec(0, cpu=1, mem=10)]) == []
    clock.advance(0.5)
    hm.start_maintenance("sim-00001")
    assert hm.draining_runs() == [("sim-00001", rid(0))]
    hm.kill([rid(0)], 0.0)
    clock.run_due()
    hm.settle()
    assert hm.host_states()["sim-00001"] is HostState.DOWN
    assert [o.hostname for o in hm.acquire_hosts().offers] == ["sim-00000"]


def test_a_thousand_runs_stream_in_order(store: Store) -> None:
    hm, clock = sim_manager(store, hosts=500)
    stream = hm.subscribe("jobmgr")
    lease = hm.acquire_hosts()
    placed = [reservation(o.hostname, i * 2 + k, cpu=1, mem=10)
              for i, o in enumerate(lease.offers) for k in range(2)]
    hm.commit_lease(lease.lease_id, placed)
    for i, offer in enumerate(lease.offers):
        assert hm.launch(offer.hostname, [spec(i * 2 + k, cpu=1, mem=10) for k in range(2)]) == []
    assert hm.acquire_hosts().offers == ()  # every cpu is taken
    clock.advance(1.5)
    events = stream.poll(10_000, 0)
    assert len(events) == 3000 and [e.offset for e in events] == list(range(1, 3001))
    stream.acknowledge(events[-1].offset)
    hm.settle()
    assert len(hm.events) == 0 and hm.registry.runs == {}
    assert len(hm.acquire_hosts().offers) == 500
    clock.advance(20.0)  # the simulator re-delivers nothing: every update was acknowledged
    assert stream.poll(10, 0) == []
