"""`peloton up`: run a one-machine cluster in the foreground."""

from __future__ import annotations

import errno
import re
import socket
from pathlib import Path
from typing import TYPE_CHECKING

import click

from cli.params import parse_labels, security_options

if TYPE_CHECKING:
    from peloton.cluster.allinone import KubeConfig
    from peloton.core.model.constraints import Label


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
@click.option("--agent-revocable-cpus", default=0.0, type=float,
              help="Revocable (slack) CPUs each local agent or simulated host offers, on top of "
                   "its CPUs, for revocable tasks.")
@click.option("--agent-slack-from-usage", is_flag=True,
              help="Local agents also offer as revocable the CPU their non-revocable tasks were "
                   "given but do not use.")
@click.option("--agent-enforce-fd-limit", is_flag=True,
              help="Local agents apply each task's fdLimit (Peloton on Mesos never did).")
@click.option("--agent-attributes", "--agent-attribute", "agent_attributes", multiple=True,
              metavar="[I:]K=V[,K=V]",
              help="Host attributes of the local agents, which placement constraints match "
                   "(Peloton host-label constraints, Aurora `constraints`): `zone=east` on every "
                   "agent, `1:zone=west` on agent 1 only (agents count from 0).  Repeatable.")
@click.option("--agent-ports", default="31000-32767", show_default=True,
              help="Dynamic port range the local agents share (split between them); keep it "
                   "below the machine's ephemeral range (net.ipv4.ip_local_port_range).")
@click.option("--backend", default="local", show_default=True,
              help='"local" (real processes), "sim:N[:TASK_S[:CPUS[:START_S]]]" (N simulated '
              'hosts of CPUS cpus whose tasks run START_S after launch and end TASK_S later) '
              '"mesos:URL" (an Apache Mesos master, e.g. mesos:http://master:5050 or '
              'mesos:zk://zk:2181/mesos), or "k8s:KUBECONFIG" / "k8s:in-cluster" (a Kubernetes '
              'cluster\'s nodes; docs/deploy/kubernetes.md).')
@click.option("--k8s-namespace", default="", metavar="NAME",
              help="With --backend k8s:...: the namespace of the pods (default pelotonpy).")
@click.option("--k8s-config", default="", metavar="FILE",
              help="With --backend k8s:...: a YAML file of the Kubernetes backend's settings "
                   "(the host manager config's `kubernetes:` section: namespace, default_image, "
                   "pool_namespaces, node_selector, ...).")
@click.option("--archive", default="", metavar="URL",
              help="Also run the archiver into this archive (dir:///path, sqlite:///file.db, ...).")
@click.option("--aurora-environments", default="", metavar="REGEX",
              help="Job environments the Aurora bridge accepts (re.match); empty accepts any, as "
              "Peloton's bridge; Aurora's default is '^(prod|devel|test|staging\\d*)$'.")
@click.option("--aurora-unfit-jobs", type=click.Choice(["queue", "refuse"]), default="queue",
              show_default=True, help="A job no host or pool limit could ever hold, created "
              "through the Aurora endpoint: accept it PENDING with the reason (Aurora) or refuse "
              "it (Peloton).")
@click.option("--aurora-concurrent-updates", type=click.Choice(["reject", "replace"]),
              default="reject", show_default=True, help="startJobUpdate while an update runs: "
              "reject it (Aurora) or abort the running one and start the new one (Peloton's "
              "bridge).")
@click.option("--aurora-watch-time", type=click.Choice(["aurora", "peloton"]), default="aurora",
              show_default=True, help="An Aurora update's minWaitInInstanceRunningMs: honour it "
              "(Aurora) or ignore it (Peloton's bridge).")
@click.option("--ui-port", default=5292, show_default=True, type=int,
              help="Web UI HTTP port (0 picks a free port, -1 disables the UI).")
