"""`peloton job stateless restart|start|stop|delete|workflow ...|list-updates`: workflow control.

Every command takes the job and its entity version, in the original's
order.  `workflow pause|resume|abort` are also reachable as
`job stateless pause|resume|abort`, and `list-updates` as `workflows`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from cli import context, ids, params, summaries, views
from cli import update_options as update_opts
from cli.output import to_dict
from cli.wait import wait_workflow
from peloton.api.client import PelotonClient
from peloton.api.gen.peloton.api.v1alpha.job.stateless import stateless_pb2
from peloton.api.gen.peloton.api.v1alpha.pod import pod_pb2

_JOB = "358fad26-73fa-43c8-a350-1e9067571a76"


def current_version(client: PelotonClient, job_id: str) -> str:
    """The job's entity version now."""
    return str(client.get_stateless_job(job_id, summary_only=True).summary.status.version.value)


def finish_workflow(client: PelotonClient, job_id: str, version: str, wait: bool, wait_timeout: float,
                    text: str, response: Any) -> None:
    """Print a write's outcome, then follow the workflow it started if asked to."""
    out = context.out()
    out.result(response, text)
    if wait:
        state = wait_workflow(client, job_id, version, out, context.poller(wait_timeout))
        if not out.json_mode:
            out.line(f"Workflow of job {job_id} {state}")


@click.command("restart")
@ids.job_argument()
@click.argument("entity_version", metavar="ENTITY_VERSION")
@params.range_option("Instances to restart")
@click.option("--opaque-data", default="", help="Opaque data stored with the workflow.")
@click.option("--batch-size", default=0, type=int, help="Pods at a time (0 = all at once).")
@click.option("--in-place", is_flag=True, help="Prefer each pod's current host.")
@params.wait_options("the restart ends")
def restart(job_id: str, entity_version: str, ranges: tuple[tuple[int, int], ...], opaque_data: str,
            batch_size: int, in_place: bool, wait: bool, wait_timeout: float) -> None:
    """Restart the pods of JOB (all, or the given ranges) in batches.

    ENTITY_VERSION is the job's version as `job stateless get` shows it (e.g. 1-1-1): the
    restart is refused if the job changed since; "" means "whatever it is now".

    \b
    Example:
      peloton job stateless restart 358fad26-73fa-43c8-a350-1e9067571a76 1-1-1 --batch-size 2 -r 0:4
      peloton job stateless restart 358fad26 "" --batch-size 2
    """
    client = context.client()
    spec = stateless_pb2.RestartSpec(
        batch_size=batch_size, in_place=in_place,
        ranges=[pod_pb2.InstanceIDRange(**{"from": lo, "to": hi})
                for lo, hi in (ranges or ((0, params.MAX_INSTANCE),))])
    response = client.restart_stateless_job(job_id, entity_version or current_version(client, job_id),
                                            spec, opaque_data=opaque_data)
    finish_workflow(client, job_id, response.version.value, wait, wait_timeout,
                    f"Job restarted. New EntityVersion: {response.version.value}", response)


def _versioned(name: str, help_text: str, done: str, act: Callable[..., Any], *,
               force: bool = False, opaque: bool = False) -> click.Command:
    def command(job_id: str, entity_version: str, **flags: Any) -> None:
        client = context.client()
        # Peloton refuses a call without the job's version: "" asks for the current one first.
        response = act(client, job_id, entity_version or current_version(client, job_id), **flags)
        version = getattr(getattr(response, "version", None), "value", "")
        text = f"{done}. New EntityVersion: {version}" if version else done
        context.out().result(response, text)

    command.__doc__ = (f"{help_text}\n\nENTITY_VERSION is the job's version as `job stateless get` "
                       "shows it (e.g. 1-1-1), refused if the job changed since; \"\" means "
                       "\"whatever it is now\".\n\n\b\nExample:\n"
                       f"  peloton job stateless {name} {_JOB} 1-1-1\n")
    decorated: Any = command
    if opaque:
        decorated = click.option("--opaque-data", "opaque_data", default="",
                                 help="Opaque data stored with the workflow.")(decorated)
    if force:
        decorated = click.option("-f", "--force", is_flag=True,
                                 help="Stop the job first if it is running (cannot be undone).")(decorated)
    decorated = click.argument("entity_version", metavar="ENTITY_VERSION")(decorated)
    decorated = ids.job_argument()(decorated)
    return click.command(name)(decorated)


