"""`peloton job stop|start|restart|rolling-*`: act on the instances of v0 jobs.

`job stop` is the original's: stop one job, or every active job of an
owner (and labels) after a confirmation, through TaskManager.Stop.
`start`, `restart` and the `rolling-*` variants go through JobManager with
the job's configuration version as a compare-and-set token, fetched
first and retried when another writer got in between (unless the user
pinned `--resourceVersion`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from cli import context, ids, params
from cli.views import enum_name
from cli.wait import TERMINAL_JOB_STATES, wait_job, wait_update
from peloton.api.client import PelotonClient, Range
from peloton.api.gen.peloton.api.v0 import peloton_pb2
from peloton.api.gen.peloton.api.v0.job import job_pb2
from peloton.api.gen.peloton.api.v0.query import query_pb2
from peloton.core.errors import Conflict, InvalidArgument

#: How often a version-checked write is retried after losing a race.
_CAS_ATTEMPTS = 5
_ACTIVE = ["INITIALIZED", "PENDING", "RUNNING"]


def with_current_version(client: PelotonClient, job_id: str, pinned: int,
                         call: Callable[[int], Any]) -> Any:
    """Run `call(configuration_version)`, re-reading the version after a lost race."""
    for attempt in range(_CAS_ATTEMPTS):
        current = client.get_job(job_id).jobInfo.runtime.configurationVersion
        if pinned and current != pinned:
            raise Conflict(f"job {job_id} is at configuration version {current}, not {pinned}",
                           field="resourceVersion")
        try:
            return call(current)
        except (Conflict, InvalidArgument) as exc:
            stale = isinstance(exc, Conflict) or "configuration version" in exc.message
            if pinned or not stale or attempt == _CAS_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")


def _act(verb: str, job_id: str, ranges: tuple[Range, ...], batch_size: int, resource_version: int,
         wait: bool, wait_timeout: float) -> None:
    client, out = context.client(), context.out()
    method = {"start": client.start_job, "restart": client.restart_job, "stop": client.stop_job}[verb]
    response = with_current_version(client, job_id, resource_version, lambda v: method(
        job_id, ranges=ranges, resource_version=v, batch_size=batch_size))
    update_id = response.updateID.value
    out.result(response, f"Job {job_id} {verb} submitted: update {update_id or '-'}, "
                         f"resource version {response.resourceVersion}")
    if wait and update_id:
        wait_update(client, update_id, out, context.poller(wait_timeout))


def _control_command(verb: str, rolling: bool) -> click.Command:
    name = f"rolling-{verb}" if rolling else verb
    example = (f"peloton job {name} 358fad26-73fa-43c8-a350-1e9067571a76"
               + (" 2" if rolling else " --batch-size 2") + " -r 0:4")

    def command(job_id: str, ranges: tuple[Range, ...], resource_version: int, wait: bool,
                wait_timeout: float, batch_size: int = 0) -> None:
        _act(verb, job_id, ranges or ((0, params.MAX_INSTANCE),), batch_size, resource_version,
             wait, wait_timeout)

    pace = " BATCH_SIZE at a time" if rolling else ""
    command.__doc__ = f"{verb.capitalize()} instances of JOB{pace}.\n\n\b\nExample:\n  {example}\n"
    decorated: Any = params.wait_options("the workflow ends")(command)
    decorated = click.option("--resourceVersion", "resource_version", default=0, type=int,
                             help="Job configuration version to compare-and-set (0 = current).")(decorated)
    decorated = params.range_option(f"Instances to {verb}")(decorated)
    if rolling:
        decorated = click.argument("batch_size", metavar="BATCH_SIZE", type=int)(decorated)
    else:
        decorated = click.option("--batch-size", default=0, type=int,
                                 help="Instances at a time (0 = all at once).")(decorated)
    decorated = ids.job_argument()(decorated)
    return click.command(name)(decorated)




def _matches(info: Any, owner: str, labels: list[tuple[str, str]]) -> bool:
    config = info.config
    if owner and config.owningTeam != owner:
        return False
    have = {(lb.key.strip(), lb.value.strip()) for lb in config.labels}
    return not labels or any(label in have for label in labels)


@click.command("stop")
@ids.job_argument("[JOB]", default="")
@click.option("--progress", is_flag=True, help="Show progress until the tasks have stopped.")
@click.option("--owner", default="", help="Stop the active jobs of this owning team.")
@click.option("-l", "--labels", default="", help="Only jobs with one of these labels (key=value,...).")
@click.option("-f", "--force", is_flag=True, help="Do not ask for confirmation.")
@click.option("-n", "--limit", default=100, show_default=True, type=int, help="Maximum jobs to return.")
@click.option("-q", "--total", default=100, show_default=True, type=int, help="Total jobs to query.")
def stop(job_id: str, progress: bool, owner: str, labels: str, force: bool, limit: int, total: int) -> None:
    """Stop a job, or every active job of an owner (and labels).

    \b
    Example:
      peloton job stop 358fad26-73fa-43c8-a350-1e9067571a76 --progress
      peloton job stop --owner team6 -l env=test -f
    """
    client, out = context.client(), context.out()
    wanted = params.parse_labels(labels)
    if not job_id and not owner:
        raise click.UsageError("either a JOB or --owner is needed")
    targets: list[str] = []
    if job_id:
        info = client.get_job(job_id).jobInfo
        state = enum_name(info.runtime, "state")
        if not _matches(info, owner, wanted):
            out.line("No matching job found")
            return
        if state in TERMINAL_JOB_STATES:
            out.line(f"Job is in terminal state: {state}")
            return
        targets.append(job_id)
    else:
        spec = job_pb2.QuerySpec(jobStates=_ACTIVE, owner=owner,
                                 labels=[peloton_pb2.Label(key=k, value=v) for k, v in wanted],
                                 pagination=query_pb2.PaginationSpec(limit=limit, maxLimit=total))
        found = client.query_jobs(spec, summary_only=True).results
        for summary in found:
            out.json(summary)
            targets.append(summary.id.value)
        if not targets:
            out.line("No matching job(s) found")
            return
        question = "The above jobs will be stopped. Are you sure you want to continue?"
        if not force and not click.confirm(question):
            return
    for target in targets:
        response = client.stop_tasks(target)
        if response.invalidInstanceIds:
            out.line("Retrying failed tasks")
            response = client.stop_tasks(target)
        if not progress:
            if response.invalidInstanceIds:
                out.result(response, f"Some tasks failed to stop, failed_instance_ids:"
                                     f"{list(response.invalidInstanceIds)}")
            else:
                out.result(response, f"Successfully signalled {len(response.stoppedInstanceIds)} "
                                     "tasks for stopping")
    if progress:
        for target in targets:
            wait_job(client, target, out, context.poller(), fail_on=frozenset())
    out.line(f"Stopping jobs: {targets}")


def register(group: click.Group) -> None:
    """Add stop, start, restart and the rolling-* commands to the `job` group."""
    group.add_command(stop)
    for verb in ("start", "restart"):
        group.add_command(_control_command(verb, rolling=False))
    for verb in ("start", "restart", "stop"):
        group.add_command(_control_command(verb, rolling=True))
