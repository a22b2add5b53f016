"""Composition root of the web UI: a Peloton client -> reads and actions -> a gevent HTTP server.

`UiServer(client, host, port)` is a component (`start()` / `stop()`) that
`peloton up` runs beside the daemons and `peloton ui` runs alone
(`run(UiConfig)`, which builds the client from addresses or ZooKeeper).
One greenlet serves each connection, so a slow RPC holds up only its own
request; the server never owns the client (whoever built it closes it).
"""

from __future__ import annotations

import logging
import signal
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gevent.pywsgi import WSGIServer

from peloton.api.client import PelotonClient
from peloton.common.auth import AuditLog, is_loopback
from peloton.common.tls import TlsFiles
from peloton.core.errors import InvalidArgument
from ui import DEFAULT_PORT, DEFAULT_REFRESH_MS
from ui.gate import UiGate
from ui.gate import allowed_hosts as allowed_hosts_for
from ui.http import UiApp
from ui.reads import FORECAST_WALL_S

log = logging.getLogger(__name__)

__all__ = ["DEFAULT_PORT", "DEFAULT_REFRESH_MS", "UiConfig", "UiServer", "run"]


@dataclass(frozen=True, slots=True)
class UiConfig:
    """Where `peloton ui` serves and where it finds the cluster."""

    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    jobmgr: str = "localhost:5392"
    resmgr: str = "localhost:5394"
    hostmgr: str = "localhost:5391"
    #: ZooKeeper servers: when set, the daemons are found through their leader znodes.
    zk_servers: tuple[str, ...] = ()
    zk_root: str = "/peloton"
    refresh_ms: int = DEFAULT_REFRESH_MS
    #: Deadline of every RPC the UI makes, in seconds.
    timeout: float = 10.0
    #: Wall seconds a page's forecast may spend (the pages wait that plus the call's grace).
    forecast_wall_secs: float = FORECAST_WALL_S
    #: The cluster authenticates callers: users log in (else refused off loopback).
    login: bool = False
    allowed_hosts: tuple[str, ...] = ()
    insecure: bool = False
    tls_cert: str = ""
    tls_key: str = ""
    tls_ca: str = ""


class UiServer:
    """The UI's HTTP server; `port` is known once constructed (0 picks a free port)."""

    name = "ui"

    def __init__(self, client: PelotonClient, host: str = "127.0.0.1", port: int = DEFAULT_PORT, *,
                 refresh_ms: int = DEFAULT_REFRESH_MS, auth: bool = False,
                 tls: TlsFiles | None = None, allowed_hosts: Sequence[str] = (),
                 audit: AuditLog | None = None,
                 forecast_wall_secs: float = FORECAST_WALL_S) -> None:
        """`auth`: the cluster authenticates callers, so the UI asks users to log in;
        `allowed_hosts`: more names the Host header may carry (a proxy's, a DNS name);
        `audit`: where refusals are recorded (default: the `peloton.audit` logger);
        `forecast_wall_secs`: the wall time a page's forecast may spend."""
        kwargs: dict[str, Any] = {}
        if tls is not None:
            kwargs["ssl_context"] = tls.server_context()
        self._server = WSGIServer((host, port), self._dispatch, log=None,
                                  error_log=logging.getLogger("ui.http"), **kwargs)
        self._server.init_socket()
        self.host = host
        self.port: int = self._server.server_port
        self.tls = tls is not None
        gate = UiGate(client, auth=auth, secure=self.tls,
                      hosts=allowed_hosts_for(host, self.port, allowed_hosts), audit=audit)
        self.app = UiApp(gate, refresh_ms=refresh_ms, forecast_wall_secs=forecast_wall_secs)

    def _dispatch(self, environ: dict[str, Any], start_response: Any) -> Any:
        return self.app(environ, start_response)

    @property
    def url(self) -> str:
        """The UI's address for a browser on this machine."""
        host = "127.0.0.1" if self.host in ("0.0.0.0", "", "::") else self.host
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}/"

    def start(self) -> None:
        """Start accepting connections (serving runs in greenlets)."""
        self._server.start()
        log.info("web UI at %s", self.url)

    def stop(self) -> None:
        """Stop accepting; requests in flight get a second to finish."""
        self._server.stop(timeout=1.0)


def run(config: UiConfig) -> None:
    """Serve until SIGINT or SIGTERM (gevent must already be set up)."""
    import gevent
    from gevent.event import Event

    if not (config.login or config.insecure or is_loopback(config.host)):
        raise InvalidArgument(f"the web UI would serve {config.host} without asking anyone to log "
                              "in; pass --login (authentication on the cluster), bind 127.0.0.1, "
                              "or --insecure", field="host")
    tls = TlsFiles.from_options(config.tls_cert, config.tls_key, config.tls_ca)
    client = PelotonClient(config.jobmgr, config.resmgr, config.hostmgr,
                           zk_servers=config.zk_servers, zk_root=config.zk_root,
                           caller="peloton-ui", timeout=config.timeout, tls=tls)
    server = UiServer(client, config.host, config.port, refresh_ms=config.refresh_ms,
                      auth=config.login, tls=tls, allowed_hosts=config.allowed_hosts,
                      forecast_wall_secs=config.forecast_wall_secs)
    server.start()
    print(f"web UI at {server.url} (job manager {client.endpoints.jobmgr}); "
          "press Ctrl-C to stop", flush=True)
    done = Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        gevent.signal_handler(sig, done.set)
    try:
        done.wait()
    finally:
        server.stop()
        client.close()
