"""Building Aurora `Response`s, and the one mapping from our errors to ResponseCodes.

Every handler returns a Response; none picks a code for a PelotonError
itself.  The mapping (STYLE rule 9, once per edge):

* InvalidArgument, NotFound, AlreadyExists, FailedPrecondition -> INVALID_REQUEST
  (the caller must change the request);
* Conflict (ABORTED: the entity version moved) -> INVALID_REQUEST, as Peloton's
  bridge: nothing was applied, re-read and retry;
* Unavailable, ResourceExhausted -> ERROR_TRANSIENT (Aurora clients retry these);
* PermissionDenied, Unauthenticated -> AUTH_FAILED; anything else -> ERROR.

Calls without a natural result carry none: Peloton's bridge sent a
placeholder getTierConfigResult (YARPC refused an empty union), but Aurora's
client takes any result of startJobUpdate as a StartJobUpdateResult, so a
no-op update answered with a placeholder would crash it.
"""

from __future__ import annotations

from typing import Any

from aurorabridge.thrift_api import api
from peloton.core import errors

#: Cluster name reported in every Response's ServerInfo (set once by the app).
_server_info: dict[str, str] = {"clusterName": "peloton", "statsUrlPrefix": ""}


def set_cluster_name(name: str) -> None:
    """Name reported in ServerInfo.clusterName (Aurora clients show it)."""
    _server_info["clusterName"] = name


def _server() -> Any:
    return api.ServerInfo(clusterName=_server_info["clusterName"],
                          statsUrlPrefix=_server_info["statsUrlPrefix"])


def response(code: int, result: Any = None, messages: tuple[str, ...] = ()) -> Any:
    """A Response with `code`, an optional Result and detail messages."""
    return api.Response(responseCode=code, serverInfo=_server(), result=result,
                        details=[api.ResponseDetail(message=m) for m in messages])


def ok(result: Any = None, *messages: str) -> Any:
    """An OK Response with an optional Result."""
    return response(api.ResponseCode.OK, result, messages)


def invalid_request(message: str, result: Any = None) -> Any:
    """INVALID_REQUEST naming the problem."""
    return response(api.ResponseCode.INVALID_REQUEST, result, (message,))


def error_response(message: str) -> Any:
    """ERROR with a message (unexpected failures)."""
    return response(api.ResponseCode.ERROR, None, (message,))


def updating_error(message: str) -> Any:
    """JOB_UPDATING_ERROR: the job is locked by an update in progress."""
    return response(api.ResponseCode.JOB_UPDATING_ERROR, None, (message,))


_CODES: dict[type[errors.PelotonError], int] = {
    errors.InvalidArgument: api.ResponseCode.INVALID_REQUEST,
    errors.NotFound: api.ResponseCode.INVALID_REQUEST,
    errors.AlreadyExists: api.ResponseCode.INVALID_REQUEST,
    errors.FailedPrecondition: api.ResponseCode.INVALID_REQUEST,
    errors.Conflict: api.ResponseCode.INVALID_REQUEST,
    errors.Unavailable: api.ResponseCode.ERROR_TRANSIENT,
    errors.ResourceExhausted: api.ResponseCode.ERROR_TRANSIENT,
    errors.PermissionDenied: api.ResponseCode.AUTH_FAILED,
    errors.Unauthenticated: api.ResponseCode.AUTH_FAILED,
}


def code_for(exc: errors.PelotonError) -> int:
    """The ResponseCode that reports `exc`."""
    for cls in type(exc).__mro__:
        code = _CODES.get(cls)
        if code is not None:
            return code
    return int(api.ResponseCode.ERROR)


def from_error(exc: errors.PelotonError, context: str = "") -> Any:
    """A Response reporting `exc`, prefixed with what we were doing."""
    message = f"{context}: {exc.message}" if context else exc.message
    return response(code_for(exc), None, (message,))
