"""Job manager membership and partition ownership against a real ZooKeeper
(peloton/common/membership.py; docs/design/all-active-jobmgr.md).

Every member's callbacks append to one shared log; `check_one_holder` replays it and fails
if a partition ever had two holders.  Session timeouts are 3 s; every wait polls with a
deadline.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from migrations import sql_runner
from peloton.common.leader import JOB_MANAGER, LeaderId, new_client
from peloton.common.member_directory import MemberDirectory
from peloton.common.membership import PartitionMember, role_path
from peloton.core.partitions import assign, fence_name, moves, partition_of
from peloton.storage import Store, open_store
from peloton.storage.leader_store import FencedOut
from peloton.storage.partition_fences import PartitionFences
from tests.contract import factories as f
from tests.harness.procs import REPO, OutputTail, stop, wait_for
from tests.harness.zk_nodes import ZkNode, started_nodes, unique_root
from tests.harness.zookeeper import expire_session

pytestmark = pytest.mark.zookeeper

SESSION = 3.0
FAILOVER = SESSION * 2 + 2  # detection (<= session) + claim, with slack for a slow machine
COUNT = 16


class Log:
    """Callbacks of every member, in the order they ran."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, int, int | None]] = []
        self._lock = threading.Lock()

    def add(self, kind: str, member: str, partition: int, epoch: int | None = None) -> None:
        with self._lock:
            self.events.append((kind, member, partition, epoch))

    def check_one_holder(self) -> None:
        holders: dict[int, str] = {}
        for kind, member, partition, _ in list(self.events):
            if kind == "acquire":
                assert partition not in holders, f"{member} acquired {partition} held by " \
                                                 f"{holders.get(partition)}"
                holders[partition] = member
            else:
                assert holders.pop(partition) == member

    def acquired(self, member: str, since: int = 0) -> list[tuple[int, int | None]]:
        return [(p, e) for k, m, p, e in list(self.events)[since:]
                if k == "acquire" and m == member]

    def released(self, member: str, since: int = 0) -> list[int]:
        return [p for k, m, p, _ in list(self.events)[since:] if k == "release" and m == member]


class Node(ZkNode):
    """One job manager's membership; with `fences`, it claims each partition in the store."""

    def __init__(self, hosts: str, root: str, member_id: str, log: Log,
                 store: Store | None = None, bulk: bool = False,
                 bulk_acquire: bool = False) -> None:
        super().__init__(hosts, SESSION)
        self.id = member_id
        self.bulk_calls: list[list[int]] = []
        self.acquire_calls: list[dict[int, int]] = []
        #: Partitions the bulk acquire says a newer owner holds in the store.
        self.refuse: set[int] = set()
        self.fences = PartitionFences(store, member_id, count=COUNT,
                                      live=lambda: self.member.connected) if store else None
        self.log = log
        self.component = self.member = PartitionMember(
            self.client, member_id, LeaderId(member_id, "127.0.0.1", 5291, 5392),
            on_acquire=self._acquire, on_release=self._release,
            on_release_many=self._release_many if bulk else None,
            on_acquire_many=self._acquire_many if bulk_acquire else None, count=COUNT,
            root=root, recheck=1.0)

    def _acquire_many(self, epochs: dict[int, int]) -> list[int]:
        self.acquire_calls.append(dict(epochs))
        for partition, epoch in sorted(epochs.items()):  # each is released if refused
            self.log.add("acquire", self.id, partition, epoch)
        return sorted(self.refuse & set(epochs))

    def _acquire(self, partition: int, epoch: int) -> None:
        if self.fences is not None:
            self.fences.claim(partition, epoch)
        self.log.add("acquire", self.id, partition, epoch)

    def _release(self, partition: int) -> None:
        self.log.add("release", self.id, partition)
        if self.fences is not None:
            self.fences.release(partition)

    def _release_many(self, partitions: list[int]) -> None:
        self.bulk_calls.append(list(partitions))
        for partition in partitions:
            self._release(partition)


@pytest.fixture
def root() -> str:
    return unique_root()


@pytest.fixture
def log() -> Log:
    return Log()


@pytest.fixture
def make_node(zookeeper: str, root: str, log: Log) -> Iterator[Callable[..., Node]]:
    def build(member_id: str, **kwargs: Any) -> Node:
        return Node(zookeeper, root, member_id, log, **kwargs)

    with started_nodes(build) as make:
        yield make
    log.check_one_holder()


def settled(nodes: list[Node]) -> bool:
    """Every node holds exactly what the assignment of these nodes gives it, and a node with
    fences has claimed each in the store too: a partition is `held` from the moment its node
    is created, before `on_acquire` claims it in the store (a busy CI machine once read
    settled in between and the fenced write that followed was refused PartitionNotHeld)."""
    want = assign([n.id for n in nodes], COUNT)
    return all(n.member.held == want.owned_by(n.id)
               and (n.fences is None or n.fences.held == want.owned_by(n.id)) for n in nodes)


