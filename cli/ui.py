"""`peloton ui`: serve the web UI (pages and their JSON API) in front of a Peloton cluster."""

from __future__ import annotations

import click

from ui import DEFAULT_PORT, DEFAULT_REFRESH_MS


@click.command("ui")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to serve HTTP on (0.0.0.0: every interface; the UI has no login).")
@click.option("--port", default=DEFAULT_PORT, show_default=True, type=int,
              help="HTTP port of the UI (0 picks a free port).")
@click.option("--jobmgr", default="localhost:5392", show_default=True, help="host:port of the job manager.")
@click.option("--resmgr", default="localhost:5394", show_default=True,
              help="host:port of the resource manager.")
@click.option("--hostmgr", default="localhost:5391", show_default=True, help="host:port of the host manager.")
@click.option("-z", "--zkservers", default="", metavar="H:P[,H:P]",
              help="ZooKeeper servers: find the daemons' leaders there instead.")
@click.option("--zk-root", default="/peloton", show_default=True,
              help="Peloton's election root in ZooKeeper.")
@click.option("--refresh-ms", default=DEFAULT_REFRESH_MS, show_default=True, type=click.IntRange(200),
              help="How often the pages poll for fresh data.")
@click.option("--forecast-wall", "forecast_wall", default=10.0, show_default=True,
              type=click.FloatRange(0.1, 60.0), metavar="SECS",
              help="Wall time a page's forecast may spend (the pages wait that plus 20 s).")
@click.option("--login", "login_required", is_flag=True,
              help="The cluster authenticates callers: ask users to log in (README, Security).")
@click.option("--allowed-host", "allowed_hosts", multiple=True, metavar="NAME[:PORT]",
              help="Another name browsers reach this UI by (a proxy's, a DNS name; repeatable).")
@click.option("--insecure", is_flag=True, help="Serve a non-loopback address without --login.")
@click.option("--tls-cert", default="", metavar="PEM", help="Serve HTTPS with this certificate "
              "(and call the cluster with it).")
@click.option("--tls-key", default="", metavar="PEM", help="The key of --tls-cert.")
@click.option("--tls-ca", default="", metavar="PEM", help="CA of the cluster's certificates.")
def ui(host: str, port: int, jobmgr: str, resmgr: str, hostmgr: str, zkservers: str, zk_root: str,
       refresh_ms: int, forecast_wall: float, login_required: bool, allowed_hosts: tuple[str, ...],
       insecure: bool, tls_cert: str, tls_key: str, tls_ca: str) -> None:
    """Serve the web UI: cluster overview, jobs, tasks with logs, pools and hosts.

    \b
    Example:
      peloton ui --jobmgr 127.0.0.1:5392 --resmgr 127.0.0.1:5394 --hostmgr 127.0.0.1:5391
      peloton ui -z 127.0.0.1:2181 --port 5292     # then open http://127.0.0.1:5292/
    """
    from peloton.common import geventsetup

    geventsetup.setup()  # before anything imports grpc
    from ui.server import UiConfig, run

    servers = tuple(s.strip() for s in zkservers.replace(" ", ",").split(",") if s.strip())
    run(UiConfig(host=host, port=port, jobmgr=jobmgr, resmgr=resmgr, hostmgr=hostmgr,
                 zk_servers=servers, zk_root=zk_root, refresh_ms=refresh_ms,
                 forecast_wall_secs=forecast_wall, login=login_required,
                 allowed_hosts=allowed_hosts, insecure=insecure, tls_cert=tls_cert, tls_key=tls_key,
                 tls_ca=tls_ca))