_LIFECYCLE = [
    _versioned("start", "Start every pod of a stopped job.", "Job started",
               lambda c, j, v: c.start_stateless_job(j, v)),
    _versioned("stop", "Stop every pod of a job.", "Job stopped",
               lambda c, j, v: c.stop_stateless_job(j, v)),
    _versioned("delete", "Delete a stateless job.", "Job deleted",
               lambda c, j, v, force: c.delete_stateless_job(j, v, force=force), force=True),
]


@click.group("workflow")
def workflow() -> None:
    """Pause, resume or abort a job's workflow; show its events.

    \b
    Example:
      peloton job stateless workflow pause 358fad26-73fa-43c8-a350-1e9067571a76 1-1-1
    """


_CONTROLS = {
    "pause": ("Pause the job's current workflow.", "Workflow paused",
              lambda c, j, v, opaque_data: c.pause_workflow(j, v, opaque_data=opaque_data)),
    "resume": ("Resume the job's paused workflow.", "Workflow resumed",
               lambda c, j, v, opaque_data: c.resume_workflow(j, v, opaque_data=opaque_data)),
    "abort": ("Abort the job's current workflow, leaving pods as they are.", "Workflow aborted",
              lambda c, j, v, opaque_data: c.abort_workflow(j, v, opaque_data=opaque_data)),
}
for _name, (_help, _done, _act) in _CONTROLS.items():
    workflow.add_command(_versioned(_name, _help, _done, _act, opaque=True))
workflow.add_command(update_opts.show)


@workflow.command("events")
@ids.job_argument()
@click.argument("instance", type=int)
def events(job_id: str, instance: int) -> None:
    """Events of the latest workflow for one instance, newest first.

    \b
    Example:
      peloton job stateless workflow events 358fad26-73fa-43c8-a350-1e9067571a76 0
    """
    out = context.out()
    response = context.client().get_workflow_events(job_id, instance)
    if out.json_mode:
        out.json(response)
        return
    out.table(views.WORKFLOW_EVENTS, [views.workflow_event_row(e) for e in response.events],
              empty="No workflow events found.")


@click.command("list-updates")
@ids.job_argument()
@click.option("--limit", default=10, show_default=True, type=int, help="Most recent workflows to show.")
@click.option("--events", is_flag=True, help="Each workflow in full, with its events.")
@params.output_option
def list_updates(job_id: str, limit: int, events: bool, output_format: str | None) -> None:
    """List a job's workflows (updates, restarts, ...), newest first.

    `--events` shows each in full with its events; `-o yaml|json` the raw messages.

    \b
    Example:
      peloton job stateless list-updates 358fad26-73fa-43c8-a350-1e9067571a76 --limit 3
      peloton job stateless workflows 358fad26 --events
    """
    out = context.out()
    response = context.client().list_job_workflows(job_id, updates_limit=limit)
    if out.json_mode or output_format:
        out.raw_as(response, "json" if out.json_mode else output_format or "yaml")
        return
    if not events:
        summaries.workflows(out, response.workflow_infos)
        return
    if not response.workflow_infos:
        out.line("No update for job")
    for index, info in enumerate(response.workflow_infos):
        out.line(f"Index {index}:")
        info_only = stateless_pb2.WorkflowInfo()
        info_only.CopyFrom(info)
        info_only.ClearField("events")
        out.dump(to_dict(info_only))
        out.table(views.UPDATE_EVENTS, [[views.enum_label(e, "type"), views.when(e.timestamp),
                                         views.enum_label(e, "state")] for e in info.events])
        out.line("")




@click.command("refresh")
@ids.job_argument()
def refresh(job_id: str) -> None:
    """Reload a job and re-run its goal-state actions (debugging aid).

    \b
    Example:
      peloton job stateless refresh 358fad26-73fa-43c8-a350-1e9067571a76
    """
    context.out().document(context.client().refresh_stateless_job(job_id))


@click.command("cache")
@ids.job_argument()
def cache(job_id: str) -> None:
    """Show the job manager's cached spec and status of a job.

    \b
    Example:
      peloton job stateless cache 358fad26-73fa-43c8-a350-1e9067571a76
    """
    context.out().document(context.client().get_stateless_job_cache(job_id))


def register(group: click.Group) -> None:
    """Add the workflow-control commands to the `job stateless` group."""
    for command in (restart, *_LIFECYCLE, workflow, list_updates, refresh, cache):
        group.add_command(command)
    group.add_command(list_updates, name="workflows")
    # `job stateless pause|resume|abort` as well as `... workflow pause|...`, shorter to type.
    for name, (help_text, done, act) in _CONTROLS.items():
        group.add_command(_versioned(name, help_text, done, act, opaque=True))
