"""Contract: resource pools, hosts, secrets, volumes and framework info."""

from __future__ import annotations

import dataclasses

import pytest

from peloton.core.errors import AlreadyExists, NotFound
from peloton.core.model.storage_records import VolumeState
from peloton.core.states import HostState
from peloton.storage import Store
from tests.contract import factories as f


def test_resource_pools(store: Store) -> None:
    a, b = f.pool("pool-b"), f.pool("pool-a", parent="pool-b")
    store.create_resource_pool(a)
    store.create_resource_pool(b)
    with pytest.raises(AlreadyExists):
        store.create_resource_pool(a)
    assert store.get_resource_pool("pool-a") == b
    assert [p.pool_id for p in store.get_resource_pools()] == ["pool-a", "pool-b"]
    changed = dataclasses.replace(a, config=dataclasses.replace(a.config, description="d"))
    store.update_resource_pool(changed)
    assert store.get_resource_pool("pool-b") == changed
    with pytest.raises(NotFound):
        store.update_resource_pool(f.pool("nope"))
    store.delete_resource_pool("pool-a")
    store.delete_resource_pool("pool-a")
    with pytest.raises(NotFound):
        store.get_resource_pool("pool-a")


def test_hosts_by_state(store: Store) -> None:
    store.put_host(f.host("h2", HostState.DRAINING))
    store.put_host(f.host("h1"))
    store.put_host(f.host("h3"))
    store.put_host(f.host("h3", HostState.DOWN))  # replaces
    assert [h.hostname for h in store.get_hosts()] == ["h1", "h2", "h3"]
    assert [h.hostname for h in store.get_hosts(HostState.UP)] == ["h1"]
    assert [h.hostname for h in store.get_hosts(HostState.DOWN)] == ["h3"]
    assert store.get_host("h2") == f.host("h2", HostState.DRAINING)
    store.delete_host("h2")
    store.delete_host("h2")
    with pytest.raises(NotFound):
        store.get_host("h2")


def test_secrets(store: Store) -> None:
    jid = f.job_id()
    store.create_secret(f.secret("s2", jid))
    store.create_secret(f.secret("s1", jid))
    store.create_secret(f.secret("s3", f.job_id()))
    with pytest.raises(AlreadyExists):
        store.create_secret(f.secret("s1", jid))
    assert [s.secret_id for s in store.get_secrets_for_job(jid)] == ["s1", "s2"]
    store.update_secret(dataclasses.replace(f.secret("s1", jid), data="bmV3", version=2))
    assert store.get_secret("s1").version == 2
    with pytest.raises(NotFound):
        store.update_secret(f.secret("zz", jid))
    store.delete_secret("s1")
    with pytest.raises(NotFound):
        store.get_secret("s1")


def test_volumes(store: Store) -> None:
    jid = f.job_id()
    store.create_volume(f.volume("v1", jid))
    store.create_volume(f.volume("v0", f.job_id()))
    with pytest.raises(AlreadyExists):
        store.create_volume(f.volume("v1", jid))
    created = dataclasses.replace(f.volume("v1", jid), state=VolumeState.CREATED)
    store.update_volume(created)
    assert store.get_volume("v1") == created
    assert [v.volume_id for v in store.get_volumes()] == ["v0", "v1"]
    assert [v.volume_id for v in store.get_volumes(jid)] == ["v1"]
    with pytest.raises(NotFound):
        store.update_volume(f.volume("v9", jid))
    store.delete_volume("v1")
    store.delete_volume("v1")
    assert [v.volume_id for v in store.get_volumes()] == ["v0"]


def test_framework_info(store: Store) -> None:
    assert store.get_framework_info("peloton") is None
    store.put_framework_info(f.framework())
    store.put_framework_info(dataclasses.replace(f.framework(), stream_id="stream-2"))
    info = store.get_framework_info("peloton")
    assert info is not None and info.stream_id == "stream-2" and info.framework_id == "fw-1"
