"""One SQL database: engine set-up, transactions, retries and error translation.

SQLite is the embedded default.  It runs in WAL mode (readers never block
the writer) with synchronous=NORMAL (a commit is durable once the WAL is
checkpointed; an OS crash can lose the last commits, a process crash
cannot) and a busy timeout, and write transactions start with
BEGIN IMMEDIATE so two writers queue on the lock instead of one failing
halfway through with SQLITE_BUSY.  PostgreSQL is reached through psycopg 3.

Every store method is one transaction run by `Database.run`: a lost or
refused connection (or a locked SQLite file) is retried with backoff by
the store's Retrier, re-running the whole transaction, and finally
raises Unavailable; a missing table means the schema is not there and
raises SchemaMismatch naming the migrate command.

sqlite3 waits inside C (for the database lock, for the disk), which would stop
every greenlet of a monkey-patched process, so SQLite transactions run on the
database's `BlockingPool` of native threads (peloton.common.blocking; an
in-memory database has one connection, so one thread).  psycopg waits on the
patched `select`, so PostgreSQL transactions run on the calling greenlet.
"""

from __future__ import annotations

import copy
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any, TypeVar

import gevent.event
import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy import exc as sa_exc
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.pool import StaticPool

from peloton.common.blocking import BlockingPool
from peloton.core.errors import InvalidArgument
from peloton.storage.errors import classify_sql
from peloton.storage.leader_store import FencedOut
from peloton.storage.registry import redact
from peloton.storage.schema import SchemaMismatch, SchemaStatus
from peloton.storage.sql import tables
from peloton.storage.store import StoreOptions

T = TypeVar("T")

#: How long a SQLite writer waits for the lock before the attempt counts as failed
#: (`sqlite:///path?busy_timeout_ms=N` overrides it).
SQLITE_BUSY_TIMEOUT_MS = 10_000
#: Native threads SQLite transactions of a file database run on (fewer than SQLAlchemy's
#: pool of 5 connections, so a thread never waits for a connection).
SQLITE_THREADS = 4
#: How long connecting to PostgreSQL may take before the attempt counts as failed.
PG_CONNECT_TIMEOUT_S = 5


class _Refused(Exception):
    """Carries a FencedOut past the retrier (which retries every Unavailable)."""

    def __init__(self, error: FencedOut) -> None:
        super().__init__(str(error))
        self.error = error


