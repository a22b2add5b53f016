"""The connection to Cassandra: URL parsing, prepared statements, retries, errors.

`CqlSession` is the narrow seam the backend modules use (run a declared
`Cql` with values, many at once, or as a batch); `DriverSession` is its
implementation over cassandra-driver.  Statements are prepared lazily,
once per session, from statements.py.  Reads and writes use LOCAL_QUORUM
and lightweight transactions LOCAL_SERIAL, as Peloton did.  Rows come
back as dicts; a lightweight transaction's row carries `[applied]`.

Errors: a timeout, an unavailable replica set or no reachable host is
retried with the store's Retrier (the same statement, so a retried LWT
whose first attempt did apply reports Conflict - callers re-read, as with
SQL); when retries run out it is `Unavailable`.  An unknown table or
keyspace means the schema was never migrated: SchemaMismatch.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import parse_qs, urlsplit

from peloton.core.errors import InvalidArgument, PelotonError
from peloton.storage.cassandra.cql import Cql
from peloton.storage.errors import classify_cassandra
from peloton.storage.registry import redact
from peloton.storage.schema import SchemaMismatch
from peloton.storage.store import StoreOptions

Row = dict[str, Any]
DEFAULT_PORT = 9042
#: Batches sent at once by `batches`.
IN_FLIGHT = 16


@dataclass(frozen=True, slots=True)
class CassandraUrl:
    """`cassandra://host[:port][,host2...]/keyspace[?replication_factor=N&datacenter=dc]`."""

    hosts: tuple[str, ...]
    port: int
    keyspace: str
    replication_factor: int = 1
    datacenter: str | None = None
    username: str | None = None
    password: str | None = None

    @staticmethod
    def parse(url: str) -> CassandraUrl:
        """Parse a store URL; InvalidArgument if it is not a usable Cassandra URL."""
        parts = urlsplit(url)
        keyspace = parts.path.strip("/")
        if parts.scheme != "cassandra" or not keyspace.replace("_", "").isalnum():
            raise InvalidArgument(f"bad Cassandra URL {redact(url)}: expected "
                                  "cassandra://host:port/keyspace", field="store")
        netloc = parts.netloc.rsplit("@", 1)[-1]
        hosts, port = [], DEFAULT_PORT
        for item in netloc.split(","):
            host, _, p = item.partition(":")
            hosts.append(host or "127.0.0.1")
            port = int(p) if p else port
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        return CassandraUrl(tuple(hosts), port, keyspace,
                            int(query.get("replication_factor", "1")), query.get("datacenter"),
                            parts.username, parts.password)


class CqlSession(Protocol):
    """What the Cassandra backend needs from a session."""

    def execute(self, stmt: Cql, params: Sequence[Any]) -> list[Row]:
        """Run one statement; all rows (paged through by the driver)."""
        ...

    def execute_many(self, stmt: Cql, params: Sequence[Sequence[Any]]) -> list[list[Row]]:
        """Run one statement for each parameter list, concurrently; results in order."""
        ...

    def batch(self, items: Sequence[tuple[Cql, Sequence[Any]]]) -> None:
        """Apply writes as one logged batch (all eventually applied, or none); a single
        write is applied on its own (so that no batch size limit applies to it)."""
        ...

    def batch_many(self, batches: Sequence[Sequence[tuple[Cql, Sequence[Any]]]]) -> None:
        """Apply several logged batches concurrently (each atomic on its own)."""
        ...

    def cas_batches(self, batches: Sequence[Sequence[tuple[Cql, Sequence[Any]]]]
                    ) -> list[list[Row]]:
        """Run conditional batches, each within one partition, concurrently; each batch's
        rows.  A batch applies whole or not at all: `[{"[applied]": True}]`, or one row per
        existing row it named with `[applied]` False, its key and its condition columns."""
        ...

    def truncate(self, table: str) -> None:
        """Remove every row of a table (tests and `schema down` only)."""
        ...

    def close(self) -> None:
        """Disconnect."""
        ...


class DriverSession:
    """CqlSession over cassandra-driver."""

    def __init__(self, url: str, options: StoreOptions, *, keyspace: bool = True) -> None:
        try:
            import cassandra  # noqa: F401  (the optional extra)
        except ImportError:
            raise InvalidArgument(f"{redact(url)}: Cassandra support is not installed: "
                                  "pip install 'peloton-py[cassandra]'", field="store") from None
        from cassandra import ConsistencyLevel
        from cassandra.auth import PlainTextAuthProvider
        from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
        from cassandra.policies import DCAwareRoundRobinPolicy, TokenAwarePolicy
        from cassandra.query import dict_factory

        self.url = redact(url)
        self.parsed = CassandraUrl.parse(url)
        self._retrier = options.retrier
        profile = ExecutionProfile(
            load_balancing_policy=TokenAwarePolicy(DCAwareRoundRobinPolicy(
                local_dc=self.parsed.datacenter)),
            consistency_level=ConsistencyLevel.LOCAL_QUORUM,
            serial_consistency_level=ConsistencyLevel.LOCAL_SERIAL,
            request_timeout=20.0, row_factory=dict_factory)
        auth = (PlainTextAuthProvider(self.parsed.username, self.parsed.password)
                if self.parsed.username else None)
        self._prepared: dict[str, Any] = {}
        self._lock = threading.Lock()
        ks = self.parsed.keyspace if keyspace else None

        def connect() -> Any:
            # A Cluster that failed to connect is shut down for good: a fresh one per attempt.
            cluster = Cluster(list(self.parsed.hosts), port=self.parsed.port,
                              execution_profiles={EXEC_PROFILE_DEFAULT: profile},
                              auth_provider=auth, protocol_version=4, connect_timeout=5)
            try:
                return cluster, cluster.connect(ks)
            except Exception:
                cluster.shutdown()
                raise

        self._cluster, self._session = self._call(f"connect to {self.url}", connect)
        self._session.default_fetch_size = 1000

    # -- error handling ------------------------------------------------------
    def _call(self, what: str, fn: Any) -> Any:
        def attempt() -> Any:
            try:
                return fn()
            except Exception as exc:
                raise self._translate(what, exc) from exc
        return self._retrier.call(attempt)

    def _translate(self, what: str, exc: Exception) -> Exception:
        if isinstance(exc, PelotonError):
            return exc
        found = classify_cassandra(what, self.url, exc)
        if found is not None:
            return found
        return SchemaMismatch(f"{what}: the keyspace at {self.url} lacks the Peloton schema; "
                              f"run `peloton migrate schema up --store {self.url}`")

    def _prepare(self, stmt: Cql) -> Any:
        found = self._prepared.get(stmt.name)
        if found is None:
            with self._lock:
                found = self._prepared.get(stmt.name)
                if found is None:
                    found = self._session.prepare(stmt.text)
                    found.is_idempotent = not stmt.lwt
                    self._prepared[stmt.name] = found
        return found

    # -- CqlSession ------------------------------------------------------------
    def execute(self, stmt: Cql, params: Sequence[Any]) -> list[Row]:
        def run() -> list[Row]:
            return list(self._session.execute(self._prepare(stmt), tuple(params)))
        result: list[Row] = self._call(stmt.name, run)
        return result

    def execute_many(self, stmt: Cql, params: Sequence[Sequence[Any]]) -> list[list[Row]]:
        from cassandra.concurrent import execute_concurrent_with_args

        def run() -> list[list[Row]]:
            out = execute_concurrent_with_args(self._session, self._prepare(stmt),
                                               [tuple(p) for p in params], concurrency=64,
                                               raise_on_first_error=True)
            return [list(r.result_or_exc) for r in out]
        result: list[list[Row]] = self._call(stmt.name, run)
        return result

    def batch(self, items: Sequence[tuple[Cql, Sequence[Any]]]) -> None:
        from cassandra.query import BatchType

        def run() -> None:
            self._session.execute(self._batch_of(items, BatchType.LOGGED))
        if items:
            self._call("batch", run)

    def _batch_of(self, items: Sequence[tuple[Cql, Sequence[Any]]], kind: Any) -> Any:
        """A batch of `kind` for several writes; a single write as itself, because Cassandra
        refuses any batch above batch_size_fail_threshold (50 KiB) but not a statement."""
        from cassandra.query import BatchStatement

        if len(items) == 1:
            stmt, params = items[0]
            return self._prepare(stmt).bind(tuple(params))
        batch = BatchStatement(batch_type=kind)
        for stmt, params in items:
            batch.add(self._prepare(stmt), tuple(params))
        return batch

    def batch_many(self, batches: Sequence[Sequence[tuple[Cql, Sequence[Any]]]]) -> None:
        from cassandra.query import BatchType

        def run() -> None:
            for start in range(0, len(batches), IN_FLIGHT):  # bounded: a loaded node times out
                futures = []
                for items in batches[start:start + IN_FLIGHT]:
                    futures.append(self._session.execute_async(
                        self._batch_of(items, BatchType.LOGGED)))
                for f in futures:
                    f.result()
        self._call("batch", run)

    def cas_batches(self, batches: Sequence[Sequence[tuple[Cql, Sequence[Any]]]]
                    ) -> list[list[Row]]:
        from cassandra.query import BatchStatement, BatchType

        def run() -> list[list[Row]]:
            futures = []
            for items in batches:
                # UNLOGGED: a single-partition batch needs no batch log; Paxos makes it atomic.
                batch = BatchStatement(batch_type=BatchType.UNLOGGED)
                for stmt, params in items:
                    batch.add(self._prepare(stmt), tuple(params))
                futures.append(self._session.execute_async(batch))
            return [list(f.result()) for f in futures]
        result: list[list[Row]] = self._call("conditional batch", run)
        return result

    def execute_text(self, text: str) -> list[Row]:
        """Run unprepared CQL (schema changes by the migration runner)."""
        result: list[Row] = self._call(text[:60], lambda: list(self._session.execute(text)))
        return result

    def truncate(self, table: str) -> None:
        self.execute_text(f"TRUNCATE {table}")

    def close(self) -> None:
        self._cluster.shutdown()
