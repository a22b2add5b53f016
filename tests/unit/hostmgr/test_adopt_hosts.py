"""Adoption of many hosts' runs in one call (a job manager's recovery): the same result as
one `adopt` per host, directly and over gRPC (AdoptHosts)."""

from __future__ import annotations

from collections.abc import Callable

from peloton.core.states import TaskState
from peloton.hostmgr.app import HostManager
from tests.harness.fake_host_backend import FakeBackend
from tests.unit.hostmgr.conftest import CONFIG, rid, spec


def free(hm: HostManager) -> dict[str, tuple[float, int]]:
    """Each offered host's free cpu and its first free port."""
    lease = hm.acquire_hosts()
    hm.release_lease(lease.lease_id)
    return {o.hostname: (o.available.cpu, o.ports[0].begin if o.ports else 0)
            for o in lease.offers}


def test_adopting_many_hosts_books_each_run_once_and_reconciles_only_the_unknown(
        make_hm: Callable[..., HostManager], backend: FakeBackend) -> None:
    first = make_hm()
    first.launch("h1", [spec(0, cpu=3, ports=(31000,))])
    first.launch("h2", [spec(1, cpu=1)])
    backend.report(rid(0), TaskState.RUNNING)
    backend.report(rid(1), TaskState.RUNNING)
    backend.stop()

    second = make_hm(CONFIG)
    second.reconcile()  # what start() asks for: runs re-reported, their specs unknown
    before = len(backend.reconciled)
    runs = {"h1": [spec(0, cpu=3, ports=(31000,))], "h2": [spec(1, cpu=1), spec(2, cpu=1)]}
    second.adopt_hosts(runs)
    # The reported runs hold their spec's room again; run 2, which no host reported, was
    # booked and reconciled (alone, in one call), and came back LOST, which freed it.
    assert backend.reconciled[before:] == [[rid(2)]]
    assert free(second) == {"h1": (1, 31001), "h2": (1, 31000)}
    second.adopt_hosts(runs)  # idempotent: nothing booked twice, the LOST run stays ended
    assert free(second) == {"h1": (1, 31001), "h2": (1, 31000)}
    assert backend.reconciled[before + 1:] == []
    second.kill([rid(0)], 0.0)
    assert backend.killed[-1] == ("h1", [rid(0)], 0.0)


def test_adopting_many_hosts_ends_as_adopting_each(
        make_hm: Callable[..., HostManager], backend: FakeBackend) -> None:
    hm = make_hm()
    hm.launch("h1", [spec(0, cpu=2)])
    backend.report(rid(0), TaskState.RUNNING)
    backend.stop()
    runs = {"h1": [spec(0, cpu=2, ports=(31000,)), spec(3, cpu=1)], "h2": [spec(4, cpu=2)]}
    results = []
    for adopt_each in (True, False):  # one restarted host manager, then another
        backend.stop()
        hm = make_hm(CONFIG)
        hm.reconcile()
        if adopt_each:
            for host, specs in runs.items():
                hm.adopt(host, specs)
        else:
            hm.adopt_hosts(runs)
        results.append(free(hm))
    assert results[0] == results[1] == {"h1": (2, 31001), "h2": (2, 31000)}


def test_a_reconcile_leaves_out_runs_last_heard_in_the_state_the_caller_holds(
        make_hm: Callable[..., HostManager], backend: FakeBackend) -> None:
    hm = make_hm()
    hm.launch("h1", [spec(0), spec(1)])
    backend.report(rid(0), TaskState.RUNNING)
    backend.report(rid(1), TaskState.RUNNING)
    backend.reconciled.clear()
    # Run 0 is held as RUNNING (left out), run 1 as STARTING (its RUNNING is news to the
    # caller), run 2 is unknown here and run 3 is held without a state: all but run 0 go.
    hm.reconcile([rid(0), rid(1), rid(2), rid(3)],
                 [TaskState.RUNNING, TaskState.STARTING, TaskState.RUNNING, None])
    assert backend.reconciled == [[rid(1), rid(2), rid(3)]]
    hm.reconcile([rid(0)], [TaskState.RUNNING])  # nothing to ask: no call at all
    assert backend.reconciled == [[rid(1), rid(2), rid(3)]]
    hm.reconcile([rid(0)])  # without expected states: re-reported as before
    assert backend.reconciled[-1] == [rid(0)]