class Database:
    """An engine plus the transaction helper every SQL store module uses."""

    def __init__(self, url: str, options: StoreOptions) -> None:
        self.url = redact(url)
        self.options = options
        try:
            parsed = sa.make_url(url)
        except sa_exc.ArgumentError as exc:
            raise InvalidArgument(f"bad store URL {self.url}: {exc}", field="store") from None
        backend = parsed.get_backend_name()
        if backend == "sqlite":
            self.dialect = "sqlite"
            self.memory = parsed.database in (None, "", ":memory:")
            busy = int(parsed.query.get("busy_timeout_ms", SQLITE_BUSY_TIMEOUT_MS))  # type: ignore[arg-type]
            self.engine = _sqlite_engine(parsed.difference_update_query(["busy_timeout_ms"]),
                                         self.memory, busy)
        elif backend == "postgresql":
            self.dialect = "postgresql"
            self.memory = False
            self.engine = sa.create_engine(
                parsed.set(drivername="postgresql+psycopg"), pool_size=8, max_overflow=8,
                pool_recycle=3600, connect_args={"connect_timeout": PG_CONNECT_TIMEOUT_S})
        else:
            raise InvalidArgument(f"not a SQL store URL: {self.url}", field="store")
        # An in-memory database is one shared connection: transactions must take turns.
        self._lock: AbstractContextManager[Any] = (
            threading.RLock() if self.memory else nullcontext())
        threads = options.sqlite_threads
        if threads is None:
            threads = 1 if self.memory else SQLITE_THREADS
        self._blocking = BlockingPool(threads if self.dialect == "sqlite" else 0, "sqlite")
        # Encoding or decoding a big config (800 per-instance configs: seconds of Python)
        # runs on its own native thread, off the hub; not in the deterministic in-memory
        # store of tests (no threads there).
        self._codec = BlockingPool(1 if threads or self.dialect != "sqlite" else 0, "codec")
        #: (role, the writer's current epoch) when writes are fenced (leader_store.py).
        self.fence: tuple[str, Callable[[], int | None]] | None = None
        # SQLite has one writer at a time, and its busy handler makes waiting writers poll
        # with sleeps, so under a stream of write transactions one writer can be overtaken
        # for seconds (a CreateJob behind a big job's task creation and every status wave).
        # Our own writers therefore take turns (`WriterTurns`) before they start one.
        self._turns = WriterTurns() if self._blocking.threaded and not self.memory else None

    def with_fence(self, role: str, epoch: Callable[[], int | None]) -> Database:
        """This database (same engine, same lock) with every write transaction fenced."""
        view = copy.copy(self)
        view.fence = (role, epoch)
        return view

    def _fence_epoch(self) -> int:
        """The writer's epoch, read on the calling greenlet (the epoch callable reads the
        leadership's state, which belongs to the hub, not to a SQLite thread); FencedOut
        when the writer's term is over."""
        assert self.fence is not None
        role, epoch_of = self.fence
        mine = epoch_of()
        if mine is None:
            raise FencedOut(f"{role}: this process's leadership term is over; refusing to write")
        return mine

    def _check_fence(self, conn: Connection, mine: int) -> None:
        """Refuse the transaction unless `mine` is the role's stored epoch.  Runs on the
        write's own connection, inside its transaction (on the SQLite thread that runs it):
        the row is read FOR SHARE (PostgreSQL), so a new leader's claim waits for this
        transaction, and transactions after the claim see it; SQLite's BEGIN IMMEDIATE
        already serializes the claim and the write."""
        assert self.fence is not None
        role = self.fence[0]
        q = sa.select(tables.leader_epochs.c.epoch).where(tables.leader_epochs.c.role == role)
        if self.dialect == "postgresql":
            q = q.with_for_update(read=True)
        stored = conn.execute(q).scalar()
        if stored is None or int(stored) != mine:
            raise FencedOut(f"{role}: epoch {mine} is no longer the leader's (the store has "
                            f"{stored}); a newer leader took over, so this write is refused")

    def close(self) -> None:
        """Close every pooled connection and stop the SQLite threads."""
        self._blocking.close()
        self._codec.close()
        self.engine.dispose()

    def compute(self, fn: Callable[[], T]) -> T:
        """Run pure CPU work (`fn` touches no greenlet's objects) on the codec thread, so
        the hub runs meanwhile: Python there gives up the GIL every switch interval.  For
        encoding and decoding big values only: a hand-off costs about 0.1 ms."""
        return self._codec.call(fn)

    # -- transactions ------------------------------------------------------
    @contextmanager
    def _transaction(self, write: bool) -> Iterator[Connection]:
        with self.engine.connect() as conn:
            if write and self.dialect == "sqlite":
                conn.execution_options(peloton_begin="BEGIN IMMEDIATE")
            with conn.begin():
                yield conn

    def run(self, what: str, fn: Callable[[Connection], T], *, write: bool = True,
            duplicate: Callable[[], Exception] | None = None, fenced: bool = True,
            bulk: bool = False) -> T:
        """Run `fn` in one transaction, retrying the whole transaction on a lost
        connection; `what` names the operation in errors.  A unique-key violation
        raises `duplicate()` (e.g. AlreadyExists) if given.  On a fenced database a
        write transaction first checks the writer's epoch (FencedOut, nothing written).
        A `bulk` write (thousands of rows nobody waits for in person) lets waiting small
        writes go first.  SQLite transactions (retries included) run on the database's
        BlockingPool."""
        mine = self._fence_epoch() if write and fenced and self.fence is not None else None

        def attempt() -> T:
            try:
                with self._lock, self._transaction(write) as conn:
                    if mine is not None:
                        self._check_fence(conn, mine)
                    return fn(conn)
            except FencedOut as exc:  # final: not a transient failure to retry
                raise _Refused(exc) from None
            except sa_exc.IntegrityError as exc:
                if duplicate is None:
                    raise self.translate(what, exc) from None
                raise duplicate() from None
            except sa_exc.DBAPIError as exc:
                raise self.translate(what, exc) from None
            except sa_exc.StatementError as exc:  # a parameter the driver refused to send
                raise classify_sql(what, self.url, exc, exc.orig, False) or exc from None

        def call() -> T:
            return self._blocking.call(lambda: self.options.retrier.call(attempt))

        try:
            if not write or self._turns is None:
                return call()
            with self._turns.turn(bulk):
                return call()
        except _Refused as refused:
            raise refused.error from None

    def translate(self, what: str, exc: sa_exc.DBAPIError) -> Exception:
        """Classify a driver error once (peloton/storage/errors.py): Unavailable (retried),
        InvalidArgument, FailedPrecondition, SchemaMismatch or StorageFailure; the message
        never carries the SQL text or its parameters."""
        found = classify_sql(what, self.url, exc, exc.orig, bool(exc.connection_invalidated))
        if found is not None:
            return found
        return SchemaMismatch(
            f"{what}: the database at {self.url} lacks the Peloton schema; "
            f"run `peloton migrate schema up --store {self.url}`")

    # -- dialect helpers ---------------------------------------------------
    def upsert(self, conn: Connection, table: sa.Table, rows: Sequence[dict[str, Any]],
               update: Sequence[str] | None = None, where: Any = None) -> None:
        """Insert rows, replacing (columns `update`, default all non-key) on key conflict,
        only where `where` holds for the existing row if given."""
        if not rows:
            return
        insert = (postgresql.insert if self.dialect == "postgresql" else sqlite.insert)(table)
        keys = [c.name for c in table.primary_key.columns]
        cols = update if update is not None else [c.name for c in table.columns
                                                   if c.name not in keys]
        stmt = (insert.on_conflict_do_update(
                    index_elements=keys, set_={c: insert.excluded[c] for c in cols}, where=where)
                if cols else insert.on_conflict_do_nothing(index_elements=keys))
        conn.execute(stmt, list(rows))

    # -- schema ------------------------------------------------------------
    def schema_status(self) -> SchemaStatus:
        """The alembic revision recorded in the database (None if there is none)."""
        def read(conn: Connection) -> str | None:
            if not sa.inspect(conn).has_table("alembic_version"):
                return None
            rows = conn.execute(sa.text("SELECT version_num FROM alembic_version")).all()
            return str(rows[0][0]) if rows else None
        return SchemaStatus(self.run("read schema version", read, write=False),
                            tables.SCHEMA_VERSIONS)

    def bootstrap(self) -> bool:
        """Create the newest schema in an empty database; False if it has tables."""
        def create(conn: Connection) -> bool:
            if sa.inspect(conn).get_table_names():
                return False
            tables.metadata.create_all(conn)
            conn.execute(sa.text("CREATE TABLE alembic_version (version_num VARCHAR(32) "
                                 "NOT NULL, CONSTRAINT alembic_version_pkc "
                                 "PRIMARY KEY (version_num))"))
            conn.execute(sa.text("INSERT INTO alembic_version (version_num) VALUES (:v)"),
                         {"v": tables.SCHEMA_VERSIONS[-1]})
            return True
        return self.run("create schema", create)


