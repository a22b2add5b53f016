"""`peloton pod`: events, status, logs and control of single pods.

A pod is named `<job-id>-<instance>`.  `pod events` takes the job and
instance like the original (v0 TaskManager.GetPodEvents); the other
commands take the pod name and use the v1alpha PodService.
"""

from __future__ import annotations

import click

from cli import context, ids, params, views
from peloton.api.gen.peloton.api.v1alpha import peloton_pb2 as v1
from peloton.api.gen.peloton.api.v1alpha.pod import pod_pb2
from peloton.api.gen.peloton.api.v1alpha.query import query_pb2

POD_STATES = list(pod_pb2.PodState.keys())


@click.group("pod")
def pod() -> None:
    """Get pod details, events and logs; start, stop or restart a pod.

    \b
    Example:
      peloton pod events 358fad26-73fa-43c8-a350-1e9067571a76 0
      peloton pod get 358fad26-73fa-43c8-a350-1e9067571a76-0
    """


def print_pod_events(job_id: str, instance: int, run_id: str, limit: int) -> None:
    """Render v0 pod events of one instance (shared with `task events`)."""
    out = context.out()
    response = context.client().get_pod_events(job_id, instance, run_id=run_id, limit=limit)
    if out.json_mode:
        out.json(response)
        return
    out.table(views.POD_EVENTS, [views.pod_event_row(e) for e in response.result], empty="No events found.")


@pod.command("events")
@ids.job_argument()
@click.argument("instance", type=int)
@click.option("-r", "--run", "run_id", default="", type=ids.RUN_ID, help="Only events of this run ID.")
@click.option("-l", "--limit", default=0, type=int, help="Only the last N runs (server default 10).")
def events(job_id: str, instance: int, run_id: str, limit: int) -> None:
    """Show a pod's events in reverse chronological order.

    \b
    Example:
      peloton pod events 358fad26-73fa-43c8-a350-1e9067571a76 0 -l 3
    """
    print_pod_events(job_id, instance, run_id, limit)


@pod.command("events-v1alpha")
@click.argument("name", type=ids.POD_NAME)
@click.option("-p", "--id", "pod_id", default="", type=ids.RUN_ID,
              help="Pod (run) ID; the latest run by default.")
def events_v1alpha(name: str, pod_id: str) -> None:
    """Show the events of one run of a pod (v1alpha API).

    \b
    Example:
      peloton pod events-v1alpha 358fad26-73fa-43c8-a350-1e9067571a76-0
    """
    out = context.out()
    response = context.client().get_pod_events_v1(name, pod_id=pod_id)
    if out.json_mode:
        out.json(response)
        return
    out.table(views.POD_EVENTS_V1, [views.pod_event_v1_row(e) for e in response.events],
              empty="No events found.")


@pod.command("get")
@click.argument("name", type=ids.POD_NAME)
@click.option("--statusonly", is_flag=True, help="Only the status, not the spec.")
@click.option("--limit", default=0, type=int, help="How many previous runs to include (0 = all).")
@params.output_option
def get(name: str, statusonly: bool, limit: int, output_format: str | None) -> None:
    """Show a pod's current run and earlier runs, newest first, with why it waits or how it
    ended; `-o yaml|json` (or -j) prints the full PodInfo messages.

    \b
    Example:
      peloton pod get 358fad26-73fa-43c8-a350-1e9067571a76-0 --statusonly
      peloton pod get 358fad26-0 -o yaml
    """
    out = context.out()
    response = context.client().get_pod(name, status_only=statusonly, limit=limit)
    if out.json_mode or output_format:
        out.raw_as(response, "json" if out.json_mode else output_format or "yaml")
        return
    runs = [response.current, *response.previous]
    rows = [row for info in runs for row in views.pod_rows(info.status, name)]
    out.table(views.POD, rows, empty="No pod found")


@pod.command("logs")
@click.argument("name", type=ids.POD_NAME)
@click.option("-f", "--filename", default="stdout", show_default=True, help="Sandbox file to print.")
@click.option("-p", "--id", "pod_id", default="", type=ids.RUN_ID,
              help="Pod (run) ID; the latest run by default.")
