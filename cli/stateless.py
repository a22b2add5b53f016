"""`peloton job stateless`: service jobs over the v1alpha JobService.

Writes carry the job's entity version (`peloton job stateless get <job>
--summaryonly` shows it) and print the new one, as the original does; a
stale version is rejected with exit code 6.  Workflow control (restart,
start, stop, delete, pause, resume, abort, workflow events and lists) is
in stateless_workflow.py.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any, TypeVar

import click

from cli import context, ids, params, specs, summaries, views
from cli import update_options as update_opts
from cli.job import created_within
from cli.output import to_dict
from cli.stateless_workflow import current_version, finish_workflow
from peloton.api.client import PelotonClient
from peloton.api.gen.peloton.api.v1alpha import peloton_pb2 as v1
from peloton.api.gen.peloton.api.v1alpha.job.stateless import stateless_pb2
from peloton.api.gen.peloton.api.v1alpha.query import query_pb2
from peloton.api.gen.peloton.api.v1alpha.respool import respool_pb2 as v1_respool

JOB_STATES = list(stateless_pb2.JobState.keys())
F = TypeVar("F", bound=Callable[..., Any])


@click.group("stateless")
def stateless() -> None:
    """Manage stateless (service) jobs.

    \b
    Example:
      peloton job stateless create /DefaultResPool docs/examples/web-service.yaml 2
      peloton job stateless replace 91b1b8e5 docs/examples/web-service-v2.yaml 2 /DefaultResPool --wait
    """


def retry_options(what: str) -> Callable[[F], F]:
    """--maxInstanceRetries and --maxTolerableInstanceFailures."""
    def decorate(f: F) -> F:
        f = click.option("--maxTolerableInstanceFailures", "max_failures", default=0, type=int,
                         help=f"Instance failures tolerated before the {what} fails (0 = no limit).")(f)
        return click.option("--maxInstanceRetries", "max_retries", default=0, type=int,
                            help="Retries of an instance before it counts as failed (0 = unlimited).")(f)

    return decorate


def _pool(client: PelotonClient, path: str) -> v1.ResourcePoolID:
    return v1.ResourcePoolID(value=client.lookup_respool_id(path).id.value)


@stateless.command("create")
@params.lenient_option
@click.argument("respool")
@click.argument("spec", type=click.Path(exists=True, dir_okay=False))
@click.argument("batch_size", metavar="BATCH_SIZE", type=int)
@click.option("-i", "--jobID", "job_id", default="", help="Optional job ID (UUID).")
@click.option("--secret-path", default="", help="Secret mount path.")
@click.option("--secret-data", default="", help="Secret data string.")
@click.option("--start-paused", is_flag=True, help="Create the job with its create workflow paused.")
@click.option("--opaque-data", default="", help="Opaque data stored with the workflow.")
@retry_options("create")
@update_opts.flags
@params.queue_anyway_option
@params.wait_options("every pod is up")
def create(respool: str, spec: str, batch_size: int, job_id: str, secret_path: str, secret_data: str,
           start_paused: bool, opaque_data: str, max_retries: int, max_failures: int,
           watch_time: float | None, strategy: str | None, group_sizes: str, autopause: bool,
           queue_anyway: bool, wait: bool, wait_timeout: float) -> None:
    """Create a stateless job in RESPOOL from SPEC, BATCH_SIZE pods at a time.

    \b
    Example:
      peloton job stateless create /DefaultResPool docs/examples/web-service.yaml 2
    """
    client = context.client()
    job_spec = specs.load_job_spec(spec)
    job_spec.respool_id.CopyFrom(_pool(client, respool))
    if queue_anyway:
        params.add_queue_anyway(job_spec.labels, v1.Label)
    secrets = []
    if secret_path and secret_data:
        data = base64.b64encode(secret_data.encode())
        secrets = [v1.Secret(secret_id=v1.SecretID(value=""), path=secret_path,
                             value=v1.Secret.Value(data=data))]
    create_spec = stateless_pb2.CreateSpec(batch_size=batch_size, max_instance_retries=max_retries,
                                           max_tolerable_instance_failures=max_failures,
                                           start_paused=start_paused)
    response = client.create_stateless_job(
        job_spec, job_id=job_id, create_spec=create_spec, opaque_data=opaque_data, secrets=secrets,
        options=update_opts.options(watch_time, strategy, group_sizes, autopause))
    created, version = response.job_id.value, response.version.value
    finish_workflow(client, created, version, wait, wait_timeout,
                    f"Job {created} created. Entity Version: {version}", response)


@stateless.command("get")
@ids.job_argument()
@click.option("--jobversion", default="", help="Entity version of a past spec to show.")
@click.option("--summaryonly", is_flag=True, help="Only the job summary.")
@params.output_option
def get(job_id: str, jobversion: str, summaryonly: bool, output_format: str | None) -> None:
    """Summarize a stateless job: state, pods, workflow, containers.

    `-o yaml|json` (or -j) prints the full spec and status instead.

    \b
    Example:
      peloton job stateless get 358fad26-73fa-43c8-a350-1e9067571a76 --summaryonly
      peloton job stateless get 358fad26 -o yaml
    """
    client, out = context.client(), context.out()
    response = client.get_stateless_job(job_id, version=jobversion, summary_only=summaryonly)
    if out.json_mode or output_format:
        out.raw_as(response, "json" if out.json_mode else output_format or "yaml")
        return
    pool = response.job_info.spec.respool_id.value
    path = client.get_respool(pool).poolinfo.path.value if pool else ""
    summaries.stateless_job(out, response, path)


@stateless.command("replace")
@params.lenient_option
@ids.job_argument()
@click.argument("spec", type=click.Path(exists=True, dir_okay=False))
@click.argument("batch_size", metavar="BATCH_SIZE", type=int)
@click.argument("respool")
@click.argument("entity_version", metavar="[ENTITY_VERSION]", default="")
@click.option("-o", "--override", is_flag=True,
              help="Override an existing update (accepted for compatibility; a replace always does).")
@retry_options("update")
@click.option("--rollbackOnFailure", "rollback_on_failure", is_flag=True,
              help="Roll back if the update fails.")
@click.option("--start-paused", is_flag=True, help="Start the update paused.")
@click.option("--opaque-data", default="", help="Opaque data stored with the update.")
@click.option("--in-place", is_flag=True, help="Prefer each pod's current host.")
@click.option("--start-pods", is_flag=True, help="Start pods the update touches if they are not running.")
@update_opts.flags
@params.queue_anyway_option
@params.wait_options("the update ends")
def replace(job_id: str, spec: str, batch_size: int, respool: str, entity_version: str, override: bool,
            max_retries: int, max_failures: int, rollback_on_failure: bool, start_paused: bool,
            opaque_data: str, in_place: bool, start_pods: bool, watch_time: float | None,
            strategy: str | None, group_sizes: str, autopause: bool, queue_anyway: bool, wait: bool,
            wait_timeout: float) -> None:
    """Update JOB by replacing its spec with SPEC, BATCH_SIZE pods at a time.

    ENTITY_VERSION defaults to the job's current one.  `--watch-time`, `--strategy`,
    `--group-sizes` and `--autopause` are our extension (Aurora's update settings).

    \b
    Example:
      peloton job stateless replace 91b1b8e5-2ba8-11e7-bc23-0242ac11000d \\
          docs/examples/web-service-v2.yaml 0 /DefaultResPool 1-1-1 --in-place
      peloton job stateless replace 91b1b8e5 docs/examples/web-service-v2.yaml 1 /DefaultResPool \\
          --watch-time 30 --rollbackOnFailure --strategy var-batch --group-sizes 1,2 --autopause
    """
    client = context.client()
    job_spec = specs.load_job_spec(spec)
    job_spec.respool_id.CopyFrom(_pool(client, respool))
    if queue_anyway:
        params.add_queue_anyway(job_spec.labels, v1.Label)
    version = entity_version or current_version(client, job_id)
    update_spec = stateless_pb2.UpdateSpec(
        batch_size=batch_size, rollback_on_failure=rollback_on_failure, max_instance_retries=max_retries,
        max_tolerable_instance_failures=max_failures, start_paused=start_paused, in_place=in_place,
        start_pods=start_pods)
    response = client.replace_job(job_id, version, job_spec, update_spec, opaque_data=opaque_data,
                                  options=update_opts.options(watch_time, strategy, group_sizes,
                                                              autopause))
    finish_workflow(client, job_id, response.version.value, wait, wait_timeout,
                    f"New EntityVersion: {response.version.value}", response)


@stateless.command("rollback")
@ids.job_argument()
@click.argument("batch_size", metavar="BATCH_SIZE", type=int)
@click.argument("entity_version", metavar="ENTITY_VERSION")
@retry_options("rollback")
@click.option("--start-paused", is_flag=True, help="Start the rollback paused.")
@click.option("--opaque-data", default="", help="Opaque data stored with the rollback.")
@click.option("--in-place", is_flag=True, help="Prefer each pod's current host.")
@click.option("--start-pods", is_flag=True, help="Start pods the rollback touches if they are not running.")
@params.wait_options("the rollback ends")
def rollback(job_id: str, batch_size: int, entity_version: str, max_retries: int, max_failures: int,
             start_paused: bool, opaque_data: str, in_place: bool, start_pods: bool, wait: bool,
             wait_timeout: float) -> None:
    """Roll JOB back to the spec it had at ENTITY_VERSION (a replace with the old spec).

    \b
    Example:
      peloton job stateless rollback 91b1b8e5-2ba8-11e7-bc23-0242ac11000d 2 1-1-1
    """
    client = context.client()
    old = client.get_stateless_job(job_id, version=entity_version).job_info.spec
    old.ClearField("revision")
    update_spec = stateless_pb2.UpdateSpec(
        batch_size=batch_size, max_instance_retries=max_retries, max_tolerable_instance_failures=max_failures,
        start_paused=start_paused, in_place=in_place, start_pods=start_pods)
    response = client.replace_job(job_id, current_version(client, job_id), old, update_spec,
                                  opaque_data=opaque_data)
    finish_workflow(client, job_id, response.version.value, wait, wait_timeout,
                    f"New EntityVersion: {response.version.value}", response)


@stateless.command("replace-diff")
@params.lenient_option
@ids.job_argument()
@click.argument("spec", type=click.Path(exists=True, dir_okay=False))
@click.argument("respool")
@click.argument("entity_version", metavar="ENTITY_VERSION")
def replace_diff(job_id: str, spec: str, respool: str, entity_version: str) -> None:
    """Dry run of replace: which instances would be added, removed, updated or left alone.

    \b
    Example:
      peloton job stateless replace-diff 91b1b8e5 docs/examples/web-service-v2.yaml /DefaultResPool 1-1-1
    """
    client = context.client()
    job_spec = specs.load_job_spec(spec)
    job_spec.respool_id.CopyFrom(_pool(client, respool))
    context.out().json(client.get_replace_job_diff(job_id, entity_version, job_spec))


@stateless.command("list")
def list_() -> None:
    """List every job with its state and workflow progress.

    \b
    Example:
      peloton job stateless list
    """
    out = context.out()
    jobs = [j for batch in context.client().list_stateless_jobs() for j in batch.jobs]
    if out.json_mode:
        out.json({"jobs": [to_dict(j) for j in jobs]})
        return
    out.table(views.STATELESS_SUMMARY, [views.stateless_summary_row(j) for j in jobs], empty="No jobs found.")


@stateless.command("list-pods")
@ids.job_argument()
@params.range_option("Instances to show", multiple=False)
def list_pods(job_id: str, rng: tuple[int, int] | None) -> None:
    """List the pods of a job.

    \b
    Example:
      peloton job stateless list-pods 358fad26-73fa-43c8-a350-1e9067571a76 -r 0:10
    """
    out = context.out()
    pods = [p for batch in context.client().list_pods(job_id, rng or (0, params.MAX_INSTANCE))
            for p in batch.pods]
    if out.json_mode:
        out.json({"pods": [to_dict(p) for p in pods]})
        return
    rows = [row for p in pods for row in views.pod_rows(p.status, p.pod_name.value)]
    out.table(views.POD, rows, empty="No pods found")


@stateless.command("query")
@click.option("-l", "--labels", default="", help="Labels key=value,... to match.")
@click.option("-r", "--respool", default="", help="Resource pool path.")
@click.option("-k", "--keywords", default="", help="Comma-separated keywords.")
@click.option("-s", "--states", default="", help="Job states, e.g. JOB_STATE_RUNNING (prefix optional).")
@click.option("--owner", default="", help="Owning team.")
@click.option("--name", default="", help="Job name.")
@click.option("-d", "--timerange", default=0, type=int, help="Only jobs created in the last D days.")
@click.option("-n", "--limit", default=100, show_default=True, type=int, help="Maximum jobs to return.")
@click.option("-q", "--total", default=100, show_default=True, type=int, help="Total jobs to query.")
@click.option("-o", "--offset", default=0, type=int, help="Offset.")
@click.option("-p", "--sort", default="creation_time", show_default=True, help="Sort by property.")
@click.option("-a", "--sortorder", type=click.Choice(["ASC", "DESC"]), default="DESC", show_default=True,
              help="Sort order.")
def query(labels: str, respool: str, keywords: str, states: str, owner: str, name: str, timerange: int,
          limit: int, total: int, offset: int, sort: str, sortorder: str) -> None:
    """Query stateless jobs by labels, pool, keywords, states, owner, name and age.

    \b
    Example:
      peloton job stateless query --labels="x=y" --states=RUNNING -n 10
    """
    out = context.out()
    direction = query_pb2.OrderBy.ORDER_BY_ASC if sortorder == "ASC" else query_pb2.OrderBy.ORDER_BY_DESC
    since = created_within(timerange)
    spec = stateless_pb2.QuerySpec(
        pagination=query_pb2.PaginationSpec(
            offset=offset, limit=limit, max_limit=total,
            order_by=[query_pb2.OrderBy(order=direction, property=query_pb2.PropertyPath(value=p))
                      for p in params.csv(sort)]),
        labels=[v1.Label(key=k, value=v) for k, v in params.parse_labels(labels)],
        keywords=params.csv(keywords), job_states=params.enum_names(states, JOB_STATES, "JOB_STATE_"),
        owner=owner, name=name,
        respool=v1_respool.ResourcePoolPath(value=respool) if respool else None,
        creation_time_range=v1.TimeRange(min=since.min, max=since.max) if since else None)
    response = context.client().query_stateless_jobs(spec)
    if out.json_mode:
        out.json(response)
        return
    out.table(views.STATELESS_SUMMARY, [views.stateless_summary_row(j) for j in response.records],
              empty="No results found")
