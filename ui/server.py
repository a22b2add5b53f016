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
from dataclasses import dataclass

from gevent.pywsgi import WSGIServer

from peloton.api.client import PelotonClient
from ui import DEFAULT_PORT, DEFAULT_REFRESH_MS
from ui.actions import Actions
from ui.http import UiApp
from ui.reads import Reads

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


class UiServer:
    """The UI's HTTP server; `port` is known once constructed (0 picks a free port)."""

    name = "ui"

    def __init__(self, client: PelotonClient, host: str = "127.0.0.1", port: int = DEFAULT_PORT, *,
                 refresh_ms: int = DEFAULT_REFRESH_MS) -> None:
        self.app = UiApp(Reads(client), Actions(client), refresh_ms=refresh_ms)
        self._server = WSGIServer((host, port), self.app, log=None,
                                  error_log=logging.getLogger("ui.http"))
        self._server.init_socket()
        self.host = host
        self.port: int = self._server.server_port

    @property
    def url(self) -> str:
        """The UI's address for a browser on this machine."""
        host = "127.0.0.1" if self.host in ("0.0.0.0", "", "::") else self.host
        return f"http://{host}:{self.port}/"

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

    client = PelotonClient(config.jobmgr, config.resmgr, config.hostmgr,
                           zk_servers=config.zk_servers, zk_root=config.zk_root,
                           caller="peloton-ui", timeout=config.timeout)
    server = UiServer(client, config.host, config.port, refresh_ms=config.refresh_ms)
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
