"""The pymesos boundary: a typed subscription to the Mesos master, and plain HTTP calls.

pymesos' MesosSchedulerDriver keeps the SUBSCRIBE stream (JSON, the v1
scheduler HTTP API): it finds the leading master (host:port, or
ZooKeeper for zk://), follows a standby master's redirect, reconnects
with backoff when the stream breaks, and turns events into callbacks.
`MesosLink` wraps it and hands typed events to a `MesosEvents`.

Calls are POSTed by `MesosLink.call`, not through pymesos' call methods:
those drop a call silently while disconnected (a launch would vanish)
and cannot carry a KILL's kill policy.  A failed call says whether the
master got it: `CallNotSent`, `CallRejected` (it answered an error) or
`CallUncertain` (the connection broke mid-call).

pymesos has three habits that suit scripts, not daemons; they are undone
here, once, when this module is imported:
- importing pymesos installs its own SIGINT handler: the previous one is
  put back;
- when its IO thread fails it interrupts the main thread, which would stop
  the whole daemon: the failure is logged and the link reads as aborted,
  so the backend restarts it;
- a driver stopped without failover TEARs DOWN the framework, killing every
  task: the link always passes failover=True.
"""

from __future__ import annotations

import http.client
import json
import logging
import signal
import threading
import time
import types
import urllib.parse
from typing import Any, Protocol

import pymesos
import pymesos.process

from peloton.core.errors import NotFound, PelotonError, Unavailable
from peloton.hostmgr.backends.mesos_wire import Json

log = logging.getLogger(__name__)


def _io_thread_failed() -> None:
    # pymesos kept the exception for its SIGINT handler; nothing will raise it now.
    pymesos.process._exc_info = None
    log.error("pymesos IO thread stopped; the Mesos backend will reconnect")


if (threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGINT) is pymesos.process._handle_sigint
        and pymesos.process._prev_handler is not None):
    signal.signal(signal.SIGINT, pymesos.process._prev_handler)
pymesos.process.thread = types.SimpleNamespace(interrupt_main=_io_thread_failed)


class CallNotSent(Unavailable):
    """The master did not get the call (no subscription, or no connection)."""


class CallUncertain(Unavailable):
    """The connection broke while the call was in flight: the master may have acted on it."""


class CallRejected(PelotonError):
    """The master answered the call with an error status."""

    kind = "rejected"


class MesosEvents(Protocol):
    """What the link reports; called from pymesos' IO thread, must not block long."""

    def subscribed(self, framework_id: str, stream_id: str) -> None:
        """SUBSCRIBED: the framework (re-)registered on a new stream."""

    def disconnected(self) -> None:
        """The stream is gone (its offers are void); pymesos is reconnecting."""

    def offers(self, offers: list[Json]) -> None:
        """OFFERS."""

    def rescinded(self, offer_id: str) -> None:
        """RESCIND of one offer."""

    def update(self, status: Json) -> None:
        """UPDATE: one TaskStatus."""

    def agent_lost(self, agent_id: str) -> None:
        """FAILURE without an executor: the agent is gone."""

    def error(self, message: str) -> None:
        """ERROR (e.g. the framework was removed)."""


def master_address(url: str) -> str:
    """pymesos' form of a master URL: "host:port" or "zk://hosts/path" (https is unsupported)."""
    if url.startswith(("zk://", "zoo://")):
        return url
    parsed = urllib.parse.urlsplit(url if "//" in url else f"//{url}")
    if parsed.scheme not in ("", "http") or not parsed.hostname:
        raise ValueError(f"unsupported Mesos master {url!r}: use host:port, http://host:port "
                         "or zk://host:port/path")
    return f"{parsed.hostname}:{parsed.port or 5050}"


class _Scheduler(pymesos.Scheduler):  # type: ignore[misc]  # pymesos is untyped
    """pymesos callbacks to MesosEvents; never raises (pymesos would end its IO thread)."""

    def __init__(self, link: MesosLink) -> None:
        self._link = link

    def _safely(self, what: str, fn: Any, *args: Any) -> None:
        if self._link.closed:
            return  # a replaced subscription's last words: the current one speaks for us
        try:
            fn(*args)
        except Exception:
            log.exception("Mesos backend failed to handle %s", what)

    def registered(self, driver: Any, framework_id: Json, master: Json) -> None:
        self._safely("SUBSCRIBED", self._link.events.subscribed, framework_id["value"],
                     driver.stream_id or "")

    def reregistered(self, driver: Any, master: Json) -> None:
        self._safely("SUBSCRIBED", self._link.events.subscribed, driver.framework_id or "",
                     driver.stream_id or "")

    def disconnected(self, driver: Any) -> None:
        self._safely("disconnection", self._link.events.disconnected)

    def resourceOffers(self, driver: Any, offers: list[Json]) -> None:
        self._safely("OFFERS", self._link.events.offers, [dict(o) for o in offers])

    def offerRescinded(self, driver: Any, offer_id: Json) -> None:
        self._safely("RESCIND", self._link.events.rescinded, offer_id["value"])

    def statusUpdate(self, driver: Any, status: Json) -> None:
        self._safely("UPDATE", self._link.events.update, dict(status))

    def slaveLost(self, driver: Any, agent_id: Json) -> None:
        self._safely("FAILURE", self._link.events.agent_lost, agent_id["value"])

    def executorLost(self, driver: Any, executor_id: Json, agent_id: Json,
                     status: int) -> None:
        pass  # the command executor's end is reported by its task's update

    def error(self, driver: Any, message: str) -> None:
        self._safely("ERROR", self._link.events.error, str(message))


