"""`peloton aurorabridge`: serve Aurora's Thrift API in front of a Peloton cluster."""

from __future__ import annotations

import click

from aurorabridge.config import DEFAULT_PORT
from cli.params import security_options


@click.command("aurorabridge")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to serve HTTP on (another than loopback needs --auth or --insecure).")
@click.option("--port", default=DEFAULT_PORT, show_default=True, type=int,
              help="HTTP port of the Thrift API at /api (0 picks a free port).")
@click.option("--jobmgr", default="", help="host:port of the job manager [default: localhost:5392].")
@click.option("--resmgr", default="", help="host:port of the resource manager [default: localhost:5394].")
@click.option("--hostmgr", default="", help="host:port of the host manager [default: localhost:5391].")
@click.option("--zkservers", default="", metavar="H:P[,H:P]",
              help="ZooKeeper: register this bridge there (and find the daemons, unless all are named).")
@click.option("--zk-root", default="/peloton", show_default=True,
              help="Peloton's election root in ZooKeeper (leader znodes).")
@click.option("--zk-path", default="/aurora/scheduler", show_default=True,
              help="Where to register the ServerSet member (Aurora's scheduler_zk_path).")
@click.option("--advertise-host", default="", help="Host name written in the ServerSet node "
              "(default: this machine's name).")
@click.option("--cluster-name", default="peloton", show_default=True,
              help="Cluster name reported to Aurora clients (ServerInfo).")
@click.option("--respool-path", default="/AuroraBridge", show_default=True,
              help="Parent of the bridge jobs' per-role pools <path>/<role> (created when missing).")
@click.option("--gpu-respool-path", default="/GPUAuroraBridge", show_default=True,
              help="Resource pool of jobs that ask for GPUs.")
@click.option("--max-tasks-per-job", default=4000, show_default=True, type=int,
              help="Largest instance count accepted (Aurora's max_tasks_per_job).")
@click.option("--pulse-check-interval", default=1.0, show_default=True, type=float,
              help="Seconds between checks for updates whose pulses stopped.")
@click.option("--allowed-environments", default="", metavar="REGEX",
              help="Job environments accepted (Python re.match); empty accepts any, as Peloton's "
              "bridge. Aurora's default: '^(prod|devel|test|staging\\d*)$'.")
@click.option("--concurrent-updates", type=click.Choice(["reject", "replace"]), default="reject",
              show_default=True, help="startJobUpdate while an update runs: reject it (Aurora) or "
              "abort the running one and start the new one (Peloton's bridge).")
@click.option("--unfit-jobs", type=click.Choice(["queue", "refuse"]), default="queue",
              show_default=True, help="A job no host or pool limit could ever hold: accept it and "
              "leave it PENDING with the reason (Aurora) or refuse it at create (Peloton).")
@click.option("--watch-time", type=click.Choice(["aurora", "peloton"]), default="aurora",
              show_default=True, help="An update's minWaitInInstanceRunningMs: honour it "
              "(Aurora) or ignore it (Peloton's bridge).")
@click.option("--pod-runs-depth", default=6, show_default=True, type=click.IntRange(min=1),
              help="Runs per instance in task queries (1: current runs only).")
@click.option("--sla-min-instances", default=20, show_default=True, type=click.IntRange(min=0),
              help="slaDrainHosts checks only jobs with at least this many active instances "
              "(Aurora's -min_required_instances_for_sla_check).")
@click.option("--sla-aware-kill-non-prod", is_flag=True,
              help="slaDrainHosts checks non-production tasks too (Aurora's "
              "-sla_aware_kill_non_prod); by default only the preferred tier is checked.")
@click.option("--announcer-ensemble", default="", metavar="H:P[,H:P]",
              help="ZooKeeper to announce running instances of jobs with an Announcer in (Aurora's "
              "executor flag of that name); empty: no announcements.")
@click.option("--announcer-serverset-path", default="/aurora", show_default=True,
              help="Root of the ServerSets: <root>/<role>/<env>/<job> (Aurora's executor flag).")
