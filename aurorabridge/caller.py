"""Who is making the Thrift call being handled (Aurora's AuditMessages.getRemoteUserName).

The processor sets it around each dispatch (`acting_as`); handlers that record
who asked for something (update events, JobUpdateSummary.user) read it with
`current()`.  A context variable, so concurrent calls (one greenlet each) never
see each other's caller.  Without authentication the caller is Aurora's
"UNSECURE".
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

#: Aurora's name for the caller when the scheduler does not authenticate.
UNSECURE = "UNSECURE"
_CALLER: ContextVar[str] = ContextVar("aurora_caller", default=UNSECURE)


def current() -> str:
    """The user name of the call being handled."""
    return _CALLER.get()


@contextmanager
def acting_as(user: str) -> Iterator[None]:
    """Handle the calls made inside as `user` (UNSECURE if empty)."""
    token = _CALLER.set(user or UNSECURE)
    try:
        yield
    finally:
        _CALLER.reset(token)