class _Driver(pymesos.MesosSchedulerDriver):  # type: ignore[misc]  # pymesos is untyped
    """Notes when each event arrived (heartbeats included) and the heartbeat interval."""

    link: MesosLink

    def on_event(self, event: Json) -> None:
        self.link.last_event = time.monotonic()
        if event.get("type") == "SUBSCRIBED":
            secs = event.get("subscribed", {}).get("heartbeat_interval_seconds")
            self.link.heartbeat_secs = float(secs or 15.0)
        super().on_event(event)


class MesosLink:
    """One subscription of the framework to the master, and calls on it."""

    def __init__(self, master: str, framework: Json, events: MesosEvents, *,
                 principal: str = "", secret: str = "", call_timeout_secs: float = 10.0) -> None:
        self.events = events
        self.framework = framework
        self.call_timeout_secs = call_timeout_secs
        self.last_event = time.monotonic()
        self.heartbeat_secs = 15.0
        self.closed = False
        self._driver = _Driver(_Scheduler(self), dict(framework), master_address(master),
                               implicit_acknowledgements=False, failover=True,
                               principal=principal or None, secret=secret or None)
        self._driver.link = self
        self._lock = threading.Lock()
        self._conn: http.client.HTTPConnection | None = None
        self._conn_master = ""

    def start(self) -> None:
        """Connect (pymesos' thread; may wait up to 10 s asking the master for its version)."""
        self.last_event = time.monotonic()
        self._driver.start()

    def stop(self) -> None:
        """Disconnect without tearing the framework down (tasks keep running)."""
        self.closed = True
        self._driver.stop(failover=True)
        # pymesos' join() has no timeout, and its thread may be asleep in a reconnect backoff.
        thread = getattr(self._driver, "_io_thread", None)
        if thread is not None:
            thread.join(5.0)
        with self._lock:
            self._close()

    @property
    def aborted(self) -> bool:
        """pymesos' thread gave up (it does not come back by itself)."""
        return bool(self._driver.aborted)

    @property
    def master(self) -> str:
        """host:port of the master pymesos is (or was last) talking to; "" before it knows."""
        return str(self._driver.master or "")

    def call(self, kind: str, framework_id: str, body: Json | None = None) -> None:
        """POST one scheduler call (ACCEPT, DECLINE, KILL, ACKNOWLEDGE, RECONCILE, ...)."""
        stream_id = self._driver.stream_id
        if not stream_id or not framework_id:
            raise CallNotSent("not subscribed to the Mesos master")
        msg: Json = {"type": kind, "framework_id": {"value": framework_id}}
        if body is not None:
            msg[kind.lower()] = body
        try:
            self._post("/api/v1/scheduler", msg, {"Mesos-Stream-Id": stream_id})
        except CallRejected:
            if self._driver.stream_id != stream_id:  # refused for a stream that just ended
                raise CallNotSent("the subscription changed during the call") from None
            raise

    def operator(self, body: Json) -> Json:
        """One operator API call (e.g. GET_AGENTS) to the current master."""
        reply = self._post("/api/v1", body, {"Accept": "application/json"})
        return json.loads(reply) if reply else {}

    def _post(self, path: str, body: Json, headers: dict[str, str]) -> bytes:
        data = json.dumps(body).encode()
        master = self.master
        with self._lock:
            if self._conn is not None and self._conn_master != master:
                self._close()  # a new leading master: calls follow the subscription
            if self._conn is None:
                host, _, port = master.rpartition(":")
                if not host:
                    raise CallNotSent("no Mesos master known yet")
                conn = http.client.HTTPConnection(host, int(port), timeout=self.call_timeout_secs)
                try:
                    conn.connect()
                except OSError as exc:
                    raise CallNotSent(f"cannot reach Mesos master {master}: {exc}") from None
                self._conn, self._conn_master = conn, master
            try:
                self._conn.request("POST", path, body=data, headers={
                    "Content-Type": "application/json", **headers,
                    **self._driver_auth()})
                resp = self._conn.getresponse()
                reply = resp.read()
            except (OSError, http.client.HTTPException) as exc:
                self._close()
                raise CallUncertain(f"call to Mesos master {self.master} broke: {exc}") from None
        if resp.status >= 300:
            raise CallRejected(f"Mesos master answered {resp.status} to {body.get('type')}: "
                               f"{reply.decode(errors='replace')[:500]}")
        return reply

    def _driver_auth(self) -> dict[str, str]:
        credential = self._driver._basic_credential
        return {"Authorization": credential} if credential else {}

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def agent_get(address: str, path: str, query: dict[str, str | int], timeout: float) -> bytes:
    """GET an agent's HTTP endpoint (its /files API); NotFound for 404, Unavailable otherwise."""
    host, _, port = address.rpartition(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
    try:
        conn.request("GET", f"{path}?{urllib.parse.urlencode(query)}")
        resp = conn.getresponse()
        body = resp.read()
    except (OSError, http.client.HTTPException) as exc:
        raise Unavailable(f"Mesos agent {address}: {exc}") from None
    finally:
        conn.close()
    if resp.status == 404:
        raise NotFound(f"{query.get('path', '')} not found on Mesos agent {address}")
    if resp.status >= 300:
        raise Unavailable(f"Mesos agent {address} answered {resp.status} to {path}")
    return body