def test_members_split_every_partition_between_them(make_node: Callable[..., Node],
                                                    root: str, log: Log) -> None:
    nodes = [make_node(f"jm-{i}:5392") for i in range(3)]
    wait_for(lambda: settled(nodes), 10, "the partitions to be split")
    held = [n.member.held for n in nodes]
    assert sum(len(h) for h in held) == COUNT and frozenset().union(*held) == set(range(COUNT))
    client = nodes[0].client
    assert sorted(client.get_children(role_path(root, JOB_MANAGER, "members"))) == \
        sorted(n.id for n in nodes)
    for node in nodes:
        for partition in node.member.held:
            data, stat = client.get(role_path(root, JOB_MANAGER, "partitions", str(partition)))
            assert data.decode() == node.id == node.member.owner(partition)
            assert node.member.epoch(partition) == stat.czxid
    assert client.get(role_path(root, JOB_MANAGER, "partitions"))[0] == str(COUNT).encode()
    assert nodes[1].member.member(nodes[0].id) == LeaderId(nodes[0].id, "127.0.0.1", 5291, 5392)


def test_a_joiner_takes_only_its_partitions_from_the_others(make_node: Callable[..., Node],
                                                           log: Log) -> None:
    nodes = [make_node(f"jm-{i}:5392") for i in range(2)]
    wait_for(lambda: settled(nodes), 10, "two members to settle")
    before = assign([n.id for n in nodes], COUNT)
    since = len(log.events)  # (while the first two settled, one may briefly have held all)
    joiner = make_node("jm-new:5392")
    wait_for(lambda: settled([*nodes, joiner]), FAILOVER, "the joiner to take its partitions")
    moved = moves(before, assign([n.id for n in [*nodes, joiner]], COUNT))
    assert sorted(p for p, _ in log.acquired(joiner.id)) == sorted(m.partition for m in moved)
    for node in nodes:  # each gave up exactly the partitions that moved from it, nothing else
        assert sorted(log.released(node.id, since)) == sorted(m.partition for m in moved
                                                              if m.source == node.id)
        assert log.acquired(node.id, since) == []
    log.check_one_holder()


def test_a_member_that_stops_hands_its_partitions_over_before_its_session_ends(
        make_node: Callable[..., Node], log: Log) -> None:
    nodes = [make_node(f"jm-{i}:5392") for i in range(3)]
    wait_for(lambda: settled(nodes), 10, "three members to settle")
    leaver, rest = nodes[0], nodes[1:]
    theirs = leaver.member.held
    assert theirs
    since = len(log.events)
    leaver.member.stop()  # graceful: SIGTERM's path; the client (and session) stays up
    assert leaver.member.held == frozenset() and sorted(log.released(leaver.id, since)) == \
        sorted(theirs)
    # Well within the session timeout: the others did not wait for ZooKeeper to expire it.
    wait_for(lambda: settled(rest), SESSION / 2, "the others to take the leaver's partitions")
    log.check_one_holder()


def test_a_leaver_with_a_bulk_release_hands_everything_over_in_one_call(
        make_node: Callable[..., Node], log: Log) -> None:
    """One call for all its partitions: the job manager then waits once for a launch round
    in flight, not once per partition (64 waits made a SIGTERM'd member's handover outlast
    its stop timeout under load)."""
    leaver = make_node("jm-0:5392", bulk=True)
    other = make_node("jm-1:5392", bulk_acquire=True)
    wait_for(lambda: settled([leaver, other]), 10, "two members to settle")
    theirs = leaver.member.held
    assert len(theirs) > 1
    leaver.bulk_calls.clear()
    other.acquire_calls.clear()
    leaver.member.stop()
    assert leaver.bulk_calls == [sorted(theirs)]
    wait_for(lambda: settled([other]), SESSION / 2, "the other to take the leaver's partitions")
    # Their nodes went in one transaction, so the other took them all in one call.
    assert [sorted(c) for c in other.acquire_calls] == [sorted(theirs)]
    log.check_one_holder()