def logs(name: str, filename: str, pod_id: str) -> None:
    """Print a file (stdout by default) from a pod's sandbox.

    \b
    Example:
      peloton pod logs 358fad26-73fa-43c8-a350-1e9067571a76-0 -f stderr
    """
    context.out().raw(context.client().read_pod_file(name, filename, pod_id=pod_id))


def _simple(verb: str, help_text: str) -> click.Command:
    def command(name: str) -> None:
        client = context.client()
        call = {"start": client.start_pod, "stop": client.stop_pod, "restart": client.restart_pod,
                "refresh": client.refresh_pod}[verb]
        context.out().document(call(name))

    command.__doc__ = (f"{help_text}\n\n\b\nExample:\n"
                       f"  peloton pod {verb} 358fad26-73fa-43c8-a350-1e9067571a76-0\n")
    return click.command(verb)(click.argument("name", type=ids.POD_NAME)(command))


pod.add_command(_simple("start", "Start a pod."))
pod.add_command(_simple("stop", "Stop a pod."))
pod.add_command(_simple("restart", "Restart a pod with a new run."))
pod.add_command(_simple("refresh", "Reload a pod and re-run its goal-state action (debugging aid)."))


@pod.command("cache")
@click.argument("name", type=ids.POD_NAME)
def cache(name: str) -> None:
    """Show the job manager's cached status of a pod.

    \b
    Example:
      peloton pod cache 358fad26-73fa-43c8-a350-1e9067571a76-0
    """
    context.out().document(context.client().get_pod_cache(name))


@pod.command("delete-events")
@click.argument("name", type=ids.POD_NAME)
@click.argument("pod_id", metavar="ID", type=ids.RUN_ID)
def delete_events(name: str, pod_id: str) -> None:
    """Delete the stored events of one run of a pod.

    \b
    Example:
      peloton pod delete-events 358fad26-0 358fad26-0-3
    """
    context.out().document(context.client().delete_pod_events(name, pod_id))


@pod.command("query")
@ids.job_argument()
@click.option("-s", "--states", default="", help="Pod states, e.g. POD_STATE_RUNNING (prefix optional).")
@click.option("--names", default="", help="Comma-separated pod names.")
@click.option("--hosts", default="", help="Comma-separated hosts.")
@click.option("-n", "--limit", default=100, show_default=True, type=int, help="Limit.")
@click.option("-o", "--offset", default=0, type=int, help="Offset.")
@click.option("-p", "--sort", type=click.Choice(["creation_time", "host", "instance_id", "message", "name",
                                                 "reason", "state"]), default=None, help="Sort by.")
@click.option("-a", "--sortorder", type=click.Choice(["ASC", "DESC"]), default="ASC", show_default=True,
              help="Sort order.")
def query(job_id: str, states: str, names: str, hosts: str, limit: int, offset: int, sort: str | None,
          sortorder: str) -> None:
    """Query the pods of a job by state, name and host.

    \b
    Example:
      peloton pod query 358fad26-73fa-43c8-a350-1e9067571a76 -s RUNNING -p instance_id
    """
    out = context.out()
    direction = query_pb2.OrderBy.ORDER_BY_ASC if sortorder == "ASC" else query_pb2.OrderBy.ORDER_BY_DESC
    order = [query_pb2.OrderBy(order=direction, property=query_pb2.PropertyPath(value=sort))] if sort else []
    pagination = query_pb2.PaginationSpec(limit=limit, offset=offset, order_by=order)
    spec = pod_pb2.QuerySpec(pod_states=params.enum_names(states, POD_STATES, "POD_STATE_"),
                             names=[v1.PodName(value=n) for n in params.csv(names)],
                             hosts=params.csv(hosts), pagination=pagination)
    response = context.client().query_pods(job_id, spec, pagination=pagination)
    if out.json_mode:
        out.json(response)
        return
    rows = [row for p in response.pods for row in views.pod_rows(p.status, p.spec.pod_name.value)]
    out.table(views.POD, rows, empty="No pods found")
