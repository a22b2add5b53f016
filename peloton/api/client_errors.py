"""Raise the typed errors that Peloton's v0 API embeds in response messages.

v0 methods answer OK at the gRPC level and report failures in the response
(`CreateResponse.error.alreadyExists`, `task.GetResponse.notFound`, ...).
The client turns each into the matching `PelotonError` so callers handle
one error tree, whatever API generation they talk to.  The kind is chosen
by the embedded message's type, which is stable across the v0 services.
"""

from __future__ import annotations

from google.protobuf import text_format
from google.protobuf.message import Message

from peloton.core import errors

_BY_TYPE: dict[str, type[errors.PelotonError]] = {
    "JobNotFound": errors.NotFound,
    # Peloton answers Get of an unknown job with this one (its storage's "not found").
    "JobGetRuntimeFail": errors.NotFound,
    "ResourcePoolNotFound": errors.NotFound,
    "ResourcePoolPathNotFound": errors.NotFound,
    "JobAlreadyExists": errors.AlreadyExists,
    "ResourcePoolAlreadyExists": errors.AlreadyExists,
    "InvalidJobConfig": errors.InvalidArgument,
    "InvalidJobId": errors.InvalidArgument,
    "InvalidRespool": errors.InvalidArgument,
    "InvalidResourcePoolConfig": errors.InvalidArgument,
    "InvalidResourcePoolPath": errors.InvalidArgument,
    "InstanceIdOutOfRange": errors.InvalidArgument,
    "TaskNotRunning": errors.FailedPrecondition,
    "ResourcePoolIsBusy": errors.FailedPrecondition,
    "ResourcePoolIsNotLeaf": errors.FailedPrecondition,
}

#: Top-level fields (outside an `error` sub-message) that carry an error in some v0 responses.
_TOP_LEVEL = ("notFound", "outOfRange")

#: The request field each invalid-argument kind is about, so a user knows what to fix.
_FIELD = {
    "InvalidJobConfig": "config",
    "InvalidJobId": "id",
    "InvalidRespool": "respoolID",
    "InvalidResourcePoolConfig": "config",
    "InvalidResourcePoolPath": "path",
    "InstanceIdOutOfRange": "instanceId",
}


def _describe(err: Message) -> str:
    name = err.DESCRIPTOR.name
    text = getattr(err, "message", "")
    if name == "InstanceIdOutOfRange":
        job = err.jobId.value  # type: ignore[attr-defined]
        count = err.instanceCount  # type: ignore[attr-defined]
        return f"instance out of range for job {job}: valid instances are 0..{int(count) - 1}"
    if name in ("ResourcePoolPathNotFound", "ResourcePoolNotFound"):
        # Peloton's text does not say which pool; a person reading it wants to know.
        which = err.path.value if name == "ResourcePoolPathNotFound" else err.id.value  # type: ignore[attr-defined]
        if which and which not in text:
            return f"{text}: {which}"
    if name == "JobNotFound" and text == "err= <nil>":
        # Peloton's TaskManager.List text when it found no task (its Go error was nil).
        job = err.id.value  # type: ignore[attr-defined]
        return f"job {job} not found, or it has no tasks in the range asked for"
    if text:
        return str(text)
    return f"{name}: {text_format.MessageToString(err, as_one_line=True)}"


def embedded_error(response: Message) -> errors.PelotonError | None:
    """The error `response` carries, or None if it reports success."""
    found: list[object] = []
    fields = response.DESCRIPTOR.fields_by_name
    if "error" in fields and response.HasField("error"):
        found.extend(v for _, v in response.error.ListFields())  # type: ignore[attr-defined]
    for name in _TOP_LEVEL:
        if name in fields and response.HasField(name):
            found.append(getattr(response, name))
    for err in found:
        if isinstance(err, Message):
            type_name = err.DESCRIPTOR.name
            cls = _BY_TYPE.get(type_name, errors.PelotonError)
            return cls(_describe(err), field=_FIELD.get(type_name))
        if isinstance(err, str) and err:
            # Some Error sub-messages are a bare `message` string (task GetPodEvents).
            return errors.PelotonError(err)
    return None


def raise_embedded(response: Message) -> None:
    """Raise the error `response` carries, if any."""
    err = embedded_error(response)
    if err is not None:
        raise err
