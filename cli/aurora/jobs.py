"""`aurora job create|update|inspect|diff|list|open|add` (kill, killall, restart: job_kill.py;
status: job_status.py)."""

from __future__ import annotations

from typing import Any

import click

from aurorabridge.client.config import JobConfig
from aurorabridge.thrift_api import api
from cli.aurora import monitor
from cli.aurora import options as o
from cli.aurora.context import AuroraContext, err, out
from cli.aurora.diff import show_cron_diff, show_update_diff
from cli.aurora.exit_codes import EXIT_COMMAND_FAILURE, EXIT_INVALID_CONFIGURATION, EXIT_OK, CommandError
from cli.aurora.options import InstanceSpec, JobKey
from cli.aurora.runner import verb
from cli.aurora.updates import start_update

WAIT_UNTIL = click.option("--wait-until", type=click.Choice(["PENDING", "RUNNING", "FINISHED"]),
                          default="PENDING", show_default=True,
                          help="Block the client until all the tasks have transitioned into the "
                          "requested state.")


@click.group("job")
def job() -> None:
    """Work with an aurora job.

    \b
    Example:
      peloton aurora job create devcluster/www/devel/hello hello.aurora
    """


def wait_for_state(ctx: AuroraContext, state: str, key: JobKey, instances: list[int] | None = None) -> None:
    """Wait for the instances to be RUNNING or FINISHED as asked (PENDING: no wait)."""
    if state == "RUNNING":
        monitor.wait_until(ctx, key, monitor.running_or_finished, instances)
    elif state == "FINISHED":
        monitor.wait_until(ctx, key, monitor.terminal, instances)


@job.command("create")
@o.bind_option
@o.read_json_option
@WAIT_UNTIL
@o.open_browser_option
@click.argument("jobspec", type=o.JOB_KEY)
@click.argument("config_file")
@verb
def create(ctx: AuroraContext, jobspec: JobKey, config_file: str, bindings: Any, read_json: bool,
           wait_until: str, open_browser: bool) -> int:
    """Create a service or ad hoc job using aurora.

    \b
    Example:
      peloton aurora job create devcluster/www/devel/hello hello.aurora --wait-until RUNNING
    """
    config = ctx.get_job_config(jobspec, config_file, bindings, read_json)
    if config.has_cron_schedule():
        raise CommandError(EXIT_COMMAND_FAILURE,
                           'Cron jobs may only be scheduled with "aurora cron schedule" command')
    ctx.check(ctx.call(jobspec.cluster, "createJob", config.job()), err_code=EXIT_COMMAND_FAILURE,
              err_msg="Job creation failed due to error:")
    if open_browser:
        click.launch(ctx.job_page(jobspec))
    wait_for_state(ctx, wait_until, jobspec)
    if not ctx.query(jobspec):
        err(f"Error occurred while creating job {jobspec}")
        return EXIT_COMMAND_FAILURE
    out(f"Job create succeeded: job url={ctx.job_page(jobspec)}")
    return EXIT_OK


@job.command("update")
@o.bind_option
@o.read_json_option
@o.message_option
@click.argument("instance_spec", type=o.INSTANCE_SPEC)
@click.argument("config_file")
@verb
def update(ctx: AuroraContext, instance_spec: InstanceSpec, config_file: str, bindings: Any,
           read_json: bool, message: str | None) -> int:
    """Update a job to a new config and wait for the update to end (`update start --wait`;
    Aurora's client before 0.9 updated jobs with this verb).

    \b
    Example:
      peloton aurora job update devcluster/www/devel/hello hello.aurora
    """
    return start_update(ctx, instance_spec, config_file, bindings, read_json, message, True, False)


def _print_config(config: JobConfig) -> None:
    job_, thrift = config.raw(), config.job()
    out("Job level information")
    out(f"name:       '{config.name()}'", indent=2)
    out(f"role:       '{config.role()}'", indent=2)
    if job_.has_contact():
        out(f"contact:    '{job_.contact()}'", indent=2)
    out(f"cluster:    '{config.cluster()}'", indent=2)
    out(f"instances:  '{config.instances()}'", indent=2)
    if job_.has_cron_schedule():
        out("cron:", indent=2)
        out(f"schedule: '{job_.cron_schedule()}'", indent=4)
        out(f"policy:   '{job_.cron_collision_policy()}'", indent=4)
    if job_.has_constraints():
        out("constraints:", indent=2)
        for name, value in job_.constraints().get().items():
            out(f"'{name}': '{value}'", indent=4)
    if job_.has_partition_policy():
        out("partition_policy:", indent=2)
        out(f"reschedule: {job_.partition_policy().reschedule()}", indent=4)
        out(f"delay_secs: '{job_.partition_policy().delay_secs()}'", indent=4)
    out(f"service:    {thrift.taskConfig.isService}", indent=2)
    out(f"production: {bool(job_.production().get())}", indent=2)
    out("")
    task = job_.task()
    out("Task level information")
    out(f"name: '{task.name()}'", indent=2)
    if len(task.constraints().get()) > 0:
        out("constraints:", indent=2)
        for constraint in task.constraints():
            out(" < ".join(str(n) for n in (constraint.order() or [])), indent=2)
    out("")
    for process in task.processes():
        out(f"Process '{process.name()}':")
        for flag in ("daemon", "ephemeral", "final"):
            if getattr(process, flag)().get():
                out(flag, indent=2)
        out("cmdline:", indent=2)
        for line in process.cmdline().get().splitlines():
            out(line, indent=4)
        out("")


