"""`peloton job`: create, inspect, query, update and delete jobs (v0 JobManager).

Stopping, starting and restarting are in job_control.py; `job stateless`
(the v1alpha service-job commands) in stateless.py.  Argument order and
flags are the original CLI's.
"""

from __future__ import annotations

import base64
import time

import click
from google.protobuf.timestamp_pb2 import Timestamp

from cli import context, ids, params, specs, views
from cli.wait import summarize, wait_job
from peloton.api.explain import explain_job, ranges
from peloton.api.gen.peloton.api.v0 import peloton_pb2
from peloton.api.gen.peloton.api.v0.job import job_pb2
from peloton.api.gen.peloton.api.v0.query import query_pb2
from peloton.core.errors import InvalidArgument

JOB_STATES = list(job_pb2.JobState.keys())


@click.group("job")
def job() -> None:
    """Manage jobs.

    \b
    Example:
      peloton job create /DefaultResPool docs/examples/hello-job.yaml --wait
      peloton job query --states RUNNING
    """


def secrets(path: str, data: str) -> list[peloton_pb2.Secret]:
    """The original's --secret-path/--secret-data pair as a Secret (data base64-encoded)."""
    if not path or not data:
        return []
    encoded = base64.b64encode(data.encode()).decode()
    return [peloton_pb2.Secret(id=peloton_pb2.SecretID(value=""), path=path,
                               value=peloton_pb2.Secret.Value(data=encoded.encode()))]


@job.command("create")
@params.lenient_option
@click.argument("respool")
@click.argument("config", type=click.Path(exists=True, dir_okay=False))
@click.option("-i", "--jobID", "job_id", default="", help="Optional job ID (UUID).")
@click.option("--secret-path", default="", help="Secret mount path.")
@click.option("--secret-data", default="", help="Secret data string.")
@params.queue_anyway_option
@params.wait_options("the job ends (for services: until every task runs)")
def create(respool: str, config: str, job_id: str, secret_path: str, secret_data: str,
           queue_anyway: bool, wait: bool, wait_timeout: float) -> None:
    """Create a job in pool RESPOOL from a YAML CONFIG.

    \b
    Example:
      peloton job create /DefaultResPool docs/examples/hello-job.yaml
      peloton job create /DefaultResPool docs/examples/hello-job.yaml \\
          -i 358fad26-73fa-43c8-a350-1e9067571a76 --wait
    """
    client, out = context.client(), context.out()
    cfg = specs.load_job_config(config)
    cfg.respoolID.value = client.lookup_respool_id(respool).id.value
    if queue_anyway:
        params.add_queue_anyway(cfg.labels, peloton_pb2.Label)
    response = client.create_job(cfg, job_id=job_id, secrets=secrets(secret_path, secret_data))
    created = response.jobId.value
    out.result(response, f"Job {created} created")
    if wait:
        service = cfg.type == job_pb2.SERVICE
        state = wait_job(client, created, out, context.poller(wait_timeout), until_running=service)
        if not out.json_mode:
            out.line(f"Job {created} {state}")


@job.command("get")
@ids.job_argument()
def get(job_id: str) -> None:
    """Print a job's config and runtime (YAML, or JSON with -j).

    \b
    Example:
      peloton job get 358fad26-73fa-43c8-a350-1e9067571a76
    """
    context.out().document(context.client().get_job(job_id))


