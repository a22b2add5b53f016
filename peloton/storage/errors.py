"""Database errors classified once, for every backend, and never shown to callers as they are.

A driver error becomes one of:

* `Unavailable` - transient: the connection was lost or refused, the
  database is shutting down, out of connections, locked (SQLite busy), a
  serialization failure or deadlock, a timeout.  The store's Retrier retries
  the whole transaction; callers see UNAVAILABLE ("retry later") only when
  retries ran out.
* `InvalidArgument` - permanent, the data's fault: a value the database
  cannot store (too long for an index, NUL in text, out of range).  Not
  retried: the same request fails the same way.  (The API edges refuse such
  values first, naming the field: peloton/api/limits.py; this is the net
  under them.)
* `FailedPrecondition` - permanent, the state's fault: a constraint violated.
* `SchemaMismatch` - the schema is missing or old (names the migrate command).
* `StorageFailure` - anything else; a bug or a broken database.

Messages say what the store was doing and the error's class and code
(SQLSTATE, Cassandra error name), never the SQL text, the CQL, or the
parameters, which may hold other users' data.  The driver's full text is
logged once, with an id the message repeats, for the operator.
"""

from __future__ import annotations

import logging
import secrets

from peloton.core.errors import FailedPrecondition, InvalidArgument, PelotonError, Unavailable

log = logging.getLogger("peloton.storage")

#: PostgreSQL SQLSTATE classes and codes that are worth retrying.
PG_TRANSIENT_CLASSES = ("08", "53", "57", "58")
PG_TRANSIENT_CODES = frozenset({"40001", "40P01", "55P03", "55006", "57014", "57P01", "57P02",
                                "57P03", "25006"})
#: Data exceptions (22), program limits (54: "index row size exceeds maximum").
PG_DATA_CLASSES = ("22", "54")
SQLITE_TRANSIENT = ("database is locked", "database table is locked", "disk i/o error",
                    "unable to open database", "database or disk is full", "busy")
SQLITE_DATA = ("string or blob too big", "too big", "datatype mismatch", "too many sql variables")
CASSANDRA_TRANSIENT = frozenset({
    "NoHostAvailable", "OperationTimedOut", "Unavailable", "ReadTimeout", "WriteTimeout",
    "ConnectionException", "ConnectionShutdown", "CoordinationFailure", "OverloadedErrorMessage",
    "IsBootstrappingErrorMessage", "ReadFailure", "WriteFailure"})


class StorageFailure(PelotonError):
    """The database failed in a way that is neither transient nor the request's fault."""

    kind = "storage_failure"


def incident(what: str, exc: BaseException) -> str:
    """Log the driver's error in full under a fresh id; returns the id for the message."""
    ref = secrets.token_hex(4)
    log.warning("storage error %s in %s: %s: %s", ref, what, type(exc).__name__,
                str(exc)[:4000])
    return ref


def classify_sql(what: str, url: str, exc: BaseException, orig: BaseException | None,
                 connection_lost: bool) -> PelotonError | None:
    """Classify a SQLAlchemy DBAPIError (its driver error `orig`); None for "schema missing",
    which the caller reports itself."""
    name = type(orig if orig is not None else exc).__name__
    sqlstate = str(getattr(orig, "sqlstate", "") or "")
    text = str(orig if orig is not None else exc).lower()
    if ("no such table" in text or sqlstate == "42P01"
            or ("does not exist" in text and "relation" in text)):
        return None
    pg_transient = bool(sqlstate) and (sqlstate[:2] in PG_TRANSIENT_CLASSES
                                       or sqlstate in PG_TRANSIENT_CODES)
    # psycopg errors without a SQLSTATE (a connection that failed before any answer) are
    # OperationalErrors of a module named psycopg; SQLite's carry no SQLSTATE at all.
    driver_lost = (not sqlstate and name == "OperationalError"
                   and "psycopg" in type(orig).__module__ if orig is not None else False)
    if connection_lost or pg_transient or driver_lost \
            or (not sqlstate and any(t in text for t in SQLITE_TRANSIENT)):
        return Unavailable(f"{url}: {what}: the database is unavailable ({name}"
                           f"{f' {sqlstate}' if sqlstate else ''}); retry later")
    ref = incident(what, exc)
    code = f" {sqlstate}" if sqlstate else ""
    if (sqlstate[:2] in PG_DATA_CLASSES if sqlstate else
            (name in ("DataError", "ValueError") or any(t in text for t in SQLITE_DATA))):
        return InvalidArgument(f"{what}: a value cannot be stored ({name}{code}: too large or "
                               f"malformed; ref {ref})")
    if sqlstate.startswith("23") or name == "IntegrityError":
        return FailedPrecondition(f"{what}: the change conflicts with stored data ({name}{code}; "
                                  f"ref {ref})")
    return StorageFailure(f"{what} failed in the database ({name}{code}; ref {ref})")


def classify_cassandra(what: str, url: str, exc: BaseException) -> PelotonError | None:
    """Classify a cassandra-driver error; None for "schema missing" (caller reports it)."""
    name = type(exc).__name__
    text = str(exc).lower()
    if name in CASSANDRA_TRANSIENT:
        return Unavailable(f"{url}: {what}: the database is unavailable ({name}); retry later")
    if name == "InvalidRequest" and ("unconfigured table" in text or "keyspace" in text):
        return None
    ref = incident(what, exc)
    if name == "InvalidRequest":
        return InvalidArgument(f"{what}: a value cannot be stored ({name}; ref {ref})")
    return StorageFailure(f"{what} failed in the database ({name}; ref {ref})")
