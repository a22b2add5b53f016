"""`peloton update`: rolling updates of v0 jobs (v0 UpdateService).

`update create` follows the original: it reads the job's configuration
version, refuses to start while another update runs (unless
`--override`), and retries when the version moved under it.
"""

from __future__ import annotations

import click
from google.protobuf.message import Message

from cli import context, ids, params, specs, views
from cli import update_options as update_opts
from cli.wait import TERMINAL_UPDATE_STATES, wait_update
from peloton.api.gen.peloton.api.v0.update import update_pb2
from peloton.core.errors import Conflict, FailedPrecondition, InvalidArgument

_ATTEMPTS = 5


@click.group("update")
def update() -> None:
    """Manage job updates.

    \b
    Example:
      peloton update create 358fad26 docs/examples/web-service-v2.yaml 2 /DefaultResPool --wait
      peloton update list 358fad26-73fa-43c8-a350-1e9067571a76
    """


@update.command("create")
@params.lenient_option
@ids.job_argument()
@click.argument("config", type=click.Path(exists=True, dir_okay=False))
@click.argument("batch_size", metavar="BATCH_SIZE", type=int)
@click.argument("respool")
@click.option("-c", "--configuration-version", "config_version", default=0, type=int,
              help="Current configuration version to compare-and-set (0 = whatever it is).")
@click.option("-o", "--override", is_flag=True, help="Override an update that is still running.")
@click.option("--maxattempts", default=0, type=int,
              help="Retries of an instance after updating before it counts as failed.")
@click.option("--maxfailureInstances", "max_failure_instances", default=0, type=int,
              help="Failed instances tolerated before the update fails (0 = no limit).")
@click.option("--rollbackOnFailure", "rollback_on_failure", is_flag=True,
              help="Roll back if the update fails.")
@click.option("--start-paused", is_flag=True, help="Create the update paused.")
@click.option("--opaque-data", default="", help="Opaque data stored with the update.")
@click.option("--in-place", is_flag=True, help="Prefer each instance's current host.")
@update_opts.flags
@params.wait_options("the update ends")
def create(job_id: str, config: str, batch_size: int, respool: str, config_version: int, override: bool,
           maxattempts: int, max_failure_instances: int, rollback_on_failure: bool, start_paused: bool,
           opaque_data: str, in_place: bool, watch_time: float | None, strategy: str | None,
           group_sizes: str, autopause: bool, wait: bool, wait_timeout: float) -> None:
    """Update JOB to CONFIG, BATCH_SIZE instances at a time, in pool RESPOOL.

    \b
    Example:
      peloton update create 358fad26 docs/examples/web-service-v2.yaml 2 /DefaultResPool
      peloton update create 358fad26 docs/examples/web-service-v2.yaml 1 /DefaultResPool \\
          --rollbackOnFailure --wait
    """
    client, out = context.client(), context.out()
    cfg = specs.load_job_config(config)
    cfg.respoolID.value = client.lookup_respool_id(respool).id.value
    update_config = update_pb2.UpdateConfig(
        batchSize=batch_size, maxInstanceAttempts=maxattempts, maxFailureInstances=max_failure_instances,
        rollbackOnFailure=rollback_on_failure, startPaused=start_paused, inPlace=in_place)
    options = update_opts.options(watch_time, strategy, group_sizes, autopause)
    for attempt in range(_ATTEMPTS):
        runtime = client.get_job(job_id).jobInfo.runtime
        if config_version and runtime.configurationVersion != config_version:
            raise Conflict(f"job {job_id} is at configuration version {runtime.configurationVersion}, "
                           f"not {config_version}", field="configuration-version")
        running = runtime.updateID.value
        if running and _active(running):
            if not override:
                raise FailedPrecondition(f"cannot create a new update as update {running} is still running; "
                                         "use --override to replace it")
            out.line(f"going to override existing update: {running}")
        cfg.changeLog.version = runtime.configurationVersion
        try:
            response = client.create_update(job_id, cfg, update_config, opaque_data=opaque_data,
                                            options=options)
            break
        except (Conflict, InvalidArgument) as exc:
            stale = isinstance(exc, Conflict) or "configuration version" in exc.message
            if config_version or not stale or attempt == _ATTEMPTS - 1:
                raise
    update_id = response.updateID.value
    out.result(response, f"Job update {update_id} created")
    if wait:
        state = wait_update(client, update_id, out, context.poller(wait_timeout))
        if not out.json_mode:
            out.line(f"Job update {update_id} {state}")


def _active(update_id: str) -> bool:
    status = context.client().get_update(update_id, status_only=True).updateInfo.status
    return views.enum_name(status, "state") not in TERMINAL_UPDATE_STATES


@update.command("get")
@click.argument("update_id", metavar="UPDATE_ID")
def get(update_id: str) -> None:
    """Show an update's state and progress.

    \b
    Example:
      peloton update get 6a4bd4b3-5ad2-4b15-8d6a-2b1e3c7e8b19
    """
    out = context.out()
    response = context.client().get_update(update_id)
    if out.json_mode:
        out.json(response)
        return
    out.table(views.UPDATE, [views.update_row(response.updateInfo)])


@update.command("list")
@ids.job_argument()
def list_(job_id: str) -> None:
    """List the updates of a job.

    \b
    Example:
      peloton update list 358fad26-73fa-43c8-a350-1e9067571a76
    """
    out = context.out()
    response = context.client().list_updates(job_id)
    if out.json_mode:
        out.json(response)
        return
    out.table(views.UPDATE, [views.update_row(u) for u in response.updateInfo], empty="No updates found.")


@update.command("cache")
@click.argument("update_id", metavar="UPDATE_ID")
def cache(update_id: str) -> None:
    """Show the job manager's cached view of an update.

    \b
    Example:
      peloton update cache 6a4bd4b3-5ad2-4b15-8d6a-2b1e3c7e8b19
    """
    context.out().json(context.client().get_update_cache(update_id))


def _control(verb: str, help_text: str, *, opaque: bool = True) -> click.Command:
    def command(update_id: str, opaque_data: str = "") -> None:
        client = context.client()
        response: Message
        if verb == "rollback":
            response = client.rollback_update(update_id)
        else:
            call = {"pause": client.pause_update, "resume": client.resume_update,
                    "abort": client.abort_update}[verb]
            response = call(update_id, opaque_data=opaque_data)
        done = {"pause": "paused", "resume": "resumed", "abort": "aborted", "rollback": "rolling back"}[verb]
        context.out().result(response, f"Job update {update_id} {done}")

    command.__doc__ = (f"{help_text}\n\n\b\nExample:\n"
                       f"  peloton update {verb} 6a4bd4b3-5ad2-4b15-8d6a-2b1e3c7e8b19\n")
    decorated = command
    if opaque:
        decorated = click.option("--opaque-data", default="", help="Opaque data stored with the update.")(
            decorated)
    decorated = click.argument("update_id", metavar="UPDATE_ID")(decorated)
    return click.command(verb)(decorated)


update.add_command(_control("pause", "Pause an update; instances in flight finish."))
update.add_command(_control("resume", "Resume a paused update."))
update.add_command(_control("abort", "Abort an update, leaving instances as they are."))
update.add_command(_control("rollback", "Roll an update back to the previous configuration.", opaque=False))