def test_a_member_takes_a_leavers_partitions_over_in_one_call_and_lets_refused_ones_go(
        make_node: Callable[..., Node], log: Log) -> None:
    """One call for all the partitions taken over: the job manager claims them, announces
    them and recovers their jobs in one pass (one per partition cost a dead member's 30
    partitions 1-3 s).  A partition the call could not take (a newer owner in the store) is
    released, its node deleted, and claimed again after a backoff."""
    taker = make_node("jm-0:5392", bulk_acquire=True)
    wait_for(lambda: settled([taker]), 10, "the first member to hold everything")
    assert [sorted(c) for c in taker.acquire_calls] == [list(range(COUNT))]
    leaver = make_node("jm-1:5392")
    wait_for(lambda: settled([taker, leaver]), 10, "two members to settle")
    theirs = sorted(leaver.member.held)
    assert len(theirs) > 1
    taker.acquire_calls.clear()
    taker.refuse = {theirs[0]}
    since = len(log.events)
    # The leaver's session closes (as a dead process's expires): ZooKeeper deletes all its
    # nodes in one transaction, so the taker finds every partition free at once.
    leaver.client.stop()
    wait_for(lambda: theirs[0] in log.released(taker.id, since), SESSION * 2,
             "the refused one let go")
    first = taker.acquire_calls[0]
    assert sorted(first) == theirs  # all at once, each with its node's epoch
    assert dict(log.acquired(taker.id, since)[:len(theirs)]) == first
    taker.refuse = set()
    wait_for(lambda: settled([taker]), 30, "the refused partition claimed again")
    # Claimed again after a backoff (alone, so through on_acquire), and held.
    assert [p for p, _ in log.acquired(taker.id, since)].count(theirs[0]) >= 2
    log.check_one_holder()


def test_a_dead_members_partitions_move_with_larger_epochs(
        make_node: Callable[..., Node], zookeeper: str, log: Log) -> None:
    a, b = make_node("jm-a:5392"), make_node("jm-b:5392")
    wait_for(lambda: settled([a, b]), 10, "two members to settle")
    old = {p: a.member.epoch(p) for p in a.member.held}
    kept = {p: b.member.epoch(p) for p in b.member.held}
    since = len(log.events)
    expire_session(a.client, zookeeper)
    assert a.member.held == frozenset()  # at once, before its loop even runs
    wait_for(lambda: sorted(log.released(a.id, since)) == sorted(old), SESSION, "a to release all")
    # a reconnects with a new session and rejoins; until then b takes everything.
    wait_for(lambda: settled([a, b]), FAILOVER, "a to rejoin and take its partitions back")
    assert all((a.member.epoch(p) or 0) > (e or 0) for p, e in old.items())
    assert {p: b.member.epoch(p) for p in kept} == kept  # b's partitions never moved
    log.check_one_holder()


def test_a_member_directory_follows_owners_and_members_from_watches(
        make_node: Callable[..., Node], zookeeper: str, log: Log) -> None:
    # The forwarder's owner cache (peloton/common/member_directory.py): once its watches are
    # set, every lookup is answered from memory, and it follows a graceful leave, a
    # session expiry, a joiner, and the loss of its own session.
    nodes = [make_node(f"jm-{i}:5392") for i in range(3)]
    wait_for(lambda: settled(nodes), 10, "three members to settle")
    client = new_client(zookeeper, session_timeout=SESSION, use_gevent=False)
    client.start(10)
    directory = MemberDirectory.of(client, nodes[0].member)
    directory.start()

    def agrees(live: list[Node]) -> bool:
        holders = {p: n.id for n in live for p in n.member.held}
        return set(directory.members()) == {n.id for n in live} and \
            all(directory.owner(p) == holders.get(p) for p in range(COUNT))

    try:
        wait_for(lambda: agrees(nodes), 10, "the directory to see every member and owner")
        reads = directory.reads
        theirs = next(j for j in (f"job-{i}" for i in range(1000))
                      if partition_of(j, COUNT) in nodes[1].member.held)
        mine = next(j for j in (f"job-{i}" for i in range(1000))
                    if partition_of(j, COUNT) in nodes[0].member.held)
        assert directory.address_of(theirs) == "127.0.0.1:5392"  # every node publishes it
        assert directory.address_of(mine) is None  # held by the directory's own member
        nodes[2].member.stop()  # graceful leave
        wait_for(lambda: settled(nodes[:2]) and agrees(nodes[:2]), FAILOVER,
                 "the directory to follow the leave")
        expire_session(nodes[1].client, zookeeper)  # b's partitions go to a, then come back
        wait_for(lambda: settled(nodes[:2]) and agrees(nodes[:2]), FAILOVER * 2,
                 "the directory to follow b's session expiry and rejoin")
        assert directory.reads == reads  # all of it from the watches, no lookup read ZooKeeper
        expire_session(client, zookeeper)  # the directory's own session: its watches re-arm
        joiner = make_node("jm-new:5392")
        wait_for(lambda: settled([*nodes[:2], joiner]) and agrees([*nodes[:2], joiner]),
                 FAILOVER * 2, "the directory to follow a joiner after its own session was lost")
        assert directory.address_of(theirs, fresh=True) == directory.address_of(theirs)
    finally:
        directory.stop()
        client.stop()
        client.close()
    log.check_one_holder()


