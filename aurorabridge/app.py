"""Composition root of the Aurora bridge: config -> Peloton client -> handlers -> HTTP server.

`AuroraBridge(config, port)` wires everything around a PelotonPort (the
typed client in production, fakes in tests) and owns the components, started
in this order and stopped in reverse:

1. the pulse timer (pauses pulsed updates whose pulses stopped), then a
   one-shot re-arm of timers for updates left rolling by a previous bridge;
2. the HTTP server on `host:port` (`/api`, `/health`);
3. with ZooKeeper, the ServerSet `member_` node under `zk_path`, so an
   Aurora clusters.json entry with `zk` and `scheduler_zk_path` finds us
   (registered last: clients are sent here only once we serve);
4. with `announcer.ensemble`, the announcer (announcer/app.py): the running
   instances of announced jobs in ZooKeeper ServerSets, as Aurora's executor
   registers them (its own ZooKeeper session).

`run(config)` is the process entry point used by `peloton aurorabridge`.
"""

from __future__ import annotations

import logging
import signal
import socket
from typing import Any

import gevent
from gevent.event import Event

from announcer.app import Announcer
from aurorabridge import responses
from aurorabridge.config import BridgeConfig
from aurorabridge.handlers import handler_table, updates
from aurorabridge.handlers.context import BridgeContext
from aurorabridge.http_server import ApiApp, BridgeHttpServer, HttpLimits
from aurorabridge.ports import PelotonPort
from aurorabridge.processor import ThriftProcessor
from aurorabridge.respool_loader import RespoolLoader
from aurorabridge.security import BridgeSecurity
from peloton.api.client import PelotonClient
from peloton.api.client_discovery import DEFAULT_HOSTMGR, DEFAULT_JOBMGR, DEFAULT_RESMGR
from peloton.common.auth import Security, build_security, check_bind
from peloton.common.blocking import BlockingPool
from peloton.common.components import Component, FunctionComponent, Lifecycle
from peloton.common.leader import new_client
from peloton.common.serverset import ServerSetMember, ServiceInstance
from peloton.common.tls import TlsFiles
from peloton.core.errors import InvalidArgument

log = logging.getLogger(__name__)


class AuroraBridge:
    """The bridge process's objects; `start()` / `stop()` like every daemon."""

    name = "aurorabridge"

    def __init__(self, config: BridgeConfig, port: PelotonPort, zk_client: Any = None,
                 security: Security | None = None) -> None:
        self.config = config
        self.security = security or Security()
        check_bind(config.host, self.security, insecure=config.insecure, what="the Aurora bridge")
        responses.set_cluster_name(config.cluster_name)
        self.context = BridgeContext(port, RespoolLoader(port, config.respool), config.handlers,
                                     config.validation, on_pulse_expired=updates.pulse_expired)
        guard = BridgeSecurity(self.security, (config.respool.path,))
        #: Big request bodies are decoded on this thread, off the hub (processor.py).
        self.decoder = BlockingPool(1, "thrift-decode")
        processor = ThriftProcessor(handler_table(self.context), guard, self.decoder)
        limits = HttpLimits(request_timeout_s=config.request_timeout_s,
                            idle_timeout_s=config.idle_timeout_s,
                            max_connections=config.max_connections)
        self.http = BridgeHttpServer(config.host, config.port, ApiApp(processor, config.max_body_bytes),
                                     tls=self.security.tls, limits=limits)
        components: list[Component] = [
            FunctionComponent("pulse-timer",
                              lambda: self.context.pulses.start(config.handlers.pulse_check_interval_s),
                              self.context.pulses.stop),
            FunctionComponent("pulse-recovery", lambda: gevent.spawn(self._recover_pulses)),
            self.http,
        ]
        if zk_client is not None:
            components += _serverset_components(zk_client, config, self.http.port)
        if config.announcer.enabled:
            components.append(Announcer(config.announcer, port))
        self._lifecycle = Lifecycle(components, name="aurorabridge", log=log)

    @property
    def port(self) -> int:
        """The HTTP port (useful when configured as 0)."""
        return self.http.port

    @property
    def url(self) -> str:
        """The API URL, e.g. `http://127.0.0.1:5396/api`."""
        host = "127.0.0.1" if self.config.host in ("0.0.0.0", "") else self.config.host
        return f"http://{host}:{self.port}/api"

    def start(self) -> None:
        """Start serving."""
        self._lifecycle.start()

    def stop(self) -> None:
        """Stop serving and unregister."""
        self._lifecycle.stop()
        self.decoder.close()

    def _recover_pulses(self) -> None:
        try:
            armed = updates.recover_pulses(self.context)
        except Exception as exc:  # Peloton may not be up yet; timers re-arm on the next pulse
            log.warning("could not re-arm pulse timers of running updates: %s", exc)
            return
        if armed:
            log.info("re-armed pulse timers of %d running update(s)", armed)


def _serverset_components(zk_client: Any, config: BridgeConfig, port: int) -> list[Component]:
    host = config.advertise_host or socket.gethostname()
    member = ServerSetMember(zk_client, config.zk_path, ServiceInstance.for_http(host, port))
    return [FunctionComponent("zookeeper", zk_client.start, zk_client.stop), member]


def run(config: BridgeConfig) -> None:
    """Serve until SIGTERM or SIGINT (gevent must already be set up)."""
    zk_servers = [s for s in config.zk_servers.split(",") if s]
    # Daemon addresses given in full win over ZooKeeper discovery (ZooKeeper may then serve
    # only the ServerSet registration).
    named = config.jobmgr and config.resmgr and config.hostmgr
    tls = TlsFiles.from_options(config.tls_cert, config.tls_key, config.tls_ca)
    security = build_security(config.auth or None, tls)
    if security.enabled and not security.internal:
        raise InvalidArgument(f"{config.auth}: the bridge calls Peloton as the internal user: "
                              "set internal_user and internal_password_file", field="auth")
    client = PelotonClient(config.jobmgr or DEFAULT_JOBMGR, config.resmgr or DEFAULT_RESMGR,
                           config.hostmgr or DEFAULT_HOSTMGR, zk_servers=[] if named else zk_servers,
                           zk_root=config.zk_root, caller="peloton-aurorabridge", timeout=config.timeout_s,
                           headers=dict(security.internal), tls=tls)
    zk_client = new_client(zk_servers) if zk_servers else None
    bridge = AuroraBridge(config, client, zk_client, security=security)
    bridge.start()
    print(f"aurorabridge serving Aurora's API at {bridge.url}", flush=True)
    done = Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        gevent.signal_handler(sig, done.set)
    done.wait()
    bridge.stop()
    client.close()