@job.command("inspect")
@o.bind_option
@o.read_json_option
@o.write_json_option
@click.option("--raw", is_flag=True, help="Show the raw configuration.")
@click.argument("jobspec", type=o.JOB_KEY)
@click.argument("config_file")
@verb
def inspect(ctx: AuroraContext, jobspec: JobKey, config_file: str, bindings: Any, read_json: bool,
            write_json: bool, raw: bool) -> int:
    """Verify that a job can be parsed from a configuration file, and display the parsed
    configuration.

    \b
    Example:
      peloton aurora job inspect devcluster/www/devel/hello hello.aurora
    """
    config = ctx.get_job_config(jobspec, config_file, bindings, read_json)
    if raw:
        out(str(config.job()))
    elif write_json:
        out(config.raw().json_dumps())
    else:
        _print_config(config)
    return EXIT_OK


@job.command("diff")
@o.bind_option
@o.read_json_option
@click.option("--from", "rename_from", type=o.JOB_KEY, default=None, metavar="cluster/role/env/name",
              help="If specified, the job key to diff against.")
@click.argument("instance_spec", type=o.INSTANCE_SPEC)
@click.argument("config_file")
@verb
def diff(ctx: AuroraContext, instance_spec: InstanceSpec, config_file: str, bindings: Any,
         read_json: bool, rename_from: JobKey | None) -> int:
    """Compare a job configuration against a running job.

    \b
    Example:
      peloton aurora job diff devcluster/www/devel/hello hello.aurora
    """
    config = ctx.get_job_config(instance_spec.key, config_file, bindings, read_json)
    target = rename_from or instance_spec.key
    resp = ctx.check(ctx.call(target.cluster, "populateJobConfig", config.job()),
                     err_code=EXIT_INVALID_CONFIGURATION, err_msg="Error loading configuration")
    local = resp.result.populateJobResult.taskConfig
    if config.has_cron_schedule():
        return show_cron_diff(ctx, target, [local] * config.instances())
    local.job = target.to_thrift()
    request = api.JobUpdateRequest(taskConfig=local, instanceCount=config.instances(),
                                   settings=config.update_settings(instance_spec.instances))
    show_update_diff(ctx, target, request, local)
    return EXIT_OK


@job.command("list")
@click.argument("jobspec", type=o.PARTIAL_KEY)
@verb
def list_cmd(ctx: AuroraContext, jobspec: tuple[str, str, str, str]) -> int:
    """List jobs that match a jobkey or jobkey pattern.

    \b
    Example:
      peloton aurora job list devcluster/www
    """
    for key in ctx.jobs_matching(jobspec):
        out(str(key))
    return EXIT_OK


@job.command("open")
@click.argument("key", metavar="cluster[/role[/env[/job]]]")
@verb
def open_cmd(ctx: AuroraContext, key: str) -> int:
    """Open a job's scheduler page in the web browser (and print its address).

    \b
    Example:
      peloton aurora job open devcluster/www/devel/hello
    """
    parts = key.split("/")
    base = ctx.clusters[parts[0]].proxy_url if parts[0] in ctx.clusters else None
    url = (base or ctx.api(parts[0]).url).rstrip("/") + "/scheduler"
    for part in parts[1:4]:
        url += f"/{part}"
    out(url)
    click.launch(url)
    return EXIT_OK


@job.command("add")
@o.bind_option
@WAIT_UNTIL
@o.config_option
@o.read_json_option
@o.open_browser_option
@click.argument("task_instance", type=o.TASK_INSTANCE)
@click.argument("instance_count", type=int)
@verb
def add(ctx: AuroraContext, task_instance: tuple[JobKey, int], instance_count: int, wait_until: str,
        open_browser: bool, **_: Any) -> int:
    """Add instances to a scheduled job, copying the config of the given instance.

    \b
    Example:
      peloton aurora job add devcluster/www/devel/hello/0 2
    """
    key, instance = task_instance
    active = ctx.active_instances_or_raise(key, [instance])
    first = max(active) + 1
    if ctx.has_count_or_percentage_sla_policy(key):
        out("WARNING: Adding instances without updating SlaPolicy.")
    ctx.check(ctx.call(key.cluster, "addInstances",
                       api.InstanceKey(jobKey=key.to_thrift(), instanceId=instance), instance_count))
    wait_for_state(ctx, wait_until, key, list(range(first, first + instance_count)))
    if open_browser:
        click.launch(ctx.job_page(key))
    return EXIT_OK
