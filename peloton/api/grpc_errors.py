"""The one mapping from our error tree to gRPC status codes.

Every servicer method runs inside `service_registry`'s wrapper, which
calls `status_for` on any PelotonError; a servicer never picks a status
code itself, with one exception: where Peloton answers a case with a code
our error tree would not choose (INTERNAL for deleting a running job), the
servicer raises `PelotonStatus`, which carries Peloton's code and text.
(v0 methods that report typed errors inside the response message do so
explicitly in their servicer; everything else is a status.)
"""

from __future__ import annotations

import grpc

from peloton.core import errors

_CODES: dict[type[errors.PelotonError], grpc.StatusCode] = {
    errors.NotFound: grpc.StatusCode.NOT_FOUND,
    errors.AlreadyExists: grpc.StatusCode.ALREADY_EXISTS,
    errors.InvalidArgument: grpc.StatusCode.INVALID_ARGUMENT,
    errors.FailedPrecondition: grpc.StatusCode.FAILED_PRECONDITION,
    errors.Conflict: grpc.StatusCode.ABORTED,
    errors.Unavailable: grpc.StatusCode.UNAVAILABLE,
    errors.PermissionDenied: grpc.StatusCode.PERMISSION_DENIED,
    errors.Unauthenticated: grpc.StatusCode.UNAUTHENTICATED,
    errors.ResourceExhausted: grpc.StatusCode.RESOURCE_EXHAUSTED,
    errors.Unimplemented: grpc.StatusCode.UNIMPLEMENTED,
    errors.DataCorruption: grpc.StatusCode.DATA_LOSS,
}

_ERRORS: dict[grpc.StatusCode, type[errors.PelotonError]] = {v: k for k, v in _CODES.items()}


class PelotonStatus(errors.PelotonError):
    """An answer that must be Peloton's exactly: its gRPC code and its message text.

    For the cases where Peloton's handler picks a code our error tree would
    map differently (see peloton/jobmgr/servicers/peloton_texts.py).
    """

    kind = "status"

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def status_for(exc: errors.PelotonError) -> grpc.StatusCode:
    """The gRPC status code that reports `exc`."""
    if isinstance(exc, PelotonStatus):
        return exc.code
    for cls in type(exc).__mro__:
        code = _CODES.get(cls)
        if code is not None:
            return code
    return grpc.StatusCode.INTERNAL


def error_for(code: grpc.StatusCode, message: str) -> errors.PelotonError:
    """The error a client raises for a failed call (the inverse of `status_for`)."""
    cls = _ERRORS.get(code)
    if cls is None:
        if code in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED):
            return errors.Unavailable(f"{code.name.lower()}: {message}")
        return errors.PelotonError(f"{code.name}: {message}")
    return cls(message)
