"""The CLI's exit codes: one per kind of failure, so scripts can branch on them.

The CLI is the edge where our error tree meets the shell; this is its one
mapping (as Aurora's client maps each failure to a named exit code).
Codes never change meaning once released.

| code | meaning                                                        |
|------|----------------------------------------------------------------|
| 0    | success                                                        |
| 1    | any other error                                                |
| 2    | usage error (bad flag, missing argument, unreadable file)      |
| 3    | not found (job, task, pool, update, host, sandbox file)        |
| 4    | invalid argument (the message names the field)                 |
| 5    | already exists                                                 |
| 6    | conflict: stale entity/configuration version (gRPC ABORTED)    |
| 7    | unavailable: nothing answers at the address, or no leader      |
| 8    | timeout: an RPC deadline (`--timeout`) or a `--wait-timeout`   |
| 9    | failed precondition: the entity is in the wrong state          |
| 10   | permission denied                                              |
| 11   | unimplemented by the server                                    |
| 12   | a `--wait` ended badly (job FAILED/KILLED, update FAILED/...)  |
| 13   | not authenticated: no, wrong or expired credentials (`peloton login`) |
| 130  | interrupted (Ctrl-C)                                           |
"""

from __future__ import annotations

from enum import IntEnum

from peloton.api.client import DeadlineExceeded
from peloton.core import errors


class ExitCode(IntEnum):
    """Process exit status of `peloton`."""

    OK = 0
    ERROR = 1
    USAGE = 2
    NOT_FOUND = 3
    INVALID_ARGUMENT = 4
    ALREADY_EXISTS = 5
    CONFLICT = 6
    UNAVAILABLE = 7
    TIMEOUT = 8
    FAILED_PRECONDITION = 9
    PERMISSION_DENIED = 10
    UNIMPLEMENTED = 11
    WAIT_FAILED = 12
    UNAUTHENTICATED = 13
    INTERRUPTED = 130


class WaitFailed(errors.PelotonError):
    """A `--wait` saw the job or workflow end in a failed state."""

    kind = "wait_failed"


class WaitTimeout(DeadlineExceeded):
    """A `--wait` did not see the end within `--wait-timeout`."""


# Most specific class first: DeadlineExceeded is an Unavailable.
_BY_ERROR: tuple[tuple[type[errors.PelotonError], ExitCode], ...] = (
    (DeadlineExceeded, ExitCode.TIMEOUT),
    (WaitFailed, ExitCode.WAIT_FAILED),
    (errors.NotFound, ExitCode.NOT_FOUND),
    (errors.InvalidArgument, ExitCode.INVALID_ARGUMENT),
    (errors.AlreadyExists, ExitCode.ALREADY_EXISTS),
    (errors.Conflict, ExitCode.CONFLICT),
    (errors.Unavailable, ExitCode.UNAVAILABLE),
    (errors.FailedPrecondition, ExitCode.FAILED_PRECONDITION),
    (errors.PermissionDenied, ExitCode.PERMISSION_DENIED),
    (errors.Unauthenticated, ExitCode.UNAUTHENTICATED),
    (errors.Unimplemented, ExitCode.UNIMPLEMENTED),
)


def exit_code_for(exc: errors.PelotonError) -> ExitCode:
    """The exit code reporting `exc`."""
    for cls, code in _BY_ERROR:
        if isinstance(exc, cls):
            return code
    return ExitCode.ERROR
