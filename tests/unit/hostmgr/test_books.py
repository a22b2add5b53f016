"""The books stay exact under any mix of leases, reservations, launches, kills and ends;
and the host manager is what the ports say it is."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from peloton.core.errors import Unavailable
from peloton.core.lifecycle.host_reach import Reach
from peloton.core.model.constraints import Label
from peloton.core.model.resources import EPSILON, ZERO
from peloton.core.ports import EventStream, HostManagerPort
from peloton.core.states import HostState, TaskState
from peloton.hostmgr.app import HostManager
from peloton.hostmgr.backends.base import HostEventListener
from peloton.hostmgr.registry import HostRegistry
from peloton.hostmgr.servicers import HostAdmin
from peloton.storage import StoreOptions, open_store
from tests.harness.fake_host_backend import FakeBackend
from tests.unit.hostmgr.conftest import CONFIG, connect, reservation, rid, spec

HOSTS = ("h1", "h2", "h3")
step = st.one_of(
    st.tuples(st.just("reserve"), st.sampled_from(HOSTS), st.integers(0, 15)),
    st.tuples(st.just("launch"), st.sampled_from(HOSTS), st.integers(0, 15)),
    st.tuples(st.just("kill"), st.just(""), st.integers(0, 15)),
    st.tuples(st.just("end"), st.just(""), st.integers(0, 15)),
    st.tuples(st.just("drain"), st.sampled_from(HOSTS), st.just(0)),
    st.tuples(st.just("unreach"), st.sampled_from(HOSTS), st.integers(0, 15)),
    st.tuples(st.just("heartbeat"), st.sampled_from(HOSTS), st.just(0)),
)


def check_books(reg: HostRegistry) -> None:
    """Every host's totals equal the sum of what its runs and reservations hold."""
    for rec in reg.hosts.values():
        claims = [r.claim for r in rec.runs.values()] + list(rec.reserved.values())
        total = ZERO
        for claim in claims:
            total = total + claim.resources
        assert rec.allocated.approx_eq(total)
        assert rec.used_ports == {p for c in claims for p in c.ports}
        assert rec.task_labels == dict(Counter(lb for c in claims for lb in c.labels))
        offerable = (rec.connected and rec.reach is not Reach.UNREACHED
                     and rec.state is HostState.UP and rec.lease_id is None
                     and rec.available().cpu > EPSILON)
        assert (rec.hostname in reg.offerable) == offerable
        assert (rec.hostname in reg.held) == (rec.reach is Reach.UNREACHED)
    assert {r.run_id for rec in reg.hosts.values() for r in rec.runs.values()} == set(reg.runs)


@settings(max_examples=60, deadline=None)
@given(st.lists(step, max_size=40))
def test_books_match_what_is_held(steps: list[tuple[str, str, int]]) -> None:
    store = open_store("sqlite://", StoreOptions(bootstrap=True))
    backend = FakeBackend()
    for name in HOSTS:
        backend.add_host(name, cpu=2, mem_mb=1000)
    hm = connect(HostManager(store, backend, CONFIG))
    for action, host, i in steps:
        labels = (Label("i", str(i % 3)),)
        if action == "reserve":
            lease = hm.acquire_hosts()
            hm.commit_lease(lease.lease_id, [reservation(host, i, cpu=0.5, mem=100,
                                                         ports=(31000 + i % 10,), labels=labels)])
        elif action == "launch":
            hm.launch(host, [spec(i, cpu=0.5, mem=100, ports=(31000 + i % 10,), labels=labels)])
        elif action == "kill":
            hm.kill([rid(i)], 0.0)
        elif action == "end" and rid(i) in backend.runs:
            backend.report(rid(i), TaskState.SUCCEEDED)
        elif action == "drain":
            hm.start_maintenance(host)
        elif action == "unreach":  # the agent refuses connections
            backend.failure = Unavailable(f"agent {host}: connection refused")
            hm.launch(host, [spec(i, cpu=0.5, mem=100, labels=labels)])
            backend.failure = None
        elif action == "heartbeat":
            backend.heartbeat(host)
        hm.settle()
        check_books(hm.registry)
    store.close()


def test_the_host_manager_implements_the_ports(hm: HostManager) -> None:
    port: HostManagerPort = hm
    stream: EventStream = port.subscribe("jobmgr")
    listener: HostEventListener = hm.intake
    admin: HostAdmin = hm
    assert stream.poll(1, 0) == [] and listener is hm.intake and admin is hm
