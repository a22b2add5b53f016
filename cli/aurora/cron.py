"""`aurora cron schedule|deschedule|start|show`: cron jobs (the config has a `cron_schedule`)."""

from __future__ import annotations

from typing import Any

import click

from cli.aurora import options as o
from cli.aurora.context import AuroraContext, err, out
from cli.aurora.exit_codes import EXIT_COMMAND_FAILURE, EXIT_INVALID_PARAMETER, EXIT_OK, CommandError
from cli.aurora.options import JobKey
from cli.aurora.runner import verb


@click.group("cron")
def cron() -> None:
    """Work with entries in the aurora cron scheduler.

    \b
    Example:
      peloton aurora cron schedule devcluster/www/devel/nightly nightly.aurora
    """


@cron.command("schedule")
@o.bind_option
@o.read_json_option
@click.argument("jobspec", type=o.JOB_KEY)
@click.argument("config_file")
@verb
def schedule(ctx: AuroraContext, jobspec: JobKey, config_file: str, bindings: Any, read_json: bool) -> int:
    """Create a cron schedule for a job or replace the existing cron template with a new one.
    Only future runs will be affected, any existing active tasks are left intact.

    \b
    Example:
      peloton aurora cron schedule devcluster/www/devel/nightly nightly.aurora
    """
    config = ctx.get_job_config(jobspec, config_file, bindings, read_json)
    if not config.has_cron_schedule():
        raise CommandError(EXIT_COMMAND_FAILURE,
                           'Non-cron jobs may only be created with "aurora job create" command')
    ctx.check(ctx.call(jobspec.cluster, "scheduleCronJob", config.job()),
              err_msg=f"Error scheduling cron job {jobspec}:")
    out(f"Cron job scheduled, status can be viewed at {ctx.job_page(jobspec)}")
    return EXIT_OK


@cron.command("deschedule")
@click.argument("jobspec", type=o.JOB_KEY)
@verb
def deschedule(ctx: AuroraContext, jobspec: JobKey) -> int:
    """Remove the cron schedule for a job. Any active tasks are not affected; use
    "aurora job killall" to terminate them.

    \b
    Example:
      peloton aurora cron deschedule devcluster/www/devel/nightly
    """
    ctx.check(ctx.call(jobspec.cluster, "descheduleCronJob", jobspec.to_thrift()),
              err_msg=f"Error descheduling cron job {jobspec}:")
    out("Cron descheduling succeeded.")
    return EXIT_OK


@cron.command("start")
@o.bind_option
@o.open_browser_option
@o.config_option
@o.read_json_option
@click.argument("jobspec", type=o.JOB_KEY)
@verb
def start(ctx: AuroraContext, jobspec: JobKey, bindings: Any, open_browser: bool, config: str | None,
          read_json: bool) -> int:
    """Start a cron job immediately, outside of its normal cron schedule.

    \b
    Example:
      peloton aurora cron start devcluster/www/devel/nightly
    """
    ctx.get_job_config_optional(jobspec, config, bindings, read_json)
    ctx.check(ctx.call(jobspec.cluster, "startCronJob", jobspec.to_thrift()),
              err_msg=f"Error starting cron job {jobspec}:")
    if open_browser:
        click.launch(ctx.job_page(jobspec))
    return EXIT_OK


@cron.command("show")
@click.argument("jobspec", type=o.JOB_KEY)
@verb
def show(ctx: AuroraContext, jobspec: JobKey) -> int:
    """Get the scheduling status of a cron job.

    \b
    Example:
      peloton aurora cron show devcluster/www/devel/nightly
    """
    resp = ctx.check(ctx.call(jobspec.cluster, "getJobs", jobspec.role), err_code=EXIT_INVALID_PARAMETER,
                     err_msg=f"Error getting cron status for {jobspec} from server")
    for config in resp.result.getJobsResult.configs or []:
        if config.key.environment == jobspec.env and config.key.name == jobspec.name:
            if config.cronSchedule:
                out(f"{jobspec}\t {config.cronSchedule}")
                return EXIT_OK
            break
    err(f"No cron entry found for job {jobspec}")
    return EXIT_INVALID_PARAMETER
