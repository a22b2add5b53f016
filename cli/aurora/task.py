"""`aurora task ssh|run`: a shell on, or a command run on, the hosts of a job's tasks, over ssh.

As Aurora's client: the command's `{{mesos.instance}}`, `{{mesos.hostname}}`,
`{{thermos.task_id}}` and `{{thermos.ports[name]}}` are bound per task, and
ssh logs in as the job's role (`--ssh-user` to change it).  What differs on
this scheduler: tasks run on Peloton agents, which have no Thermos executor,
so `--executor-sandbox` is refused; the task's sandbox is
`<sandbox_root>/<task id>` when the cluster's clusters.json entry names
`sandbox_root` (the agents' `sandboxes` directory), and the command starts
there; without it the command runs in the login directory.  Hosts are the
agents' names, so they must resolve for ssh.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import click
from pystachio import Environment, String

from aurorabridge.client.schema import MesosContext, ThermosContext
from aurorabridge.thrift_api import api
from cli.aurora import options as o
from cli.aurora.context import AuroraContext, out
from cli.aurora.exit_codes import EXIT_COMMAND_FAILURE, EXIT_INVALID_PARAMETER, EXIT_OK, CommandError
from cli.aurora.options import InstanceSpec, JobKey
from cli.aurora.runner import verb

NO_EXECUTOR_SANDBOX = ("--executor-sandbox is not supported: tasks run on Peloton agents, which have no "
                       "Thermos executor sandbox")


def substitute(ctx: AuroraContext, key: JobKey, command: str, task: Any) -> str:
    """`command` with the task's templates bound, starting in its sandbox when known."""
    assigned = task.assignedTask
    env = Environment(thermos=ThermosContext(task_id=assigned.taskId, ports=assigned.assignedPorts or {}),
                      mesos=MesosContext(instance=assigned.instanceId, hostname=assigned.slaveHost or ""))
    bound = str((String(command) % env).get())
    root = ctx.clusters[key.cluster].attributes.get("sandbox_root")
    return f"cd {shlex.quote(str(root).rstrip('/') + '/' + assigned.taskId)}; {bound}" if root else bound


def _ssh() -> str:
    found = shutil.which("ssh")
    if found is None:
        raise CommandError(EXIT_COMMAND_FAILURE, "ssh is not installed: aurora task ssh/run log in to "
                           "the task's host with it")
    return found


def _tasks(ctx: AuroraContext, key: JobKey, instances: list[int] | None) -> list[Any]:
    query = api.TaskQuery(jobKeys=[key.to_thrift()], statuses=set(api.LIVE_STATES),
                          instanceIds=set(instances) if instances else None)
    resp = ctx.check(ctx.call(key.cluster, "getTasksStatus", query),
                     err_msg="Unable to get information about instance:")
    return list(resp.result.scheduleStatusResult.tasks or [])


def _ssh_options(f: Any) -> Any:
    f = click.option("--ssh-options", default=None, metavar="ssh_options",
                     help="A string of space separated system ssh options.")(f)
    f = click.option("--ssh-user", "-l", default=None, metavar="ssh_username",
                     help="ssh as this username instead of the job's role")(f)
    return click.option("--executor-sandbox", is_flag=True,
                        help="Run the command in the executor sandbox (not supported here)")(f)


@click.group("task")
def task() -> None:
    """Work with a task running in an Apache Aurora cluster.

    \b
    Example:
      peloton aurora task run devcluster/www/devel/hello 'hostname'
    """


@task.command("run")
@click.option("--threads", "-t", "num_threads", type=int, default=1, help="Number of threads to use")
@_ssh_options
@click.argument("instance_spec", type=o.INSTANCE_SPEC)
@click.argument("cmd", metavar="unix_command_line")
@verb
def run(ctx: AuroraContext, instance_spec: InstanceSpec, cmd: str, num_threads: int, ssh_user: str | None,
        ssh_options: str | None, executor_sandbox: bool) -> int:
    """Run a shell command on the hosts of a job's instances; each output line is prefixed with
    its host.

    \b
    Example:
      peloton aurora task run devcluster/www/devel/hello/0 'ls'
    """
    if executor_sandbox:
        raise CommandError(EXIT_INVALID_PARAMETER, NO_EXECUTOR_SANDBOX)
    key = instance_spec.key
    ssh = _ssh()

    def one(t: Any) -> str:
        host = t.assignedTask.slaveHost
        argv = [ssh, "-n", "-q", *(ssh_options or "").split(), f"{ssh_user or key.role}@{host}",
                substitute(ctx, key, cmd, t)]
        done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False)
        lines = done.stdout.splitlines()
        if done.returncode == 255 and not lines:  # ssh's own failure, silenced by -q
            lines = [f"ssh to {host} failed (exit 255): the host must run sshd and accept "
                     f"{ssh_user or key.role}"]
        return "\n".join(f"{host}:  {line}" for line in lines)

    with ThreadPoolExecutor(max(1, num_threads)) as pool:
        for result in pool.map(one, _tasks(ctx, key, instance_spec.instances)):
            if result:
                out(result)
    return EXIT_OK


@task.command("ssh")
@_ssh_options
@click.option("--tunnels", "-L", multiple=True, metavar="PORT:NAME",
              help="Add tunnel from local port PORT to remote named port NAME")
@click.option("--command", "-c", default=None, metavar="unix_command_line",
              help="Command to execute through the ssh connection.")
@click.option("--pid-file", "-p", default=None, metavar="pid_file",
              help="File in which to store the PID of the resulting ssh call")
@click.argument("instance_spec", type=o.INSTANCE_SPEC)
@verb
def ssh_cmd(ctx: AuroraContext, instance_spec: InstanceSpec, ssh_user: str | None, ssh_options: str | None,
            executor_sandbox: bool, tunnels: tuple[str, ...], command: str | None,
            pid_file: str | None) -> int:
    """Open an SSH session on the host a task instance runs on.

    \b
    Example:
      peloton aurora task ssh devcluster/www/devel/hello/0
    """
    if executor_sandbox:
        raise CommandError(EXIT_INVALID_PARAMETER, NO_EXECUTOR_SANDBOX)
    key, instances = instance_spec.key, instance_spec.instances
    if instances is None and command:
        raise CommandError(EXIT_INVALID_PARAMETER,
                           "INSTANCE must be specified when --command option is given")
    tasks = _tasks(ctx, key, instances)
    if not tasks:
        raise CommandError(EXIT_INVALID_PARAMETER, f"Job {key} not found")
    first = tasks[0].assignedTask
    argv = [_ssh(), "-t", *(ssh_options or "").split()]
    for tunnel in tunnels:
        port, _, name = tunnel.partition(":")
        if not port.isdigit() or not name:
            raise CommandError(EXIT_INVALID_PARAMETER, f"Could not parse tunnel: {tunnel}.  Must be of "
                               "form PORT:NAME")
        if name not in (first.assignedPorts or {}):
            raise CommandError(EXIT_INVALID_PARAMETER, f"Task {first.taskId} has no port named {name}")
        argv += ["-L", f"{int(port)}:{first.slaveHost}:{first.assignedPorts[name]}"]
    argv += [f"{ssh_user or key.role}@{first.slaveHost}", substitute(ctx, key, command or "bash", tasks[0])]
    process = subprocess.Popen(argv)
    if pid_file:
        with open(pid_file, "w", encoding="utf-8") as fh:
            fh.write(str(process.pid))
    return process.wait()
