"""`aurora job kill|killall|restart`, in batches as Aurora's client runs them.

kill/killall: the active instances (those named, for kill) are killed
`--batch-size` at a time, each batch waited for until its tasks are terminal
(150 s at most; a batch not killed in time counts as an error, more errors
than `--max-total-failures` stop the command with exit 4); `--no-batching`
kills them with one call.  restart: restartShards per batch, then each
restarted instance must run a new task for `--watch-secs`; instances that do
not are retried, up to `--max-per-instance-failures` times each and
`--max-total-failures` in all.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from cli.aurora import monitor
from cli.aurora import options as o
from cli.aurora.context import AuroraContext, err, out
from cli.aurora.exit_codes import (
    EXIT_COMMAND_FAILURE,
    EXIT_INVALID_PARAMETER,
    EXIT_OK,
    EXIT_TIMEOUT,
    CommandError,
)
from cli.aurora.jobs import job
from cli.aurora.options import InstanceSpec, JobKey
from cli.aurora.runner import verb

F = TypeVar("F", bound=Callable[..., Any])


def _kill_options(f: F) -> F:
    for decorator in reversed([
        o.open_browser_option, o.bind_option, o.read_json_option, o.config_option,
        click.option("--batch-size", type=int, default=1, show_default=True,
                     help="Number of instances to be operate on in one iteration"),
        click.option("--max-total-failures", type=int, default=0, show_default=True,
                     help="Maximum number of instance failures to be tolerated in total"),
        click.option("--no-batching", is_flag=True,
                     help="Run the command on all instances at once, instead of running in batches"),
        click.option("--message", "-m", default=None,
                     help="Message to include with the kill state transition")]):
        f = decorator(f)
    return f


def _wait_killed(ctx: AuroraContext, key: JobKey, instances: list[int] | None) -> int:
    if monitor.wait_until(ctx, key, monitor.terminal, instances, timeout=monitor.KILL_WAIT_SECS):
        return EXIT_OK
    err(f"Instances {instances} were not killed in time")
    return EXIT_TIMEOUT


def _kill_call(ctx: AuroraContext, key: JobKey, instances: list[int] | None, message: str | None,
               err_msg: str = "Command failure:") -> None:
    ctx.check(ctx.call(key.cluster, "killTasks", key.to_thrift(), set(instances) if instances else None,
                       message), err_msg=err_msg)


def _kill(ctx: AuroraContext, key: JobKey, instances: list[int] | None, p: dict[str, Any]) -> int:
    ctx.get_job_config_optional(key, p["config"], p["bindings"], p["read_json"])
    if p["no_batching"]:
        _kill_call(ctx, key, instances, p["message"])
        code = _wait_killed(ctx, key, instances)
        if code != EXIT_OK:
            return code
    else:
        active = {t.assignedTask.instanceId for t in ctx.active_tasks(key)}
        if not active:
            err(f"No tasks to kill found for job {key}")
            return EXIT_INVALID_PARAMETER
        pending = sorted(active & set(instances) if instances is not None else active)
        errors = 0
        while pending:
            batch, pending = pending[:max(1, p["batch_size"])], pending[max(1, p["batch_size"]):]
            _kill_call(ctx, key, batch, p["message"], f"Kill of instances {batch} failed with error:")
            if _wait_killed(ctx, key, batch) != EXIT_OK:
                errors += 1
                if errors > p["max_total_failures"]:
                    raise CommandError(EXIT_COMMAND_FAILURE,
                                       "Exceeded maximum number of errors while killing instances")
            else:
                out(f"Successfully killed instances {batch}")
        if errors:
            raise CommandError(EXIT_COMMAND_FAILURE, "Errors occurred while killing instances")
    if p["open_browser"]:
        click.launch(ctx.job_page(key))
    return EXIT_OK


@job.command("kill")
@_kill_options
@o.strict_option
@click.argument("instance_spec", type=o.INSTANCE_SPEC)
@verb
def kill(ctx: AuroraContext, instance_spec: InstanceSpec, strict: bool, **p: Any) -> int:
    """Kill instances in a scheduled job.

    \b
    Example:
      peloton aurora job kill devcluster/www/devel/hello/1-2
    """
    key, instances = instance_spec.key, instance_spec.instances
    if instances is None:
        raise CommandError(EXIT_INVALID_PARAMETER, "The instances list cannot be omitted in a kill "
                           "command!; use killall to kill all instances")
    if ctx.has_count_or_percentage_sla_policy(key):
        out("WARNING: Killing instances without updating SlaPolicy.")
    if strict:
        ctx.active_instances_or_raise(key, instances)
    code = _kill(ctx, key, instances, p)
    if code == EXIT_OK:
        out("Job kill succeeded")
    return code


@job.command("killall")
@_kill_options
@click.argument("jobspec", type=o.JOB_KEY)
@verb
def killall(ctx: AuroraContext, jobspec: JobKey, **p: Any) -> int:
    """Kill all instances of a scheduled job.

    \b
    Example:
      peloton aurora job killall devcluster/www/devel/hello
    """
    code = _kill(ctx, jobspec, None, p)
    if code == EXIT_OK:
        out("Job killall succeeded")
    return code


@job.command("restart")
@click.option("--batch-size", type=int, default=1, show_default=True,
              help="Number of instances to be operate on in one iteration")
@o.bind_option
@o.open_browser_option
@o.config_option
@click.option("--force", is_flag=True, help="Force execution of the command even if there is a warning")
@click.option("--healthcheck-interval-seconds", type=int, default=3, show_default=True,
              help="Number of seconds between healthchecks while monitoring the restart")
@o.read_json_option
@click.option("--max-total-failures", type=int, default=0, show_default=True,
              help="Maximum number of instance failures to be tolerated in total before aborting.")
@o.strict_option
@click.option("--watch-secs", type=int, default=30, show_default=True,
              help="Minimum number of seconds a instance must remain in RUNNING state before "
              "considered a success.")
@click.option("--max-per-instance-failures", type=int, default=0, show_default=True,
              help="Maximum number of restarts per instance during restart.")
@click.argument("instance_spec", type=o.INSTANCE_SPEC)
@verb
def restart(ctx: AuroraContext, instance_spec: InstanceSpec, batch_size: int, max_total_failures: int,
            strict: bool, watch_secs: int, max_per_instance_failures: int,
            healthcheck_interval_seconds: int, open_browser: bool, config: str | None, bindings: Any,
            read_json: bool, **_: Any) -> int:
    """Perform a rolling restart of instances within a job (batches driven by the client).

    \b
    Example:
      peloton aurora job restart devcluster/www/devel/hello --watch-secs 5
    """
    if max_total_failures < 0:
        err(f"max_total_failures option must be >0, but you specified {max_total_failures}")
        return EXIT_INVALID_PARAMETER
    key, instances = instance_spec.key, instance_spec.instances
    if instances is not None and strict:
        ctx.active_instances_or_raise(key, instances)
    ctx.get_job_config_optional(key, config, bindings, read_json)
    active = ctx.active_tasks(key)
    pending = sorted(instances) if instances else sorted(t.assignedTask.instanceId for t in active)
    failures: dict[int, int] = {}

    def failed_total() -> int:
        return sum(1 for n in failures.values() if n > max_per_instance_failures)

    while pending and failed_total() <= max_total_failures:
        batch, pending = pending[:max(1, batch_size)], pending[max(1, batch_size):]
        old_ids = {t.assignedTask.taskId for t in ctx.query(key, instances=batch)}
        ctx.check(ctx.call(key.cluster, "restartShards", key.to_thrift(), set(batch)),
                  err_msg=f"Error restarting job {key}:")
        failed = monitor.watch_restart(ctx, key, batch, old_ids, watch_secs, healthcheck_interval_seconds)
        for instance in sorted(failed):
            failures[instance] = failures.get(instance, 0) + 1
            if failures[instance] <= max_per_instance_failures:
                pending.append(instance)
    if failed_total() > max_total_failures:
        raise CommandError(EXIT_COMMAND_FAILURE, f"Restart of job {key} failed: instances "
                           f"{sorted(i for i, n in failures.items() if n > max_per_instance_failures)}"
                           " did not stay RUNNING")
    out(f"Job {key} restarted successfully")
    if open_browser:
        click.launch(ctx.job_page(key))
    return EXIT_OK
