"""`peloton task`: inspect and control the instances of a job (v0 TaskManager).

Instances are addressed by job ID and instance number; ranges are
`-r from:to` (half-open, repeatable where the original allowed it).
`task logs` reads a file from the task's sandbox through the agent.
"""

from __future__ import annotations

import click

from cli import context, ids, params, views
from cli.job import order_by
from cli.pod import print_pod_events
from peloton.api.client import Range
from peloton.api.gen.peloton.api.v0.query import query_pb2
from peloton.api.gen.peloton.api.v0.task import task_pb2

TASK_STATES = list(task_pb2.TaskState.keys())
_ALL: tuple[Range, ...] = ((0, params.MAX_INSTANCE),)


@click.group("task")
def task() -> None:
    """Manage the tasks (instances) of a job.

    \b
    Example:
      peloton task list 358fad26-73fa-43c8-a350-1e9067571a76
      peloton task logs 358fad26-73fa-43c8-a350-1e9067571a76 0
    """


@task.command("get")
@ids.job_argument()
@click.argument("instance", type=int)
def get(job_id: str, instance: int) -> None:
    """Show the status of one task.

    \b
    Example:
      peloton task get 358fad26-73fa-43c8-a350-1e9067571a76 0
    """
    out = context.out()
    response = context.client().get_task(job_id, instance)
    if out.json_mode:
        out.json(response)
        return
    out.table(views.TASK, [views.task_row(response.result)], empty="No task found.")


@task.command("cache")
@ids.job_argument()
@click.argument("instance", type=int)
def cache(job_id: str, instance: int) -> None:
    """Show the job manager's cached runtime of one task.

    \b
    Example:
      peloton task cache 358fad26-73fa-43c8-a350-1e9067571a76 0
    """
    context.out().json(context.client().get_task_cache(job_id, instance))


@task.command("events")
@ids.job_argument()
@click.argument("instance", type=int)
def events(job_id: str, instance: int) -> None:
    """Show a task's events (deprecated: use `peloton pod events`).

    \b
    Example:
      peloton task events 358fad26-73fa-43c8-a350-1e9067571a76 0
    """
    click.echo("** Task Events CLI is deprecated, please use Pod Events CLI **", err=True)
    print_pod_events(job_id, instance, "", 0)


@task.command("logs")
@ids.job_argument()
@click.argument("instance", type=int)
@click.argument("task_id", metavar="[TASK_ID]", default="", type=ids.RUN_ID)
@click.option("-f", "--filename", default="stdout", show_default=True, help="Sandbox file to print.")
def logs(job_id: str, instance: int, task_id: str, filename: str) -> None:
    """Print a file (stdout by default) from a task's sandbox; TASK_ID picks an earlier run.

    \b
    Example:
      peloton task logs 358fad26-73fa-43c8-a350-1e9067571a76 0
      peloton task logs 358fad26-73fa-43c8-a350-1e9067571a76 0 -f stderr
    """
    data = context.client().read_task_file(job_id, instance, filename, task_id=task_id)
    context.out().raw(data)


@task.command("list")
@ids.job_argument()
@params.range_option("Instances to show", multiple=False)
def list_(job_id: str, rng: Range | None) -> None:
    """List the tasks of a job, by instance.

    \b
    Example:
      peloton task list 358fad26-73fa-43c8-a350-1e9067571a76 -r 0:10
    """
    out = context.out()
    response = context.client().list_tasks(job_id, rng or _ALL[0])
    if out.json_mode:
        out.json(response)
        return
    tasks = sorted(response.result.value.values(), key=lambda t: t.instanceId)
    out.table(views.TASK, [views.task_row(t) for t in tasks], empty="No tasks found.")


@task.command("query")
@ids.job_argument()
@click.option("-s", "--states", default="", help="Comma-separated task states, e.g. RUNNING,FAILED.")
@click.option("--names", default="", help="Comma-separated task names.")
@click.option("--hosts", default="", help="Comma-separated hosts.")
@click.option("-n", "--limit", default=100, show_default=True, type=int, help="Limit.")
@click.option("-o", "--offset", default=0, type=int, help="Offset.")
@click.option("-p", "--sort", default="", help="Sort by (creation_time, host, instance_id, message, "
                                              "name, reason, state).")
@click.option("-a", "--sortorder", type=click.Choice(["ASC", "DESC"]), default="ASC", show_default=True,
              help="Sort order.")
def query(job_id: str, states: str, names: str, hosts: str, limit: int, offset: int, sort: str,
          sortorder: str) -> None:
    """Query the tasks of a job by state, name and host.

    \b
    Example:
      peloton task query 358fad26-73fa-43c8-a350-1e9067571a76 -s RUNNING -p instance_id
    """
    out = context.out()
    spec = task_pb2.QuerySpec(
        taskStates=params.enum_names(states, TASK_STATES), names=params.csv(names),
        hosts=params.csv(hosts),
        pagination=query_pb2.PaginationSpec(limit=limit, offset=offset, orderBy=order_by(sort, sortorder)))
    response = context.client().query_tasks(job_id, spec)
    if out.json_mode:
        out.json(response)
        return
    out.table(views.TASK, [views.task_row(t) for t in response.records], empty="No tasks found")


@task.command("refresh")
@ids.job_argument()
@params.range_option("Instances to refresh", multiple=False)
def refresh(job_id: str, rng: Range | None) -> None:
    """Reload task runtimes and re-run their goal-state actions (debugging aid).

    \b
    Example:
      peloton task refresh 358fad26-73fa-43c8-a350-1e9067571a76 -r 0:5
    """
    response = context.client().refresh_tasks(job_id, rng or _ALL[0])
    context.out().result(response, f"Tasks of job {job_id} refreshed")


@task.command("start")
@ids.job_argument()
@params.range_option("Instances to start")
def start(job_id: str, ranges: tuple[Range, ...]) -> None:
    """Start tasks of a job (all by default).

    \b
    Example:
      peloton task start 358fad26-73fa-43c8-a350-1e9067571a76 -r 0:2 -r 5:6
    """
    response = context.client().start_tasks(job_id, ranges or _ALL)
    context.out().result(response, f"Tasks started successfully for instances: "
                                   f"{list(response.startedInstanceIds)} and failed instances are: "
                                   f"{list(response.invalidInstanceIds)}")


@task.command("stop")
@ids.job_argument()
@params.range_option("Instances to stop")
def stop(job_id: str, ranges: tuple[Range, ...]) -> None:
    """Stop tasks of a job; with no range, all of them.

    \b
    Example:
      peloton task stop 358fad26-73fa-43c8-a350-1e9067571a76 -r 0:1
    """
    client, out = context.client(), context.out()
    response = client.stop_tasks(job_id, ranges)
    if response.invalidInstanceIds:
        # As the original: one retry for the instances that could not be signalled.
        out.line("Retrying failed tasks")
        response = client.stop_tasks(job_id, ranges)
    if response.invalidInstanceIds:
        out.result(response, f"Some tasks failed to stop, failed_instance_ids:"
                             f"{list(response.invalidInstanceIds)}")
    else:
        out.result(response, f"Successfully signalled {len(response.stoppedInstanceIds)} tasks for stopping")


@task.command("restart")
@ids.job_argument()
@params.range_option("Instances to restart")
def restart(job_id: str, ranges: tuple[Range, ...]) -> None:
    """Restart tasks of a job (all by default).

    \b
    Example:
      peloton task restart 358fad26-73fa-43c8-a350-1e9067571a76 -r 3:4
    """
    response = context.client().restart_tasks(job_id, ranges or _ALL)
    context.out().result(response, "Job restarted")
