"""Contract: leadership epochs in the store, and writes of a deposed leader refused by the store."""

from __future__ import annotations

import pytest

from peloton.core.errors import Unavailable
from peloton.storage import Store
from peloton.storage.leader_store import FencedOut
from tests.contract import factories as f


def test_claims_keep_the_newest_epoch_and_refuse_an_older_one(store: Store) -> None:
    assert store.leader_epoch("jobmgr") is None
    assert store.claim_leadership("jobmgr", 100, "a") == 100
    assert store.claim_leadership("jobmgr", 100, "a") == 100  # a retried claim
    assert store.claim_leadership("jobmgr", 250, "b") == 250
    with pytest.raises(FencedOut):
        store.claim_leadership("jobmgr", 100, "a")
    assert store.leader_epoch("jobmgr") == 250
    assert store.leader_epoch("resmgr") is None  # roles are independent


def test_many_claims_at_once_each_as_alone(store: Store) -> None:
    store.claim_leadership("p/1", 50, "a")
    store.claim_leadership("p/2", 300, "a")  # a newer owner's claim: refused below
    store.claim_leadership("p/3", 70, "b")   # a retried claim of the same epoch passes
    refused = store.claim_leaderships({"p/0": 100, "p/1": 100, "p/2": 100, "p/3": 70}, "b")
    assert refused == ["p/2"]
    assert [store.leader_epoch(f"p/{n}") for n in range(4)] == [100, 100, 300, 70]
    assert store.claim_leaderships({}, "b") == []
    # The claims fence as single ones do: the old epoch's writes are refused.
    old = store.with_fencing("p/1", lambda: 50)
    with pytest.raises(FencedOut):
        old.create_resource_pool(f.pool("p-0"))
    assert store.claim_leaderships({"p/1": 40}, "a") == ["p/1"]
    assert store.leader_epoch("p/1") == 100


def test_epochs_of_several_roles_are_read_at_once(store: Store) -> None:
    store.claim_leadership("p/1", 50, "a")
    store.claim_leadership("p/2", 300, "b")
    assert store.leader_epochs(["p/0", "p/1", "p/2", "p/1"]) == {"p/1": 50, "p/2": 300}
    assert store.leader_epochs([]) == {}


def test_solo_claims_count_up(store: Store) -> None:
    first = store.claim_leadership("hostmgr", None, "solo")
    assert store.claim_leadership("hostmgr", None, "solo") == first + 1


def test_fenced_writes_pass_while_current_and_are_refused_after_a_newer_claim(store: Store) -> None:
    store.create_resource_pool(f.pool("p-0"))
    old = store.claim_leadership("resmgr", 10, "old")
    stale = store.with_fencing("resmgr", lambda: old)
    stale.create_resource_pool(f.pool("p-1"))  # still the leader: written
    store.claim_leadership("resmgr", 20, "new")
    with pytest.raises(FencedOut) as refused:
        stale.create_resource_pool(f.pool("p-2"))
    assert isinstance(refused.value, Unavailable)  # callers treat it as leadership lost
    assert "newer leader" in refused.value.message
    assert [p.pool_id for p in stale.get_resource_pools()] == ["p-0", "p-1"]  # reads still work
    fresh = store.with_fencing("resmgr", lambda: 20)
    fresh.create_resource_pool(f.pool("p-3"))
    assert {p.pool_id for p in store.get_resource_pools()} == {"p-0", "p-1", "p-3"}


def test_a_fenced_view_without_a_term_writes_nothing(store: Store) -> None:
    store.claim_leadership("jobmgr", 5, "a")
    ended = store.with_fencing("jobmgr", lambda: None)
    with pytest.raises(FencedOut):
        ended.put_host(f.host("h1"))
    assert store.get_hosts() == []
