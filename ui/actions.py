"""What the UI's buttons do, each through the typed client, each answering a sentence.

The RPCs are the ones the CLI uses for the same verbs, so the UI and
`peloton ...` never disagree:

| UI action                     | RPC                                                   |
|-------------------------------|-------------------------------------------------------|
| job stop / start              | TaskManager.Stop / Start, every instance (`job stop`) |
| job restart, service job      | JobManager.Restart at the current configuration       |
|                               | version: a RESTART workflow, `batch_size` at a time   |
| job restart, other job types  | TaskManager.Restart, every instance (Peloton restarts |
|                               | only services through a workflow)                     |
| task stop / start / restart   | TaskManager.Stop / Start / Restart of one instance    |
| workflow pause/resume/abort   | UpdateService.Pause/Resume/AbortUpdate of the job's   |
|                               | current update (runtime.updateID)                     |
| host maintenance start/complete | HostService.StartMaintenance / CompleteMaintenance  |

Errors are the client's PelotonErrors, raised unchanged; a version race on
restart is retried a few times, as the CLI does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from peloton.api.client import PelotonClient
from peloton.api.gen.peloton.api.v0.job import job_pb2
from peloton.core.errors import Conflict, FailedPrecondition, InvalidArgument
from ui.render import Json

JOB_VERBS = ("stop", "start", "restart")
TASK_VERBS = ("stop", "start", "restart")
WORKFLOW_VERBS = ("pause", "resume", "abort")
HOST_VERBS = ("start", "complete")

#: Every instance, as a half-open range the job manager clips to the job's size.
ALL_INSTANCES = (0, 2**31 - 1)
_CAS_ATTEMPTS = 5


def _batch_size(body: Mapping[str, Any]) -> int:
    raw = body.get("batch_size", 0)
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 0:
        raise InvalidArgument(f"batch_size: expected a whole number >= 0, got {raw!r}",
                              field="batch_size")
    return raw


def _plural(ids: Any, noun: str = "instance") -> str:
    count = len(ids)
    return f"{count} {noun}{'' if count == 1 else 's'}"


class Actions:
    """The write side of the JSON API over one client."""

    def __init__(self, client: PelotonClient) -> None:
        self.client = client

    def job(self, job_id: str, verb: str, body: Mapping[str, Any]) -> Json:
        """Stop, start or restart every instance of a job."""
        c = self.client
        if verb == "stop":  # no ranges: every instance
            stopped = c.stop_tasks(job_id).stoppedInstanceIds
            return {"message": f"Stopping {_plural(stopped)} of job {job_id}"}
        if verb == "start":
            started = c.start_tasks(job_id).startedInstanceIds
            return {"message": f"Starting {_plural(started)} of job {job_id}"}
        if verb != "restart":
            raise InvalidArgument(f"unknown job action {verb!r}", field="action")
        batch = _batch_size(body)
        if c.get_job(job_id).jobInfo.config.type != job_pb2.SERVICE:
            c.restart_tasks(job_id)
            return {"message": f"Restarting every instance of job {job_id}"}
        response = self._at_current_version(job_id, lambda version: c.restart_job(
            job_id, ranges=[ALL_INSTANCES], resource_version=version, batch_size=batch))
        pace = f"{batch} at a time" if batch else "all at once"
        return {"message": f"Restarting job {job_id} {pace} (workflow {response.updateID.value})",
                "update_id": response.updateID.value}

    def task(self, job_id: str, instance: int, verb: str) -> Json:
        """Stop, start or restart one instance."""
        c, one = self.client, [(instance, instance + 1)]
        if verb == "stop":
            done = c.stop_tasks(job_id, one).stoppedInstanceIds
        elif verb == "start":
            done = c.start_tasks(job_id, one).startedInstanceIds
        elif verb == "restart":
            c.restart_tasks(job_id, one)
            return {"message": f"Restarting instance {instance} of job {job_id}"}
        else:
            raise InvalidArgument(f"unknown task action {verb!r}", field="action")
        if instance not in done:  # the servers skip instances outside the job
            raise InvalidArgument(f"job {job_id} has no instance {instance}", field="instance")
        return {"message": f"{'Stopping' if verb == 'stop' else 'Starting'} instance {instance} "
                           f"of job {job_id}"}

    def workflow(self, job_id: str, verb: str) -> Json:
        """Pause, resume or abort the job's current workflow."""
        update_id = self.client.get_job(job_id).jobInfo.runtime.updateID.value
        if not update_id:
            raise FailedPrecondition(f"job {job_id} has no workflow to {verb}")
        calls: dict[str, Callable[[str], object]] = {
            "pause": self.client.pause_update, "resume": self.client.resume_update,
            "abort": self.client.abort_update}
        if verb not in calls:
            raise InvalidArgument(f"unknown workflow action {verb!r}", field="action")
        calls[verb](update_id)
        past = {"pause": "paused", "resume": "resumed", "abort": "aborted"}[verb]
        return {"message": f"Workflow {update_id} of job {job_id} {past}", "update_id": update_id}

    def host(self, hostname: str, verb: str) -> Json:
        """Start (drain, then down) or complete (back up) a host's maintenance."""
        if verb == "start":
            self.client.start_maintenance(hostname)
            return {"message": f"Maintenance started on {hostname}: draining its tasks"}
        if verb == "complete":
            self.client.complete_maintenance(hostname)
            return {"message": f"Maintenance completed on {hostname}: it is back up"}
        raise InvalidArgument(f"unknown maintenance action {verb!r}", field="action")

    def _at_current_version(self, job_id: str, call: Callable[[int], Any]) -> Any:
        """`call(configuration version)`, re-read and retried when another writer got in first."""
        for attempt in range(_CAS_ATTEMPTS):
            version = self.client.get_job(job_id).jobInfo.runtime.configurationVersion
            try:
                return call(version)
            except (Conflict, InvalidArgument) as exc:
                stale = isinstance(exc, Conflict) or "configuration version" in exc.message
                if not stale or attempt == _CAS_ATTEMPTS - 1:
                    raise
        raise AssertionError("unreachable")
