"""The Aurora bridge's HTTP front served on 127.0.0.1 in a thread with its own gevent hub.

Unit and security tests talk to it with plain sockets or HTTP clients from the test's thread,
as a real client would, without starting a whole cluster.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from aurorabridge.http_server import ApiApp, BridgeHttpServer, HttpLimits


@contextlib.contextmanager
def serving(app: ApiApp, limits: HttpLimits | None = None) -> Iterator[int]:
    """Serve `app` until the block ends; yields the port."""
    ready = threading.Event()
    holder: dict[str, Any] = {}

    def serve() -> None:
        import gevent

        server = (BridgeHttpServer("127.0.0.1", 0, app) if limits is None
                  else BridgeHttpServer("127.0.0.1", 0, app, limits=limits))
        holder["server"] = server
        server.start()
        ready.set()
        while not holder.get("stop"):
            gevent.sleep(0.02)
        server.stop(timeout=1)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    assert ready.wait(10), "bridge HTTP server did not start"
    try:
        yield int(holder["server"].port)
    finally:
        holder["stop"] = True
        thread.join(5)
