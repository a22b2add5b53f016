"""A leader paused past its ZooKeeper session is refused by the store when it resumes.

The old leader is a real process (a ZooKeeper candidate of the resource
manager role writing through `Store.with_fencing`, as the daemons do).  It
passes its in-process fence check, is SIGSTOPped - the GC pause, frozen VM
or `kill -STOP` of the issue - long enough for its session to expire; a new
leader is elected, claims a newer epoch in the store and writes; then the old
one is resumed and makes the write it was about to make.  The in-process
check already passed before the pause, so only the store can stop it: the
write is refused with FencedOut and nothing of it is stored.

Before the store fence (the in-process check only), that write landed.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from peloton.common.leader import RESOURCE_MANAGER, Candidate, LeaderId, new_client
from peloton.core.model.respool import ResourcePool, ResourcePoolConfig
from peloton.storage import Store, StoreOptions, open_store
from tests.harness.postgres import PostgresServer
from tests.harness.procs import REPO, OutputTail, stop, wait_for

pytestmark = [pytest.mark.zookeeper]

SESSION = 3.0

OLD_LEADER = r"""
import sys
import threading
from peloton.common.fencing import Fence
from peloton.common.leader import RESOURCE_MANAGER, Candidate, LeaderId, new_client
from peloton.core.model.respool import ResourcePool, ResourcePoolConfig
from peloton.storage import open_store

zk, root, url = sys.argv[1], sys.argv[2], sys.argv[3]
lock = threading.Lock()

def say(*parts):
    # One line per call even when kazoo's thread reports LOST while the main thread
    # reports a write (print's separate writes would interleave mid-line).
    with lock:
        sys.stdout.write(" ".join(str(p) for p in parts) + "\n")
        sys.stdout.flush()

store = open_store(url)
box = {}
client = new_client(zk, session_timeout=3.0, use_gevent=False)
client.start(10)

def gained(epoch):
    box["epoch"] = store.claim_leadership("resmgr", epoch, "old")
    say("GAINED", box["epoch"])

candidate = Candidate(client, RESOURCE_MANAGER, LeaderId("old", "127.0.0.1", 1, 2), root=root,
                      on_gained=gained, on_lost=lambda: say("LOST"))
candidate.start()
fence = Fence(lambda: candidate.epoch == box.get("epoch"), "resmgr term")
# The term's store: the epoch it was given at its start, as the daemons' terms hold it.
fenced = store.with_fencing("resmgr", lambda: box.get("epoch"))
for line in sys.stdin:
    verb, name = line.split()
    if verb == "check":
        say("CHECKED", fence.valid)
        continue
    try:
        fenced.create_resource_pool(ResourcePool(name, ResourcePoolConfig(name=name, parent_id="root")))
        say("WROTE", name)
    except Exception as exc:
        say("REFUSED", name, type(exc).__name__, str(exc).replace("\n", " "))
"""


def pool(name: str) -> ResourcePool:
    return ResourcePool(name, ResourcePoolConfig(name=name, parent_id="root"))


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'state.db'}"
        open_store(url, StoreOptions(bootstrap=True)).close()
        yield url
        return
    server: PostgresServer = request.getfixturevalue("postgres_server")
    name = f"fence_{uuid.uuid4().hex[:10]}"
    url = server.create_database(name)
    open_store(url, StoreOptions(bootstrap=True)).close()
    yield url
    server.drop_database(name)


def test_paused_leader_resumes_and_its_write_is_refused_by_the_store(zookeeper: str, store_url: str) -> None:
    root = f"/fence-{uuid.uuid4().hex[:10]}"
    old = subprocess.Popen([sys.executable, "-c", OLD_LEADER, zookeeper, root, store_url], cwd=REPO,
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
    tail = OutputTail(old)
    store: Store = open_store(store_url)
    client = new_client(zookeeper, session_timeout=SESSION, use_gevent=False)
    new: Candidate | None = None
    assert old.stdin is not None
    try:
        old_epoch = int(tail.wait_for("GAINED", 20).split()[1])
        old.stdin.write("write before-pause\ncheck now\n")
        old.stdin.flush()
        tail.wait_for("WROTE before-pause", 10)
        assert "CHECKED True" in tail.wait_for("CHECKED", 10)  # passed its fence: about to write

        old.send_signal(signal.SIGSTOP)
        client.start(10)
        gained: list[int] = []
        new = Candidate(client, RESOURCE_MANAGER, LeaderId("new", "127.0.0.1", 3, 4), root=root,
                        on_gained=gained.append, on_lost=lambda: None)
        new.start()
        wait_for(lambda: bool(gained), SESSION * 3 + 10, "the new leader, once the paused one's "
                 "session expired")
        new_epoch = store.claim_leadership("resmgr", gained[0], "new")
        assert new_epoch > old_epoch
        store.with_fencing("resmgr", lambda: new_epoch).create_resource_pool(pool("by-new-leader"))

        old.stdin.write("write after-pause\n")  # queued while stopped: the first thing it does
        old.stdin.flush()
        old.send_signal(signal.SIGCONT)
        refused = tail.wait_for("after-pause", 20)
        assert refused.startswith("REFUSED after-pause FencedOut"), refused
        assert "newer leader" in refused
        names = {p.pool_id for p in store.get_resource_pools()}
        assert names == {"before-pause", "by-new-leader"}
        assert store.leader_epoch("resmgr") == new_epoch
    finally:
        if new is not None:
            new.stop()
        client.stop()
        client.close()
        old.send_signal(signal.SIGCONT)
        stop(old, signal.SIGKILL)
        store.close()