@click.option("--announcer-use-ip", is_flag=True,
              help="Announce each host's address instead of its name.")
@click.option("--request-timeout", default=30.0, show_default=True,
              type=click.FloatRange(min=0, min_open=True), metavar="SECS",
              help="A request must arrive whole (headers and body) within this time of its first "
                   "line, or its connection is closed (slow clients).")
@click.option("--idle-timeout", default=60.0, show_default=True,
              type=click.FloatRange(min=0, min_open=True), metavar="SECS",
              help="Close a connection that sends nothing (or reads no reply) for this long.")
@click.option("--max-connections", default=1000, show_default=True, type=click.IntRange(min=1),
              help="Open connections at most; one more is answered 503 and closed.")
@security_options
def aurorabridge(host: str, port: int, jobmgr: str, resmgr: str, hostmgr: str, zkservers: str,
                 zk_root: str, zk_path: str, advertise_host: str, cluster_name: str, respool_path: str,
                 gpu_respool_path: str, max_tasks_per_job: int, pulse_check_interval: float,
                 allowed_environments: str, concurrent_updates: str, unfit_jobs: str, watch_time: str,
                 pod_runs_depth: int,
                 sla_min_instances: int, sla_aware_kill_non_prod: bool, announcer_ensemble: str,
                 announcer_serverset_path: str, announcer_use_ip: bool, auth: str, insecure: bool,
                 tls_cert: str, tls_key: str, tls_ca: str, request_timeout: float,
                 idle_timeout: float, max_connections: int) -> None:
    """Serve Aurora's scheduler API (Thrift over HTTP at /api) backed by Peloton.

    Aurora clients reach it through `scheduler_uri` in clusters.json, or
    through ZooKeeper (`zk` and `scheduler_zk_path`) when --zkservers is set.
    With --announcer-ensemble, running instances of jobs with an Announcer
    are registered in ServerSets there, as Aurora's executor does.

    \b
    Example:
      peloton aurorabridge --port 5396 --jobmgr 127.0.0.1:5392 \\
          --resmgr 127.0.0.1:5394 --hostmgr 127.0.0.1:5391
      # clusters.json: [{"name": "peloton", "scheduler_uri": "http://127.0.0.1:5396"}]
    """
    from peloton.common import geventsetup

    geventsetup.setup()  # before anything imports grpc or kazoo
    from dataclasses import replace

    from announcer.config import AnnouncerConfig
    from aurorabridge.app import run
    from aurorabridge.config import BridgeConfig, HandlerSettings, RespoolSettings, ValidationSettings

    config = BridgeConfig(
        host=host, port=port, cluster_name=cluster_name, jobmgr=jobmgr, resmgr=resmgr, hostmgr=hostmgr,
        zk_servers=zkservers, zk_root=zk_root, zk_path=zk_path, advertise_host=advertise_host,
        auth=auth, insecure=insecure, tls_cert=tls_cert, tls_key=tls_key, tls_ca=tls_ca,
        request_timeout_s=request_timeout, idle_timeout_s=idle_timeout,
        max_connections=max_connections,
        respool=RespoolSettings(path=respool_path, gpu_path=gpu_respool_path),
        validation=ValidationSettings(max_tasks_per_job=max_tasks_per_job,
                                      allowed_environments=allowed_environments),
        handlers=replace(HandlerSettings(), pulse_check_interval_s=pulse_check_interval,
                         concurrent_updates=concurrent_updates, unfit_jobs=unfit_jobs,
                         watch_time=watch_time,
                         pod_runs_depth=pod_runs_depth,
                         sla_min_instances=sla_min_instances,
                         sla_aware_kill_non_prod=sla_aware_kill_non_prod),
        announcer=AnnouncerConfig(ensemble=announcer_ensemble, root=announcer_serverset_path,
                                  use_ip=announcer_use_ip, election_root=zk_root))
    run(config)