@click.option("--ui-allowed-host", "ui_allowed_hosts", multiple=True, metavar="NAME[:PORT]",
              help="Another name browsers reach the UI by (a Kubernetes Service, a proxy); "
                   "the UI refuses Host headers naming anything else (DNS rebinding).")
@click.option("--ui-forecast-wall", default=10.0, show_default=True,
              type=click.FloatRange(0.1, 60.0), metavar="SECS",
              help="Wall time a UI page's forecast may spend (the pages wait that plus 20 s).")
@click.option("--keep-tasks", is_flag=True,
              help="On exit, leave the tasks running for the next `peloton up` with the same "
                   "--data-dir to adopt (default: stop them; unadopted kept tasks stop after "
                   "--orphan-secs).")
@click.option("--orphan-secs", default=3600.0, show_default=True, type=float,
              help="A task left running whose agent has been gone this long is stopped by its "
                   "supervisor (0: never).")
@click.option("--allow-root-tasks", is_flag=True,
              help="Let jobs naming user root run as root on the local agents.")
@click.option("--zk", default="", metavar="H:P[,H:P]",
              help="ZooKeeper: announce the daemons (leader nodes under --zk-root) and the Aurora "
                   "endpoint (a ServerSet at --aurora-zk-path) there, and register the running "
                   "instances of announced jobs in their ServerSets.")
@click.option("--zk-root", default="/peloton", show_default=True,
              help="With --zk: Peloton's election root (leader nodes <root>/<role>/leader).")
@click.option("--aurora-zk-path", default="/aurora/scheduler", show_default=True,
              help="With --zk: the Aurora clients' scheduler_zk_path.")
@click.option("--announcer-serverset-path", default="/aurora", show_default=True,
              help="With --zk: root of the ServerSets of announced jobs (<root>/<role>/<env>/<job>).")
@click.option("--announcer-use-ip", is_flag=True,
              help="With --zk: announce hosts by address instead of by name.")
@click.option("--jobmgrs", default=0, type=int, metavar="N",
              help="Run N all-active job managers, each daemon as its own process, with a "
                   "ZooKeeper (--zk, else one started here from the Debian jars); no Aurora "
                   "bridge or UI in this mode.")
@click.option("--partitions", default=64, show_default=True, type=int,
              help="With --jobmgrs: the job partitions split among the job managers.")
