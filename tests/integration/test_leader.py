"""Leader election, discovery and Aurora ServerSet registration against a real ZooKeeper.

Session timeouts are 3 s; every wait polls with a deadline (no sleeping for a state).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import gevent
import pytest

from peloton.common.discovery import LeaderDiscovery
from peloton.common.leader import JOB_MANAGER, Candidate, LeaderId, leader_path, new_client
from peloton.common.serverset import (
    MEMBER_PREFIX,
    ServerSetMember,
    ServiceInstance,
    members,
    resolve,
    resolve_http_url,
)
from tests.harness.procs import REPO, OutputTail, stop, wait_for
from tests.harness.zk_nodes import ZkNode, started_nodes, unique_root
from tests.harness.zookeeper import ZooKeeperServer, expire_session, running_zookeeper

pytestmark = pytest.mark.zookeeper

SESSION = 3.0
FAILOVER = SESSION * 2 + 2  # detection (<= session) + re-election, with slack for a slow machine


class Node(ZkNode):
    """One daemon's view: a kazoo client, a candidate and a record of its callbacks."""

    def __init__(self, hosts: str, root: str, grpc: int, *, use_gevent: bool = False,
                 fail_first_gain: bool = False) -> None:
        super().__init__(hosts, SESSION, use_gevent=use_gevent)
        self.id = LeaderId(hostname=f"host-{grpc}", ip="127.0.0.1", http=grpc - 100, grpc=grpc)
        self.events: list[tuple[str, int | None]] = []
        self._fail_next_gain = fail_first_gain
        self.component = self.candidate = Candidate(self.client, JOB_MANAGER, self.id, root=root,
                                                    on_gained=self._gained, on_lost=self._lost)

    def _gained(self, epoch: int) -> None:
        self.events.append(("gained", epoch))
        if self._fail_next_gain:
            self._fail_next_gain = False
            raise RuntimeError("recovery failed")

    def _lost(self) -> None:
        self.events.append(("lost", None))

    def count(self, kind: str) -> int:
        return sum(1 for k, _ in self.events if k == kind)


@pytest.fixture
def root() -> str:
    return unique_root()


@pytest.fixture
def make_node(zookeeper: str, root: str) -> Iterator[Callable[..., Node]]:
    def build(grpc: int, hosts: str = zookeeper, **kwargs: Any) -> Node:
        return Node(hosts, root, grpc, **kwargs)

    with started_nodes(build) as make:
        yield make


def only_leader(nodes: list[Node]) -> Node | None:
    leaders = [n for n in nodes if n.candidate.is_leader]
    return leaders[0] if len(leaders) == 1 else None


def test_two_candidates_elect_exactly_one_leader_with_its_id_in_the_znode(
        make_node: Callable[..., Node], root: str) -> None:
    a, b = make_node(5392), make_node(6392)
    wait_for(lambda: only_leader([a, b]) is not None, 10, "one leader")
    leader = only_leader([a, b])
    assert leader is not None
    follower = b if leader is a else a
    data, stat = leader.client.get(leader_path(root, JOB_MANAGER))
    assert json.loads(data) == {"hostname": leader.id.hostname, "ip": "127.0.0.1",
                                "http": leader.id.http, "grpc": leader.id.grpc, "version": ""}
    assert leader.candidate.epoch == stat.mzxid
    assert leader.events == [("gained", stat.mzxid)]
    assert follower.events == [] and follower.candidate.epoch is None
    assert len(leader.client.get_children(leader_path(root, JOB_MANAGER))) == 2


def test_expired_leader_session_fails_over_with_a_larger_epoch(
        make_node: Callable[..., Node], zookeeper: str, root: str) -> None:
    a, b = make_node(5392), make_node(6392)
    wait_for(lambda: only_leader([a, b]) is not None, 10, "one leader")
    old = only_leader([a, b])
    assert old is not None and old.candidate.epoch is not None
    new = b if old is a else a
    old_epoch = old.candidate.epoch
    expire_session(old.client, zookeeper)
    wait_for(lambda: old.count("lost") == 1, SESSION, "the old leader's lost callback")
    wait_for(lambda: new.candidate.is_leader, FAILOVER, "the other candidate to take over")
    new_epoch = new.candidate.epoch
    assert new_epoch is not None and new_epoch > old_epoch
    data, stat = new.client.get(leader_path(root, JOB_MANAGER))
    assert LeaderId.from_json(data) == new.id and stat.mzxid == new_epoch
    # The old leader reconnects with a new session and rejoins as a follower.
    wait_for(lambda: len(new.client.get_children(leader_path(root, JOB_MANAGER))) == 2, FAILOVER,
             "the old leader to rejoin")
    assert not old.candidate.is_leader and old.count("gained") == 1


