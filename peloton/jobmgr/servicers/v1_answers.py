"""Peloton's v1alpha error answers: how its handlers wrap the errors they pass on.

Peloton's v1alpha handlers (pkg/jobmgr/jobsvc/stateless, podsvc) wrap a
lower error with context (`errors.Wrap(err, "fail to get runtime")`) and
turn the result into a YARPC status keeping the lower error's code, with
the message `<context>: <lower error as Go prints it>`, e.g.

    NOT_FOUND  fail to get runtime: code:not-found message:Job runtime not found <id>

A stale entity version is ABORTED "unexpected entity version", wrapped the
same way where the handler wraps it.  These helpers build those answers
from our errors; the servicers decide which context each case gets.
"""

from __future__ import annotations

from typing import Protocol

from peloton.api import peloton_texts as texts
from peloton.core.errors import (
    AlreadyExists,
    Conflict,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PelotonError,
    Unavailable,
)
from peloton.core.model.job import JobRuntime, JobSpec

#: A compare-and-set on the job's entity version lost (Peloton's InvalidEntityVersionError).
STALE = "unexpected entity version"

_YARPC_CODE: dict[type[PelotonError], str] = {
    NotFound: "not-found", InvalidArgument: "invalid-argument", Conflict: "aborted",
    AlreadyExists: "already-exists", FailedPrecondition: "failed-precondition",
    Unavailable: "unavailable",
}


def wrapped(context: str, exc: PelotonError) -> PelotonError:
    """`exc` as a Peloton handler passes it on under `context` (same kind, Go's text)."""
    code = next((c for cls, c in _YARPC_CODE.items() if isinstance(exc, cls)), "internal")
    return type(exc)(f"{context}: {texts.yarpc_text(code, exc.message)}", field=exc.field)


def unknown_job(context: str, job_id: str, what: str = "runtime") -> NotFound:
    """An unknown job as the handler reports it, after reading the job's `what` from storage
    (runtime, config or index)."""
    lower = {"runtime": texts.job_runtime_not_found(job_id),
             "config": f"Job config not found {job_id}",
             "index": f"Job Index not found {job_id}"}[what]
    return NotFound(f"{context}: {texts.yarpc_text('not-found', lower)}", field="job_id")


def stale(context: str = "") -> Conflict:
    """A stale entity version, wrapped under `context` when the handler wraps it."""
    if not context:
        return Conflict(STALE, field="version")
    return Conflict(f"{context}: {texts.yarpc_text('aborted', STALE)}", field="version")


def is_stale(exc: PelotonError) -> bool:
    """Our own stale-version errors (WorkflowOps / JobOps compare-and-set)."""
    return isinstance(exc, Conflict) and "entity version" in exc.message


class _Jobs(Protocol):
    def get(self, job_id: str) -> tuple[JobSpec, JobRuntime]: ...


def known_job(jobs: _Jobs, job_id: str, context: str,
              what: str = "runtime") -> tuple[JobSpec, JobRuntime]:
    """The job's spec and runtime, or Peloton's NOT_FOUND for an unknown (or malformed) id."""
    try:
        return jobs.get(job_id)
    except (NotFound, InvalidArgument):
        raise unknown_job(context, job_id, what) from None