def test_two_members_with_one_id_never_run_at_once(make_node: Callable[..., Node], log: Log,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    first = make_node("jm-same:5392")
    wait_for(lambda: first.member.held == frozenset(range(COUNT)), 10, "the first to hold all")
    second = make_node("jm-same:5392")
    wait_for(lambda: "earlier session" in caplog.text, 5, "the second to see the first's node")
    assert second.member.held == frozenset() and second.member.assignment is None
    first.member.stop()
    # The first's member node is gone; the second (another session) joins and takes over.
    wait_for(lambda: second.member.held == frozenset(range(COUNT)), FAILOVER,
             "the second to take over")
    log.check_one_holder()


def test_a_configured_partition_count_must_match_the_clusters(
        make_node: Callable[..., Node], zookeeper: str, root: str, log: Log,
        caplog: pytest.LogCaptureFixture) -> None:
    a = make_node("jm-a:5392")
    wait_for(lambda: settled([a]), 10, "a to hold all")
    client = new_client(zookeeper, session_timeout=SESSION, use_gevent=False)
    client.start(10)
    try:
        odd = PartitionMember(client, "jm-odd:5392", LeaderId("odd", "127.0.0.1", 1, 2),
                              on_acquire=lambda p, e: log.add("acquire", "odd", p, e),
                              on_release=lambda p: log.add("release", "odd", p),
                              count=COUNT * 2, root=root, recheck=0.2)
        odd.start()
        wait_for(lambda: f"this job manager is configured with {COUNT * 2}" in caplog.text, 5,
                 "the odd member to refuse the cluster's count")
        members = role_path(root, JOB_MANAGER, "members")
        assert "jm-odd:5392" not in client.get_children(members)
        odd.stop()
    finally:
        client.stop()
        client.close()
    assert a.member.held == frozenset(range(COUNT))


def test_the_store_refuses_the_old_owner_after_a_handover(
        make_node: Callable[..., Node], zookeeper: str, tmp_path: Path, log: Log) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    sql_runner.upgrade(url)
    store = open_store(url)
    try:
        a = make_node("jm-a:5392", store=store)
        wait_for(lambda: settled([a]), 10, "a to hold all, claimed in the store")
        jid = next(j for j in iter(f.job_id, None)  # a job whose partition moves to b
                   if assign(["jm-a:5392", "jm-b:5392"], COUNT).owner_of_job(j) == "jm-b:5392")
        p = partition_of(jid, COUNT)
        assert a.fences is not None
        old = a.fences.term(p)
        assert old is not None and old.epoch == a.member.epoch(p)
        b = make_node("jm-b:5392", store=store)
        wait_for(lambda: settled([a, b]), FAILOVER, "b to take its partitions")
        assert b.fences is not None
        b.fences.for_job(jid).create_job(jid, f.job_spec(), f.job_runtime())
        assert store.leader_epoch(fence_name(p)) == b.member.epoch(p)
        assert (b.member.epoch(p) or 0) > old.epoch
        with pytest.raises(FencedOut):  # a's term of p was handed over: it writes no more
            old.store.create_job(f.job_id(), f.job_spec(), f.job_runtime())
    finally:
        store.close()


CHILD_MEMBER = """
import sys, time
from peloton.common.leader import LeaderId, new_client
from peloton.common.membership import PartitionMember
client = new_client(sys.argv[1], session_timeout=float(sys.argv[3]), use_gevent=False)
client.start(10)
PartitionMember(client, "jm-child:5392", LeaderId("child", "127.0.0.1", 5291, 5392),
                on_acquire=lambda p, e: print("ACQUIRED", p, e, flush=True),
                on_release=lambda p: None, count=int(sys.argv[4]), root=sys.argv[2]).start()
while True:
    time.sleep(1)
"""


def test_a_killed_members_partitions_move_after_its_session_times_out(
        make_node: Callable[..., Node], zookeeper: str, root: str) -> None:
    child = subprocess.Popen([sys.executable, "-c", CHILD_MEMBER, zookeeper, root, str(SESSION),
                              str(COUNT)], cwd=REPO, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    try:
        out = OutputTail(child)
        out.wait_for("ACQUIRED", 15)
        b = make_node("jm-b:5392")
        want = assign(["jm-child:5392", "jm-b:5392"], COUNT)
        wait_for(lambda: b.member.held == want.owned_by("jm-b:5392"), 10, "b to join")
        child_epochs = {int(line.split()[1]): int(line.split()[2]) for line in list(out.lines)
                        if line.startswith("ACQUIRED")}
        theirs = want.owned_by("jm-child:5392")
        assert theirs and theirs <= set(child_epochs)
        stop(child, signal.SIGKILL)  # no goodbye: ZooKeeper must expire the session
        wait_for(lambda: b.member.held == frozenset(range(COUNT)), FAILOVER,
                 "b to take the killed member's partitions")
        assert all((b.member.epoch(p) or 0) > child_epochs[p] for p in theirs)
    finally:
        stop(child, signal.SIGKILL)