CHILD_CANDIDATE = """
import sys, time
from peloton.common.leader import JOB_MANAGER, Candidate, LeaderId, new_client
client = new_client(sys.argv[1], session_timeout=float(sys.argv[3]), use_gevent=False)
client.start(10)
Candidate(client, JOB_MANAGER, LeaderId("child", "127.0.0.1", 5292, 5392), root=sys.argv[2],
          on_gained=lambda epoch: print("GAINED", epoch, flush=True), on_lost=lambda: None).start()
while True:
    time.sleep(1)
"""


def test_killed_leader_process_is_replaced_after_its_session_times_out(
        make_node: Callable[..., Node], zookeeper: str, root: str) -> None:
    child = subprocess.Popen([sys.executable, "-c", CHILD_CANDIDATE, zookeeper, root, str(SESSION)],
                             cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        child_epoch = int(OutputTail(child).wait_for("GAINED", 15).split()[1])
        b = make_node(6392)
        wait_for(lambda: len(b.client.get_children(leader_path(root, JOB_MANAGER))) == 2, 5, "b to join")
        assert not b.candidate.is_leader
        stop(child, signal.SIGKILL)  # no goodbye to ZooKeeper: the session must time out
        wait_for(lambda: b.candidate.is_leader, FAILOVER, "b to take over from the killed leader")
        epoch = b.candidate.epoch
        assert epoch is not None and epoch > child_epoch
    finally:
        stop(child, signal.SIGKILL)


def test_closed_leader_hands_over_and_stop_calls_lost(make_node: Callable[..., Node]) -> None:
    a, b = make_node(5392), make_node(6392)
    wait_for(lambda: only_leader([a, b]) is not None, 10, "one leader")
    old = only_leader([a, b])
    assert old is not None
    new = b if old is a else a
    old.candidate.stop()
    assert old.events[-1] == ("lost", None) and not old.candidate.is_leader
    wait_for(lambda: new.candidate.is_leader, FAILOVER, "the other candidate to take over")


def test_resign_hands_leadership_to_the_next_candidate_and_rejoins(
        make_node: Callable[..., Node], root: str) -> None:
    a = make_node(5392)
    wait_for(lambda: a.candidate.is_leader, 10, "a to lead")
    b = make_node(6392)
    wait_for(lambda: len(b.client.get_children(leader_path(root, JOB_MANAGER))) == 2, 5, "b to join")
    a.candidate.resign()
    wait_for(lambda: b.candidate.is_leader, FAILOVER, "b to take over")
    assert [k for k, _ in a.events] == ["gained", "lost"]
    wait_for(lambda: len(b.client.get_children(leader_path(root, JOB_MANAGER))) == 2, 5, "a to rejoin")
    assert not a.candidate.is_leader


def test_failed_gained_callback_resigns_to_the_next_candidate(make_node: Callable[..., Node]) -> None:
    a = make_node(5392, fail_first_gain=True)
    wait_for(lambda: a.count("lost") == 1, 10, "the failed leader to resign")
    b = make_node(6392)
    wait_for(lambda: b.candidate.is_leader or a.candidate.is_leader, 15, "a new leader")
    assert [k for k, _ in a.events[:2]] == ["gained", "lost"]  # every gained has its lost


def test_discovery_follows_the_leader_and_reports_its_epoch(
        make_node: Callable[..., Node], zookeeper: str, root: str) -> None:
    watcher = new_client(zookeeper, session_timeout=SESSION, use_gevent=False)
    watcher.start(10)
    changes: list[LeaderId | None] = []
    discovery = LeaderDiscovery(watcher, JOB_MANAGER, root=root, on_change=changes.append)
    discovery.start()
    try:
        assert discovery.address() is None
        a = make_node(5392)
        first = discovery.wait_for_leader(10)
        assert first == a.id and discovery.address() == "127.0.0.1:5392"
        wait_for(lambda: discovery.epoch == a.candidate.epoch, 5, "discovery to see the epoch")
        b = make_node(6392)
        wait_for(lambda: len(watcher.get_children(leader_path(root, JOB_MANAGER))) == 2, 5, "b to join")
        a.candidate.stop()
        assert discovery.wait_for_leader(FAILOVER, lambda got: got == b.id).grpc_address == "127.0.0.1:6392"
        wait_for(lambda: discovery.epoch == b.candidate.epoch, 5, "the new epoch")
        b.candidate.stop()
        wait_for(lambda: discovery.address() is None, 5, "no leader once every candidate left")
        assert changes == [a.id, b.id, None]
    finally:
        discovery.stop()
        watcher.stop()
        watcher.close()


@pytest.fixture
def private_zookeeper(tmp_path: Path) -> Iterator[ZooKeeperServer]:
    """A server of this test's own, to stop and restart without disturbing the others."""
    with running_zookeeper(tmp_path) as server:
        yield server


def test_leadership_is_lost_while_zookeeper_is_down_and_regained_after(
        private_zookeeper: ZooKeeperServer, make_node: Callable[..., Node]) -> None:
    server = private_zookeeper
    a = make_node(5392, hosts=server.hosts)
    wait_for(lambda: a.candidate.is_leader, 10, "a to lead")
    first_epoch = a.candidate.epoch
    assert first_epoch is not None
    server.stop()
    wait_for(lambda: a.count("lost") == 1, SESSION, "lost leadership on a dropped connection")
    epoch_while_down = a.candidate.epoch
    assert not a.candidate.is_leader and epoch_while_down is None
    server.start()
    wait_for(lambda: a.candidate.is_leader, FAILOVER, "leadership regained after the restart")
    epoch = a.candidate.epoch
    assert epoch is not None and epoch > first_epoch
    assert [k for k, _ in a.events] == ["gained", "lost", "gained"]


def test_gevent_handler_elects_and_fails_over(make_node: Callable[..., Node], zookeeper: str) -> None:
    a, b = make_node(5392, use_gevent=True), make_node(6392, use_gevent=True)

    def gwait(predicate: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            gevent.sleep(0.02)

    gwait(lambda: only_leader([a, b]) is not None, 10, "one leader")
    old = only_leader([a, b])
    assert old is not None
    new = b if old is a else a
    old.candidate.stop()
    gwait(lambda: new.candidate.is_leader, FAILOVER, "the other candidate to take over")
    assert old.events[-1] == ("lost", None)


def test_serverset_member_is_resolved_the_aurora_way_and_survives_session_loss(
        zookeeper: str, root: str) -> None:
    path = f"{root}/aurora/scheduler"
    bridge = new_client(zookeeper, session_timeout=SESSION, use_gevent=False)
    standby = new_client(zookeeper, session_timeout=SESSION, use_gevent=False)
    bridge.start(10)
    standby.start(10)
    first = ServerSetMember(bridge, path, ServiceInstance.for_http("127.0.0.1", 5396))
    second = ServerSetMember(standby, path, ServiceInstance.for_http("127.0.0.2", 5396))
    try:
        first.start()
        second.start()
        assert first.node is not None and first.node.startswith(f"{path}/{MEMBER_PREFIX}")
        data, _ = standby.get(first.node)
        assert json.loads(data) == {"serviceEndpoint": {"host": "127.0.0.1", "port": 5396},
                                    "additionalEndpoints": {"http": {"host": "127.0.0.1", "port": 5396}},
                                    "status": "ALIVE"}
        assert resolve_http_url(standby, path) == "http://127.0.0.1:5396"
        old_node = first.node
        expire_session(bridge, zookeeper)
        wait_for(lambda: first.node not in (None, old_node) and bridge.exists(first.node) is not None,
                 FAILOVER, "the member node to be re-created")
        assert len(members(standby, path)) == 2
        assert resolve(standby, path).service_endpoint.host == "127.0.0.2"  # now the oldest member
        second.stop()
        assert resolve_http_url(standby, path) == "http://127.0.0.1:5396"
    finally:
        first.stop()
        second.stop()
        for client in (bridge, standby):
            client.stop()
            client.close()