@job.command("status")
@ids.job_argument()
@params.output_option
def status(job_id: str, output_format: str | None) -> None:
    """Summarize a job: state, tasks by state, times, and why waiting tasks wait.

    `-o yaml|json` (or -j) prints the job's full v0 runtime instead.

    \b
    Example:
      peloton job status 358fad26
      peloton job status 358fad26-73fa-43c8-a350-1e9067571a76 -o yaml
    """
    client, out = context.client(), context.out()
    info = client.get_job(job_id).jobInfo
    runtime = info.runtime
    if out.json_mode or output_format:
        out.raw_as(runtime, "json" if out.json_mode else output_format or "yaml")
        return
    why = explain_job(client, job_id)
    stats = {k: int(v) for k, v in runtime.taskStats.items() if v}
    goal = views.enum_label(runtime, "goalState")
    state = views.enum_label(runtime, "state")
    out.fields([
        ("Job", f"{job_id} ({info.config.name}, {views.enum_label(info.config, 'type')})"),
        ("State", state + (f" (goal {goal})" if goal and goal != state else "")),
        ("Pool", why.pool.get("path", "")),
        ("Tasks", f"{info.config.instanceCount}: {summarize(stats) or 'none yet'}"),
        ("Created", views.when(runtime.creationTime)),
        ("Started", views.when(runtime.startTime)),
        ("Completed", views.when(runtime.completionTime)),
        ("Version", f"config {runtime.configurationVersion or runtime.configVersion}"),
    ])
    for group in why.waiting:
        label = "instance" if len(group["instances"]) == 1 else "instances"
        out.fields([(f"Waiting ({label} {ranges(group['instances'])})", group["reason"])])
    if why.waiting:
        out.line(f"(more: peloton job explain {job_id[:8]})")


@job.command("explain")
@ids.job_argument()
def explain(job_id: str) -> None:
    """Tell why a job's tasks wait: its pool's entitlement against demand and the queue,
    the cluster's capacity and largest host, and every waiting task's reason (admission,
    reservation, last placement report, or unplaceable).

    \b
    Example:
      peloton job explain 358fad26
    """
    out = context.out()
    story = explain_job(context.client(), job_id)
    if out.json_mode:
        out.json(story.as_dict())
        return
    for line in story.lines():
        out.wrapped(line)


@job.command("list")
@click.option("-s", "--states", default="",
              help="Comma-separated job states (e.g. RUNNING,PENDING); all by default.")
@click.option("-n", "--limit", default=50, show_default=True, type=int,
              help="Newest jobs to show.")
def list_(states: str, limit: int) -> None:
    """List jobs, newest first: id, name, type, state, tasks and pool.

    \b
    Example:
      peloton job list
      peloton job list --states RUNNING,PENDING -n 10
    """
    client, out = context.client(), context.out()
    spec = job_pb2.QuerySpec(
        jobStates=params.enum_names(states, JOB_STATES),
        pagination=query_pb2.PaginationSpec(limit=limit, maxLimit=limit,
                                             orderBy=order_by("creation_time", "DESC")))
    response = client.query_jobs(spec, summary_only=True)
    if out.json_mode:
        out.json(response)
        return
    pools = {p.id.value: p.path.value
             for p in client.query_respools().resourcePools}
    out.table(views.JOB_LIST, [views.job_list_row(j, pools) for j in response.results],
              empty="No jobs found.")


@job.command("delete")
@ids.job_argument()
def delete(job_id: str) -> None:
    """Delete a terminal job.

    \b
    Example:
      peloton job delete 358fad26-73fa-43c8-a350-1e9067571a76
    """
    response = context.client().delete_job(job_id)
    context.out().result(response, f"Job {job_id} deleted")


@job.command("refresh")
@ids.job_argument()
def refresh(job_id: str) -> None:
    """Reload a job's runtime and re-run its goal-state action (debugging aid).

    \b
    Example:
      peloton job refresh 358fad26-73fa-43c8-a350-1e9067571a76
    """
    response = context.client().refresh_job(job_id)
    context.out().result(response, f"Job {job_id} refreshed")


@job.command("cache")
@ids.job_argument()
def cache(job_id: str) -> None:
    """Print the job manager's cached view of a job.

    \b
    Example:
      peloton job cache 358fad26-73fa-43c8-a350-1e9067571a76
    """
    context.out().json(context.client().get_job_cache(job_id))


@job.command("active-list")
def active_list() -> None:
    """Print the IDs of all active jobs.

    \b
    Example:
      peloton job active-list
    """
    context.out().json(context.client().get_active_jobs())


