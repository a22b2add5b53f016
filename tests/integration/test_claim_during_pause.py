"""A new leader's claim does not wait for a leader paused inside a write transaction.

Every fenced write holds its role's row of `leader_epochs` FOR SHARE until it commits;
a new leader's claim updates that row.  A leader SIGSTOPped inside a write transaction
held the claim, and so the new leader's whole start, for as long as it stayed paused
(20 s in the issue's run; for ever here, it is never resumed before the claim is due).
Now the claim ends the paused term's session after a moment (storage/sql/leaders.py) and
the paused write, when its process resumes, is refused and stores nothing.

The old leader is a real process writing through the store's fenced path; it stops
itself (SIGSTOP) right after its write transaction passed the fence check, which is the
moment the issue describes.  Bounded: the claim is given 15 s; the test stops only the
process it started.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator

import pytest

from peloton.core.errors import NotFound
from peloton.storage import Store, StoreOptions, open_store
from tests.harness.postgres import PostgresServer
from tests.harness.procs import REPO, OutputTail, stop, wait_for

pytestmark = [pytest.mark.postgres]

CLAIM_BOUND = 15.0

PAUSED_LEADER = r"""
import os, signal, sys
from peloton.core.model.respool import ResourcePool, ResourcePoolConfig
from peloton.storage import open_store
from peloton.storage.sql import database

store = open_store(sys.argv[1])
epoch = store.claim_leadership("jobmgr", 5, "old")
checked = database.Database._check_fence

def check_then_pause(self, conn, mine):
    checked(self, conn, mine)
    if not getattr(check_then_pause, "paused", False):
        check_then_pause.paused = True
        print("IN TRANSACTION", flush=True)
        os.kill(os.getpid(), signal.SIGSTOP)  # the pause, inside the write transaction

database.Database._check_fence = check_then_pause
fenced = store.with_fencing("jobmgr", lambda: epoch)
try:
    fenced.create_resource_pool(ResourcePool("by-old", ResourcePoolConfig(name="by-old",
                                                                          parent_id="root")))
    print("WROTE", flush=True)
except Exception as exc:
    print("REFUSED", type(exc).__name__, flush=True)
"""


@pytest.fixture
def store_url(postgres_server: PostgresServer) -> Iterator[str]:
    name = f"claim_{uuid.uuid4().hex[:10]}"
    url = postgres_server.create_database(name)
    open_store(url, StoreOptions(bootstrap=True)).close()
    yield url
    postgres_server.drop_database(name)


def test_a_claim_ends_a_paused_write_transaction_instead_of_waiting_for_it(
        store_url: str) -> None:
    old = subprocess.Popen([sys.executable, "-c", PAUSED_LEADER, store_url], cwd=REPO,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    tail = OutputTail(old)
    store: Store = open_store(store_url)
    claimed: list[int] = []
    try:
        tail.wait_for("IN TRANSACTION", 30)
        claim = threading.Thread(target=lambda: claimed.append(
            store.claim_leadership("jobmgr", 9, "new")), daemon=True)
        claim.start()
        claim.join(CLAIM_BOUND)
        assert claimed == [9], "the claim waited on the paused leader's transaction"
        old.send_signal(signal.SIGCONT)
        wait_for(lambda: any(ln.startswith(("REFUSED", "WROTE")) for ln in tail.lines), 30,
                 "the resumed leader's write to end")
        assert any(ln.startswith("REFUSED") for ln in tail.lines), tail.lines[-10:]
        with pytest.raises(NotFound):
            store.get_resource_pool("by-old")
        assert store.leader_epoch("jobmgr") == 9
    finally:
        if old.poll() is None:
            old.send_signal(signal.SIGCONT)
        stop(old, signal.SIGTERM, timeout=10)
        store.close()
