"""`peloton cron ...`: cron jobs (our extension of Peloton's API; Aurora's cron semantics).

A cron job is a name, an Aurora-syntax schedule (UTC), a collision policy and
a batch job YAML in Peloton's format as the template; each run is a new batch
job created from it.  Native access is these commands (the job YAML has no
cron section, so a file stays a valid Peloton job config).
"""

from __future__ import annotations

import datetime

import click

from cli import context, specs
from peloton.api.client_cron import CREATE_ONLY, CREATE_OR_REPLACE, REPLACE_ONLY
from peloton.api.gen.pelotonpy.api.cron import cron_pb2

POLICIES = {"KILL_EXISTING": cron_pb2.COLLISION_POLICY_KILL_EXISTING,
            "CANCEL_NEW": cron_pb2.COLLISION_POLICY_CANCEL_NEW,
            "RUN_OVERLAP": cron_pb2.COLLISION_POLICY_RUN_OVERLAP}
POLICY_NAMES = {v: k for k, v in POLICIES.items()}


def _when(ms: int) -> str:
    if not ms:
        return "-"
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")


@click.group("cron")
def cron() -> None:
    """Cron jobs: batch jobs started on a schedule (Aurora's crontab syntax, UTC).

    \b
    Example:
      peloton cron schedule nightly /DefaultResPool docs/examples/hello-job.yaml --schedule '0 3 * * *'
      peloton cron list
    """


@cron.command("schedule")
@click.argument("name")
@click.argument("respool")
@click.argument("config", type=click.Path(exists=True, dir_okay=False))
@click.option("--schedule", "schedule", required=True, help="Aurora cron syntax, e.g. '*/5 * * * *'.")
@click.option("--collision-policy", type=click.Choice(sorted(POLICIES)), default="KILL_EXISTING",
              show_default=True, help="What a run does while the previous one is still active.")
@click.option("--replace/--create", "replace", default=None,
              help="Only replace an existing cron job / only create a new one (default: either).")
def schedule(name: str, respool: str, config: str, schedule: str, collision_policy: str,
             replace: bool | None) -> None:
    """Schedule NAME to run the batch job CONFIG in pool RESPOOL (or replace its template).

    \b
    Example:
      peloton cron schedule nightly /DefaultResPool docs/examples/hello-job.yaml --schedule '0 3 * * MON-FRI'
      peloton cron schedule hourly /DefaultResPool docs/examples/hello-job.yaml --schedule '0 * * * *'
    """
    client, out = context.client(), context.out()
    cfg = specs.load_job_config(config)
    cfg.respoolID.value = client.lookup_respool_id(respool).id.value
    job = cron_pb2.CronJob(name=name, schedule=schedule, collision_policy=POLICIES[collision_policy])
    job.batch_config.CopyFrom(cfg)
    mode = CREATE_OR_REPLACE if replace is None else REPLACE_ONLY if replace else CREATE_ONLY
    resp = client.schedule_cron_job(job, mode=mode)
    verb = "scheduled" if resp.created else "replaced"
    out.result(resp, f"Cron job {name} {verb}: {resp.job.schedule}, next run {_when(resp.job.next_run_ms)}")


@cron.command("deschedule")
@click.argument("name")
def deschedule(name: str) -> None:
    """Stop scheduling NAME (runs in progress go on).

    \b
    Example:
      peloton cron deschedule nightly
    """
    existed = context.client().deschedule_cron_job(name)
    context.out().line(f"Cron job {name} descheduled" if existed else f"Cron job {name} was not scheduled")


@cron.command("start")
@click.argument("name")
def start(name: str) -> None:
    """Start a run of NAME now, outside its schedule (the collision policy applies).

    \b
    Example:
      peloton cron start nightly
    """
    run = context.client().start_cron_job(name)
    context.out().line(f"Run of {name} started as job {run}" if run
                       else f"Run of {name} skipped: the previous run is active (CANCEL_NEW)")


@cron.command("get")
@click.argument("name")
def get(name: str) -> None:
    """Print a cron job (YAML-like, or JSON with -j).

    \b
    Example:
      peloton cron get nightly
    """
    job = context.client().get_cron_job(name)
    context.out().result(job, f"{job.name}: {job.schedule} ({POLICY_NAMES[job.collision_policy]}), "
                              f"next run {_when(job.next_run_ms)}, last run {job.last_run_job_id or '-'}")


@cron.command("list")
@click.option("--prefix", default="", help="Only cron jobs whose name starts with this.")
def list_(prefix: str) -> None:
    """List cron jobs with their schedule, policy, next and last run.

    \b
    Example:
      peloton cron list
    """
    jobs = context.client().list_cron_jobs(prefix)
    context.out().table(["NAME", "SCHEDULE", "POLICY", "NEXT RUN", "LAST RUN JOB"],
                        [[j.name, j.schedule, POLICY_NAMES[j.collision_policy], _when(j.next_run_ms),
                          j.last_run_job_id or "-"] for j in jobs], empty="No cron jobs")