@security_options
def up(host: str, jobmgr_port: int, resmgr_port: int, hostmgr_port: int, aurora_port: int,
       store: str, data_dir: str, agents: int, agent_cpus: float, agent_mem_mb: float,
       agent_disk_mb: float, agent_gpus: float, agent_revocable_cpus: float,
       agent_slack_from_usage: bool, agent_enforce_fd_limit: bool, agent_attributes: tuple[str, ...],
       agent_ports: str, backend: str,
       k8s_namespace: str, k8s_config: str, archive: str, aurora_environments: str,
       aurora_unfit_jobs: str, aurora_concurrent_updates: str, aurora_watch_time: str,
       ui_port: int,
       ui_allowed_hosts: tuple[str, ...], ui_forecast_wall: float, keep_tasks: bool,
       orphan_secs: float, allow_root_tasks: bool, zk: str, zk_root: str, aurora_zk_path: str,
       announcer_serverset_path: str, announcer_use_ip: bool, jobmgrs: int, partitions: int,
       auth: str, insecure: bool, tls_cert: str, tls_key: str, tls_ca: str) -> None:
    """Start every daemon of a one-machine cluster and serve until Ctrl-C, which stops its
    tasks too (unless --keep-tasks).

    \b
    Example:
      peloton up                       # SQLite in ./.peloton, one local agent
      peloton up --agents 3            # three agents with distinct names and labels
      peloton up --agents 2 --agent-attributes 0:zone=east --agent-attributes 1:zone=west
      peloton up --agent-revocable-cpus 2   # slack for revocable jobs
      peloton up --store postgresql://peloton@127.0.0.1/peloton
      peloton up --auth users.yaml --host 0.0.0.0   # README, Security
      peloton up --backend k8s:$HOME/.kube/config   # pods on a Kubernetes cluster
      peloton up --zk 127.0.0.1:2181   # daemons, Aurora endpoint, announced jobs in ZooKeeper
      peloton up --jobmgrs 2           # two all-active job managers, one process per daemon
    """
    if jobmgrs:
        _up_processes(host, jobmgr_port, resmgr_port, hostmgr_port, store, data_dir, agents,
                      zk, zk_root, jobmgrs, partitions, backend)
        return
    ports = {"--jobmgr-port": jobmgr_port, "--resmgr-port": resmgr_port,
             "--hostmgr-port": hostmgr_port, "--aurora-port": aurora_port, "--ui-port": ui_port}
    check_ports(host, ports)
    from peloton.common.geventsetup import setup

    setup()
    from peloton.cluster.allinone import UpConfig, run
    from peloton.common.tls import TlsFiles
    from peloton.core.errors import PelotonError
    from peloton.core.model.resources import Resources

    try:
        kubernetes = _kube_settings(k8s_config, k8s_namespace)
        run(UpConfig(host=host, jobmgr_port=jobmgr_port, resmgr_port=resmgr_port,
                     hostmgr_port=hostmgr_port, aurora_port=aurora_port, store=store,
                     data_dir=Path(data_dir), agents=agents, backend=backend,
                     kubernetes=kubernetes, archive=archive,
                     ui_port=ui_port, ui_allowed_hosts=ui_allowed_hosts,
                     ui_forecast_wall_secs=ui_forecast_wall, keep_tasks=keep_tasks,
                     orphan_secs=orphan_secs,
                     aurora_environments=aurora_environments,
                     aurora_unfit_jobs=aurora_unfit_jobs,
                     aurora_concurrent_updates=aurora_concurrent_updates,
                     aurora_watch_time=aurora_watch_time,
                     agent_resources=Resources(agent_cpus, agent_mem_mb, agent_disk_mb,
                                               agent_gpus),
                     agent_ports=_port_range(agent_ports),
                     agent_attributes=_agent_attributes(agent_attributes, agents),
                     agent_revocable_cpus=_non_negative(agent_revocable_cpus,
                                                        "--agent-revocable-cpus"),
                     agent_slack_from_usage=agent_slack_from_usage,
                     agent_enforce_fd_limit=agent_enforce_fd_limit,
                     auth=auth, insecure=insecure,
                     tls=TlsFiles.from_options(tls_cert, tls_key, tls_ca),
                     allow_root_tasks=allow_root_tasks, zk=zk, zk_root=zk_root, aurora_zk_path=aurora_zk_path,
                     announcer_root=announcer_serverset_path,
                     announcer_use_ip=announcer_use_ip))
    except PelotonError as exc:
        raise click.ClickException(str(exc)) from None
    except (RuntimeError, OSError) as exc:
        clash = _bind_failure(exc)
        if clash is None:
            raise
        flag = next((f for f, p in ports.items() if p == clash), "")
        raise click.ClickException(_in_use(host, clash, flag)) from None


def _up_processes(host: str, jobmgr_port: int, resmgr_port: int, hostmgr_port: int,
                  store: str, data_dir: str, agents: int, zk: str, zk_root: str, jobmgrs: int,
                  partitions: int, backend: str) -> None:
    """`peloton up --jobmgrs N`: every daemon its own process (peloton/cluster/processes.py)."""
    check_ports(host, {"--jobmgr-port": jobmgr_port, "--resmgr-port": resmgr_port,
                       "--hostmgr-port": hostmgr_port})
    from peloton.cluster.processes import ProcessesConfig, run
    from peloton.core.errors import PelotonError

    try:
        run(ProcessesConfig(jobmgrs=jobmgrs, host=host, jobmgr_port=jobmgr_port,
                            resmgr_port=resmgr_port, hostmgr_port=hostmgr_port, store=store,
                            data_dir=Path(data_dir), agents=agents, zk=zk, zk_root=zk_root,
                            partitions=partitions, backend=backend),
            announce=lambda line: click.echo(line))
    except PelotonError as exc:
        raise click.ClickException(str(exc)) from None