class WriterTurns:
    """One SQLite write transaction of this process at a time, on the hub.

    Waiting writers go in arrival order, except that small writes (an API call's, a
    goal-state action's) go before bulk ones (a wave of thousands of task runtimes, a
    big job's creation chunk), so a CreateJob never queues behind a big job's creation.
    The turn passes straight from one writer to the next; a waiter that is killed
    gives its place (or its turn) back.
    """

    def __init__(self) -> None:
        self._busy = False
        self._small: deque[gevent.event.Event] = deque()
        self._bulk: deque[gevent.event.Event] = deque()

    @contextmanager
    def turn(self, bulk: bool = False) -> Iterator[None]:
        """Hold the turn for the body of the `with`."""
        if self._busy or self._small or self._bulk:
            ready = gevent.event.Event()
            queue = self._bulk if bulk else self._small
            queue.append(ready)
            try:
                ready.wait()
            except BaseException:
                if ready.is_set():
                    self._next()  # the turn came with the kill: pass it on
                else:
                    queue.remove(ready)
                raise
        else:
            self._busy = True
        try:
            yield
        finally:
            self._next()

    def _next(self) -> None:
        queue = self._small or self._bulk
        if queue:
            queue.popleft().set()  # still busy: the turn is handed over
        else:
            self._busy = False


def _sqlite_engine(parsed: sa.URL, memory: bool, busy_timeout_ms: int) -> Engine:
    kwargs: dict[str, Any] = {"connect_args": {"check_same_thread": False}}
    if memory:
        # One shared connection, or every checkout would see its own empty database.
        kwargs["poolclass"] = StaticPool
    engine = sa.create_engine(parsed.set(drivername="sqlite+pysqlite"), **kwargs)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # we issue BEGIN ourselves (below)
        cur = dbapi_conn.cursor()
        if not memory:
            cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute(f"PRAGMA busy_timeout={busy_timeout_ms}")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        conn.exec_driver_sql(conn.get_execution_options().get("peloton_begin", "BEGIN"))

    return engine
