"""`peloton agent`: run a local host agent in the foreground."""

from __future__ import annotations

import click


@click.command("agent")
@click.option("--name", default=None, help="Hostname to register as (default: this machine's).")
@click.option("--hostmgr", default="127.0.0.1:5391", show_default=True,
              help="host:port of the host manager (several, comma-separated, are tried in turn).")
@click.option("--zkservers", "zk_servers", multiple=True,
              help="ZooKeeper server (repeatable): register with the host manager leader "
                   "published there, and follow it when it fails over.")
@click.option("--zkroot", "zk_root", default="/peloton", show_default=True,
              help="ZooKeeper root path of the leader znodes.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to serve on.")
@click.option("--port", default=0, show_default=True, type=int,
              help="Port of the agent's gRPC service (0 picks a free one).")
@click.option("--work-dir", default="./.peloton/agent", show_default=True,
              type=click.Path(file_okay=False), help="Sandboxes and agent state live here.")
@click.option("--cpus", default=0.0, type=float, help="CPUs offered (default: this machine's).")
@click.option("--mem-mb", default=0.0, type=float, help="Memory offered in MB (default: this machine's).")
@click.option("--disk-mb", default=0.0, type=float, help="Disk offered in MB (default: free space).")
@click.option("--gpus", default=0.0, type=float, help="GPUs offered.")
@click.option("--ports", "port_ranges", default="31000-32000", show_default=True,
              help="Port ranges offered to tasks, e.g. 31000-32000,40000-40099.")
@click.option("--label", "labels", multiple=True, metavar="K=V",
              help="Host label for placement constraints (repeatable).")
@click.option("--kill-tasks-on-exit", is_flag=True,
              help="Kill this agent's tasks when it stops (default: leave them to be adopted).")
@click.option("--revocable-cpus", default=0.0, type=float,
              help="Revocable (slack) CPUs offered on top of --cpus, for revocable tasks "
                   "(like Mesos' fixed resource estimator).")
@click.option("--slack-from-usage", is_flag=True,
              help="Also offer as revocable the CPU that running non-revocable tasks were "
                   "given but do not use (measured every few seconds).")
@click.option("--enforce-fd-limit", is_flag=True,
              help="Apply each task's fdLimit as RLIMIT_NOFILE (Peloton on Mesos never did; "
                   "off by default).")
@click.option("--orphan-secs", default=3600.0, show_default=True, type=float,
              help="A task whose agent has been gone this long is stopped by its supervisor "
                   "(0: never).")
@click.option("--username", default="", envvar="PELOTON_AGENT_USER",
              help="Register as this user of the cluster's users file (its role must accept "
                   "pelotonpy.internal.agent.AgentRegistry:*).")
@click.option("--password-file", default="", type=click.Path(dir_okay=False),
              help="File (mode 0600) holding that user's password: the agent's shared secret.")
@click.option("--allow-root-tasks", is_flag=True, help="Let jobs naming user root run as root.")
@click.option("--task-users", default="", metavar="U1,U2",
              help="System accounts (uid < 1000) tasks may run as.")
@click.option("--dynamic-uids", default="70000-79999", show_default=True,
              help="uids given to tasks whose job names no user of this host.")
@click.option("--fetch-max-mb", default=1024.0, show_default=True, type=float,
              help="The largest file a task's URI (command.uris) may fetch, in MB.")
@click.option("--fetch-cache-mb", default=2048.0, show_default=True, type=float,
              help="What the cache of immutable remote volumes (cached URIs) may hold, in MB; "
                   "beyond it, the least recently used entries no running task links to are "
                   "evicted.")
@click.option("--insecure", is_flag=True,
              help="Serve a non-loopback address without credentials or TLS.")
@click.option("--tls-cert", default="", metavar="PEM", help="TLS certificate (also the agent's "
              "identity to the host manager: its common name names the user).")
@click.option("--tls-key", default="", metavar="PEM", help="The key of --tls-cert.")
@click.option("--tls-ca", default="", metavar="PEM", help="CA to verify the host manager by "
              "(and to require client certificates from it).")
def agent(name: str | None, hostmgr: str, zk_servers: tuple[str, ...], zk_root: str, host: str,
          port: int, work_dir: str, cpus: float, mem_mb: float, disk_mb: float, gpus: float,
          port_ranges: str, labels: tuple[str, ...], kill_tasks_on_exit: bool,
          revocable_cpus: float, slack_from_usage: bool, enforce_fd_limit: bool,
          orphan_secs: float, username: str, password_file: str, allow_root_tasks: bool,
          task_users: str, dynamic_uids: str, insecure: bool, tls_cert: str, tls_key: str,
          tls_ca: str, fetch_max_mb: float, fetch_cache_mb: float) -> None:
    """Run tasks on this machine for a Peloton host manager.

    Registers with the host manager, runs each task as a real process in its
    own sandbox under WORK_DIR/sandboxes, and keeps running them if the host
    manager goes away.  Restarted with the same --work-dir, it adopts the
    tasks still running.

    \b
    Example:
      peloton agent --name node-1 --hostmgr 127.0.0.1:5391 \\
          --cpus 4 --mem-mb 8192 --label zone=a --work-dir /var/lib/peloton
      peloton agent --zkservers 127.0.0.1:2181   # the host manager leader
      peloton agent --cpus 4 --revocable-cpus 2   # 2 more cpus for revocable tasks
    """
    from peloton.common import geventsetup

    geventsetup.setup()  # before anything imports grpc users
    from peloton.cluster.agent import build_config, run
    from peloton.core.errors import PelotonError

    try:
        config = build_config(work_dir=work_dir, name=name, hostmgr=hostmgr, zk_servers=zk_servers,
                              zk_root=zk_root, host=host, port=port,
                              cpus=cpus, mem_mb=mem_mb, disk_mb=disk_mb, gpus=gpus,
                              ports=port_ranges, labels=labels, revocable_cpus=revocable_cpus,
                              slack_from_usage=slack_from_usage,
                              enforce_fd_limit=enforce_fd_limit, orphan_secs=orphan_secs,
                              username=username, password_file=password_file,
                              allow_root_tasks=allow_root_tasks,
                              task_users=tuple(u for u in task_users.split(",") if u),
                              dynamic_uids=dynamic_uids, insecure=insecure, tls_cert=tls_cert,
                              tls_key=tls_key, tls_ca=tls_ca, fetch_max_mb=fetch_max_mb,
                              fetch_cache_mb=fetch_cache_mb)
    except PelotonError as exc:
        raise click.BadParameter(str(exc)) from None
    try:
        run(config, kill_tasks_on_exit=kill_tasks_on_exit)
    except PelotonError as exc:
        raise click.ClickException(str(exc)) from None
