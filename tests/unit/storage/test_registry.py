"""The backend registry and store URLs."""

from __future__ import annotations

import pytest

from peloton.core.errors import InvalidArgument
from peloton.storage import (
    BackendRegistry,
    Store,
    StoreOptions,
    check_schema,
    open_store,
    redact,
)
from peloton.storage.cassandra.session import CassandraUrl


def test_unknown_scheme_names_the_known_ones() -> None:
    with pytest.raises(InvalidArgument) as err:
        open_store("mysql://u:secret@h/db")
    text = str(err.value)
    assert "unknown storage URL scheme 'mysql'" in text
    assert "sqlite://" in text and "postgresql://" in text and "cassandra://" in text
    assert "secret" not in text  # passwords never reach messages


def test_a_scheme_is_registered_once() -> None:
    registry = BackendRegistry()

    def factory(url: str, options: StoreOptions) -> Store:
        return open_store("sqlite://", options)

    registry.register("memdb", factory)
    with pytest.raises(ValueError, match="already registered"):
        registry.register("MEMDB", factory)
    with pytest.raises(ValueError, match="already registered"):
        registry.register("sqlite", factory)
    store = registry.open("memdb://anything")
    assert store.backend == "sqlite"
    store.close()
    assert "memdb" in registry.schemes()


def test_in_memory_sqlite_is_ready_to_use() -> None:
    store = open_store("sqlite://")
    assert check_schema(store).ok
    store.add_active_job("j1")
    assert store.get_active_jobs() == ["j1"]
    store.close()


def test_redact_hides_only_the_password() -> None:
    assert redact("postgresql://bob:pw@db:5432/p") == "postgresql://bob:***@db:5432/p"
    assert redact("postgresql://bob@db/p") == "postgresql://bob@db/p"
    assert redact("sqlite:///x.db") == "sqlite:///x.db"


def test_cassandra_urls() -> None:
    url = CassandraUrl.parse("cassandra://u:p@a:9043,b/peloton_ks?replication_factor=3"
                             "&datacenter=dc1")
    assert url.hosts == ("a", "b") and url.port == 9043 and url.keyspace == "peloton_ks"
    assert url.replication_factor == 3 and url.datacenter == "dc1" and url.username == "u"
    assert CassandraUrl.parse("cassandra://h/ks").port == 9042
    for bad in ("cassandra://h", "cassandra://h/bad-name", "cql://h/ks"):
        with pytest.raises(InvalidArgument):
            CassandraUrl.parse(bad)


def test_unreachable_cassandra_is_unavailable_after_retries() -> None:
    from peloton.common.clock import FakeClock
    from peloton.common.retry import Retrier, RetryPolicy
    from peloton.core.errors import Unavailable
    from tests.harness.procs import free_port

    clock = FakeClock()
    options = StoreOptions(retrier=Retrier(RetryPolicy(attempts=3), sleep=clock.sleep,
                                           clock=clock))
    with pytest.raises(Unavailable, match=r"NoHostAvailable.*gave up after 3 attempts"):
        open_store(f"cassandra://127.0.0.1:{free_port()}/ks", options)
    assert len(clock.sleeps) == 2
