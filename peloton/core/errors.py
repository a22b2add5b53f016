"""The one error tree of Peloton for Python.

Every layer raises these; each front maps them exactly once: gRPC status
codes in the servicers, Aurora ResponseCodes in the bridge, exit codes in
the CLI.  `field` names the offending input where there is one, so a user
is told *what* to fix, not just that something was wrong.
"""

from __future__ import annotations


class PelotonError(Exception):
    """Base of every error this project raises on purpose."""

    #: Short machine-readable kind, stable across releases (used in logs and JSON output).
    kind = "error"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field

    def __str__(self) -> str:
        return self.message


class NotFound(PelotonError):
    """The named entity does not exist."""

    kind = "not_found"


class AlreadyExists(PelotonError):
    """An entity with this identity already exists."""

    kind = "already_exists"


class InvalidArgument(PelotonError):
    """The request is malformed or violates a validation rule."""

    kind = "invalid_argument"


class FailedPrecondition(PelotonError):
    """The request is well-formed but the entity is in the wrong state for it."""

    kind = "failed_precondition"


class Conflict(PelotonError):
    """A compare-and-set lost: the entity changed since it was read (gRPC ABORTED)."""

    kind = "conflict"


class Unavailable(PelotonError):
    """A dependency (database, leader, agent) cannot be reached right now; retry later."""

    kind = "unavailable"


class PermissionDenied(PelotonError):
    """The caller may not perform this operation."""

    kind = "permission_denied"


class Unauthenticated(PelotonError):
    """The caller's credentials are missing where required, wrong, or expired (gRPC
    UNAUTHENTICATED, Aurora AUTH_FAILED)."""

    kind = "unauthenticated"


class ResourceExhausted(PelotonError):
    """A limit (rate, size, capacity) was exceeded."""

    kind = "resource_exhausted"


class Unimplemented(PelotonError):
    """The method exists in the wire contract but this server does not implement it."""

    kind = "unimplemented"


class DataCorruption(PelotonError):
    """A stored record could not be decoded; the message names the entity."""

    kind = "data_corruption"