def _kube_settings(path: str, namespace: str) -> KubeConfig:
    """The Kubernetes backend's settings: the file (strict: unknown keys and wrong types are
    errors naming the key), then --k8s-namespace."""
    from dataclasses import replace

    from peloton.cluster.allinone import KubeConfig
    from peloton.common.config import from_mapping, read_yaml_files

    settings = from_mapping(KubeConfig, read_yaml_files([path]), "kubernetes") if path else KubeConfig()
    return replace(settings, namespace=namespace) if namespace else settings


def _non_negative(value: float, hint: str) -> float:
    """A finite amount >= 0 (a click usage error otherwise)."""
    if not (value >= 0 and value != float("inf")):
        raise click.BadParameter(f"expected a number >= 0, got {value}", param_hint=hint)
    return value


def _in_use(host: str, port: int, flag: str) -> str:
    hint = f"pick another with {flag} (0 picks a free port)" if flag else "pick other ports"
    return (f"port {port} on {host} is in use (another `peloton up`?): stop what holds it, "
            f"or {hint}")


def check_ports(host: str, ports: dict[str, int]) -> None:
    """A one-line error, before anything starts, for a fixed port something already holds."""
    for flag, port in ports.items():
        if port <= 0:
            continue
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((host, port))
            except PermissionError:
                raise click.ClickException(f"port {port} on {host} needs privileges; pick "
                                           f"another with {flag}") from None
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    raise click.ClickException(_in_use(host, port, flag)) from None
                raise


def _bind_failure(exc: BaseException) -> int | None:
    """The port a failed bind named (gRPC's RuntimeError or an EADDRINUSE OSError), or None."""
    text = str(exc)
    if isinstance(exc, OSError) and exc.errno != errno.EADDRINUSE:
        return None
    if not isinstance(exc, OSError) and "Failed to bind" not in text:
        return None
    found = re.findall(r"[:,' ](\d{2,5})\b", text)
    return int(found[-1]) if found else None


def _agent_attributes(values: tuple[str, ...], agents: int) -> tuple[tuple[int | None, Label], ...]:
    """`--agent-attributes` values ("[I:]K=V[,K=V]") as (agent index or None, label) pairs;
    a bad item, or an index beyond the local agents, is a usage error."""
    from peloton.core.model.constraints import Label

    out: list[tuple[int | None, Label]] = []
    for value in values:
        index: int | None = None
        head, colon, rest = value.partition(":")
        if colon and head.strip().isdigit():
            index, value = int(head), rest
            if index >= agents:
                raise click.BadParameter(f"agent {index} does not exist (--agents {agents}; "
                                         "agents count from 0)", param_hint="--agent-attributes")
        try:
            pairs = parse_labels(value)
        except click.BadParameter as exc:
            raise click.BadParameter(exc.message, param_hint="--agent-attributes") from None
        if not pairs or any(not k for k, _ in pairs):
            raise click.BadParameter(f"expected [I:]KEY=VALUE, got {value!r}",
                                     param_hint="--agent-attributes")
        out += [(index, Label(k, v)) for k, v in pairs]
    return tuple(out)


def _port_range(text: str) -> tuple[int, int]:
    """Parse "BEGIN-END" (a click usage error if it is not one)."""
    begin, sep, end = text.partition("-")
    if not sep or not begin.isdigit() or not end.isdigit() or not 0 < int(begin) <= int(end) < 65536:
        raise click.BadParameter(f"expected BEGIN-END, got {text!r}", param_hint="--agent-ports")
    return int(begin), int(end)