@job.command("update")
@params.lenient_option
@ids.job_argument()
@click.argument("config", type=click.Path(exists=True, dir_okay=False))
@click.option("--secret-path", default="", help="Secret mount path.")
@click.option("--secret-data", default="", help="Secret data string.")
@params.queue_anyway_option
def update(job_id: str, config: str, secret_path: str, secret_data: str, queue_anyway: bool) -> None:
    """Replace a batch job's config, e.g. to add instances.

    \b
    Example:
      peloton job update 358fad26 docs/examples/hello-job.yaml  # with a larger instancecount
    """
    cfg = specs.load_job_config(config)
    if queue_anyway:
        params.add_queue_anyway(cfg.labels, peloton_pb2.Label)
    response = context.client().update_job(job_id, cfg)
    context.out().result(response, f"Job {response.id.value or job_id} updated\nMessage: {response.message}")


def order_by(sort: str, order: str) -> list[query_pb2.OrderBy]:
    """`--sort a,b --sortorder ASC` as v0 OrderBy clauses."""
    if order not in ("ASC", "DESC"):
        raise InvalidArgument(f"invalid sort order {order}; use ASC or DESC", field="sortorder")
    direction = query_pb2.OrderBy.ASC if order == "ASC" else query_pb2.OrderBy.DESC
    return [query_pb2.OrderBy(order=direction, property=query_pb2.PropertyPath(value=prop))
            for prop in params.csv(sort)]


def created_within(days: int, now: float | None = None) -> peloton_pb2.TimeRange | None:
    """The creation-time range "last `days` days" (None for 0)."""
    if days <= 0:
        return None
    end = time.time() if now is None else now
    return peloton_pb2.TimeRange(min=Timestamp(seconds=int(end - days * 86400)),
                                 max=Timestamp(seconds=int(end)))


@job.command("query")
@click.option("-l", "--labels", default="", help="Labels key=value,... to match.")
@click.option("-r", "--respool", default="", help="Resource pool path.")
@click.option("-k", "--keywords", default="", help="Comma-separated keywords.")
@click.option("-s", "--states", default="", help="Comma-separated job states, e.g. RUNNING,PENDING.")
@click.option("--owner", default="", help="Owning team.")
@click.option("--name", default="", help="Job name.")
@click.option("-d", "--timerange", default=0, type=int, help="Only jobs created in the last D days.")
@click.option("-n", "--limit", default=100, show_default=True, type=int, help="Maximum jobs to return.")
@click.option("-q", "--total", default=100, show_default=True, type=int, help="Total jobs to query.")
@click.option("-o", "--offset", default=0, type=int, help="Offset.")
@click.option("-p", "--sort", default="creation_time", show_default=True, help="Sort by property.")
@click.option("-a", "--sortorder", default="DESC", show_default=True, help="ASC or DESC.")
def query(labels: str, respool: str, keywords: str, states: str, owner: str, name: str, timerange: int,
          limit: int, total: int, offset: int, sort: str, sortorder: str) -> None:
    """Query jobs by labels, pool, keywords, states, owner, name and age.

    \b
    Example:
      peloton job query --labels="x=y,a=b" --respool=/DefaultResPool --states=RUNNING,KILLED -n 10
    """
    client, out = context.client(), context.out()
    spec = job_pb2.QuerySpec(
        labels=[peloton_pb2.Label(key=k, value=v) for k, v in params.parse_labels(labels)],
        keywords=params.csv(keywords), jobStates=params.enum_names(states, JOB_STATES),
        owner=owner, name=name, creationTimeRange=created_within(timerange),
        pagination=query_pb2.PaginationSpec(limit=limit, offset=offset, maxLimit=total,
                                            orderBy=order_by(sort, sortorder)))
    pool_id = client.lookup_respool_id(respool).id.value if respool else ""
    response = client.query_jobs(spec, respool_id=pool_id, summary_only=True)
    if out.json_mode:
        out.json(response)
        return
    out.table(views.JOB_SUMMARY, [views.job_summary_row(j) for j in response.results],
              empty="No jobs found.")
