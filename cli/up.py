"""`peloton up`: run a one-machine cluster in the foreground."""

from __future__ import annotations

from pathlib import Path

import click

from cli.params import security_options


@click.command("up")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to serve on.")
@click.option("--jobmgr-port", "--grpc-port", "jobmgr_port", default=5392, show_default=True,
              type=int, help="Job manager gRPC port (0 picks a free port).")
@click.option("--resmgr-port", default=5394, show_default=True, type=int,
              help="Resource manager gRPC port (0 picks a free port).")
@click.option("--hostmgr-port", default=5391, show_default=True, type=int,
              help="Host manager gRPC port, where agents register (0 picks a free port).")
@click.option("--aurora-port", default=5396, show_default=True, type=int,
              help="Aurora Thrift HTTP port (0 picks a free port, -1 disables the bridge).")
@click.option("--store", default="", help="Storage URL (default: SQLite under --data-dir), e.g. "
              "postgresql://user@host/db.")
@click.option("--data-dir", default=".peloton", show_default=True, type=click.Path(),
              help="Where the SQLite database and the local agents' sandboxes live.")
@click.option("--agents", default=1, show_default=True, type=int,
              help="Local agents to run in this process (they share this machine's resources).")
@click.option("--agent-cpus", default=0.0, type=float,
              help="CPUs each local agent offers (default: this machine's, shared).")
@click.option("--agent-mem-mb", default=0.0, type=float, help="Memory each local agent offers.")
@click.option("--agent-disk-mb", default=0.0, type=float, help="Disk each local agent offers.")
@click.option("--agent-gpus", default=0.0, type=float, help="GPUs each local agent offers.")
@click.option("--agent-ports", default="31000-32999", show_default=True,
              help="Dynamic port range the local agents share (split between them).")
@click.option("--backend", default="local", show_default=True,
              help='"local" (real processes), "sim:N[:TASK_S[:CPUS[:START_S]]]" (N simulated '
              'hosts of CPUS cpus whose tasks run START_S after launch and end TASK_S later) '
              'or "mesos:URL" (an Apache Mesos master, e.g. mesos:http://master:5050 or '
              'mesos:zk://zk:2181/mesos).')
@click.option("--archive", default="", metavar="URL",
              help="Also run the archiver into this archive (dir:///path, sqlite:///file.db, ...).")
@click.option("--ui-port", default=5292, show_default=True, type=int,
              help="Web UI HTTP port (0 picks a free port, -1 disables the UI).")
@click.option("--allow-root-tasks", is_flag=True,
              help="Let jobs naming user root run as root on the local agents.")
@security_options
def up(host: str, jobmgr_port: int, resmgr_port: int, hostmgr_port: int, aurora_port: int,
       store: str, data_dir: str, agents: int, agent_cpus: float, agent_mem_mb: float,
       agent_disk_mb: float, agent_gpus: float, agent_ports: str, backend: str, archive: str,
       ui_port: int, allow_root_tasks: bool, auth: str, insecure: bool, tls_cert: str,
       tls_key: str, tls_ca: str) -> None:
    """Start every daemon of a one-machine cluster and serve until Ctrl-C.

    \b
    Example:
      peloton up                       # SQLite in ./.peloton, one local agent
      peloton up --agents 3            # three agents with distinct names and labels
      peloton up --store postgresql://peloton@127.0.0.1/peloton
      peloton up --auth users.yaml --host 0.0.0.0   # README, Security
    """
    from peloton.common.geventsetup import setup

    setup()
    from peloton.cluster.allinone import UpConfig, run
    from peloton.common.tls import TlsFiles
    from peloton.core.errors import PelotonError
    from peloton.core.model.resources import Resources

    try:
        run(UpConfig(host=host, jobmgr_port=jobmgr_port, resmgr_port=resmgr_port,
                     hostmgr_port=hostmgr_port, aurora_port=aurora_port, store=store,
                     data_dir=Path(data_dir), agents=agents, backend=backend, archive=archive,
                     ui_port=ui_port,
                     agent_resources=Resources(agent_cpus, agent_mem_mb, agent_disk_mb, agent_gpus),
                     agent_ports=_port_range(agent_ports), auth=auth, insecure=insecure,
                     tls=TlsFiles.from_options(tls_cert, tls_key, tls_ca),
                     allow_root_tasks=allow_root_tasks))
    except PelotonError as exc:
        raise click.ClickException(str(exc)) from None


def _port_range(text: str) -> tuple[int, int]:
    """Parse "BEGIN-END" (a click usage error if it is not one)."""
    begin, sep, end = text.partition("-")
    if not sep or not begin.isdigit() or not end.isdigit() or not 0 < int(begin) <= int(end) < 65536:
        raise click.BadParameter(f"expected BEGIN-END, got {text!r}", param_hint="--agent-ports")
    return int(begin), int(end)
