"""The Mesos v1 scheduler HTTP API, spoken directly (JSON over urllib3; no pymesos).

`MesosLink` is one subscription of the framework: a thread POSTs SUBSCRIBE
to the leading master and reads the answer, a RecordIO stream of events
(`<length>\\n<JSON>` records over chunked HTTP) carrying a `Mesos-Stream-Id`
header that every later call must repeat.  Events go, typed, to a
`MesosEvents`.  Following the API's rules (Mesos' scheduler-http-api.md):

- the leader: a `host:port` / `http://` master is asked directly; a standby
  answers 307 with the leader in `Location`, which is followed; for
  `zk://hosts/path` the leader is the `json.info_` node with the lowest
  sequence under the path (MasterInfo as JSON), watched, so the stream moves
  when leadership does;
- re-subscription: once SUBSCRIBED, every new SUBSCRIBE carries the
  framework id (in the call and in FrameworkInfo.id), which is how a
  scheduler fails over: the master keeps the framework, its tasks and its
  failover timeout, rescinds the old stream's offers and (if another
  connection still held it) tells that one "Framework failed over";
- a broken stream, a refused SUBSCRIBE or a 503 (no leader yet) is retried
  with backoff (0.5 s doubling to 10 s); the link never gives up by itself
  (the worker replaces it when the stream is silent for three heartbeats or
  the master removed the framework);
- calls (ACCEPT, KILL, ACKNOWLEDGE, RECONCILE, ...) are POSTed on pooled
  keep-alive connections, 202 meaning accepted.  urllib3 checks a pooled
  connection before reusing it, so a connection the master closed while idle
  does not make a call look uncertain.  A failed call says whether the master
  got it: `CallNotSent`, `CallRejected` (it answered an error) or
  `CallUncertain` (the connection broke mid-call).

Stopping a link only closes its stream: the framework is never torn down
(TEARDOWN would kill every task), so a restarted host manager is the same
framework within the failover timeout.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
import time
import urllib.parse
from typing import Any, Protocol

import urllib3
from urllib3.exceptions import (
    ConnectTimeoutError,
    HTTPError,
    NewConnectionError,
)

from peloton.core.errors import NotFound, PelotonError, Unavailable
from peloton.hostmgr.backends.mesos_wire import Json

log = logging.getLogger(__name__)

SCHEDULER_PATH = "/api/v1/scheduler"
#: The stream carries a heartbeat every 15 s by default; a read blocked this long is dead.
STREAM_READ_TIMEOUT = 120.0
MAX_REDIRECTS = 5


class CallNotSent(Unavailable):
    """The master did not get the call (no subscription, or no connection)."""


class CallUncertain(Unavailable):
    """The connection broke while the call was in flight: the master may have acted on it."""


class CallRejected(PelotonError):
    """The master answered the call with an error status."""

    kind = "rejected"


class MesosEvents(Protocol):
    """What the link reports; called from the link's thread, must not block long."""

    def subscribed(self, framework_id: str, stream_id: str) -> None:
        """SUBSCRIBED: the framework (re-)registered on a new stream."""

    def disconnected(self) -> None:
        """The stream is gone (its offers are void); the link is reconnecting."""

    def offers(self, offers: list[Json]) -> None:
        """OFFERS."""

    def rescinded(self, offer_id: str) -> None:
        """RESCIND of one offer."""

    def update(self, status: Json) -> None:
        """UPDATE: one TaskStatus."""

    def agent_lost(self, agent_id: str) -> None:
        """FAILURE without an executor: the agent is gone."""

    def error(self, message: str) -> None:
        """ERROR (e.g. the framework was removed, or failed over to another scheduler)."""


def master_address(url: str) -> str:
    """A master URL as "host:port", or "zk://hosts/path" unchanged (https is unsupported)."""
    if url.startswith(("zk://", "zoo://")):
        return url
    parsed = urllib.parse.urlsplit(url if "//" in url else f"//{url}")
    if parsed.scheme not in ("", "http") or not parsed.hostname:
        raise ValueError(f"unsupported Mesos master {url!r}: use host:port, http://host:port "
                         "or zk://host:port/path")
    return f"{parsed.hostname}:{parsed.port or 5050}"


def records(chunks: Any) -> Any:
    """Split a RecordIO byte stream (an iterable of byte chunks) into records."""
    buf = b""
    for chunk in chunks:
        buf += chunk
        while True:
            head, sep, rest = buf.partition(b"\n")
            if not sep:
                break
            size = int(head)
            if len(rest) < size:
                break
            yield rest[:size]
            buf = rest[size:]


class ZooKeeperLeader:
    """The leading master of `zk://hosts/path`, kept current by a children watch."""

    def __init__(self, url: str, changed: Any) -> None:
        from kazoo.client import KazooClient

        parsed = urllib.parse.urlsplit(url)
        self.path = parsed.path or "/mesos"
        self._changed = changed
        self.leader = ""
        self._zk = KazooClient(hosts=parsed.netloc, timeout=10.0)
        self._zk.start(timeout=15)
        self._zk.ChildrenWatch(self.path, self._children, allow_session_lost=True)

    def _children(self, children: list[str]) -> None:
        infos = sorted((c for c in children if c.startswith("json.info_")),
                       key=lambda c: int(c.rsplit("_", 1)[-1]))
        leader = ""
        for child in infos:
            try:
                data, _ = self._zk.get(f"{self.path}/{child}")
                info = json.loads(data)
                address = info.get("address", {})
                host = address.get("ip") or address.get("hostname") or info.get("hostname")
                leader = f"{host}:{address.get('port') or info.get('port')}"
                break
            except Exception:  # a node that went away meanwhile, or no JSON: the next one
                continue
        if leader != self.leader:
            log.info("Mesos leading master in ZooKeeper %s: %s", self.path, leader or "none")
            self.leader = leader
            self._changed()

    def close(self) -> None:
        """Stop watching."""
        self._zk.stop()
        self._zk.close()


class MesosLink:
    """One subscription of the framework to the master, and calls on it."""

    def __init__(self, master: str, framework: Json, events: MesosEvents, *,
                 principal: str = "", secret: str = "", call_timeout_secs: float = 10.0) -> None:
        self.events = events
        self.framework = dict(framework)
        self.framework_id = str(framework.get("id", {}).get("value", ""))
        self.call_timeout_secs = call_timeout_secs
        self.last_event = time.monotonic()
        self.heartbeat_secs = 15.0
        #: stop() was called: no more events, no reconnection.
        self.closed = False
        #: The master gave the framework to another scheduler: no reconnection.
        self.retired = False
        self.stream_id = ""
        self._target = master_address(master)
        self._leader = ""      # host:port the stream was last redirected to or found in ZK
        self._master = ""      # host:port of the current stream
        self._auth = ({"Authorization": "Basic " + base64.b64encode(
            f"{principal}:{secret}".encode()).decode()} if principal and secret else {})
        self._pool = urllib3.PoolManager(num_pools=4, maxsize=4, retries=False)
        self._stream: Any = None
        self._zk: ZooKeeperLeader | None = None
        self._thread: threading.Thread | None = None
        self._failed = False
        self._wake = threading.Event()

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> None:
        """Start subscribing (in the link's own thread)."""
        self.last_event = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="mesos-subscription", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Close the stream without tearing the framework down (tasks keep running)."""
        self.closed = True
        self._wake.set()
        self._cut()
        if self._thread is not None:
            self._thread.join(5.0)
        if self._zk is not None:
            self._zk.close()
        self._pool.clear()

    @property
    def aborted(self) -> bool:
        """The subscription thread died of a bug (the worker replaces the link)."""
        return self._failed

    @property
    def master(self) -> str:
        """host:port of the master of the current (or last) stream; "" before there was one."""
        return self._master

    # -- the subscription -----------------------------------------------------------------------
    def _run(self) -> None:
        backoff = 0.5
        try:
            while not self._done():
                ok = self._subscribe_once()
                if self._done():
                    return
                backoff = 0.5 if ok else min(backoff * 2, 10.0)
                self._wake.wait(backoff)
                self._wake.clear()
        except Exception:
            log.exception("Mesos subscription thread failed")
            self._failed = True

    def _done(self) -> bool:
        return self.closed or self.retired

    def _where(self) -> str:
        if not self._target.startswith(("zk://", "zoo://")):
            return self._leader or self._target
        if self._zk is None:
            try:
                self._zk = ZooKeeperLeader(self._target, self._leader_changed)
            except Exception as exc:
                log.warning("cannot read the Mesos master from %s: %s", self._target, exc)
                return ""
        return self._zk.leader

    def _leader_changed(self) -> None:
        if self._zk is not None and self._master and self._zk.leader != self._master:
            self._cut()  # the stream moves to the new leader
        self._wake.set()

    def _subscribe_once(self) -> bool:
        """One SUBSCRIBE and its stream; True if the master subscribed us."""
        address = self._where()
        for _ in range(MAX_REDIRECTS):
            if not address:
                return False
            call: Json = {"type": "SUBSCRIBE", "subscribe": {"framework_info": self._info()}}
            if self.framework_id:
                call["framework_id"] = {"value": self.framework_id}
            try:
                resp = self._pool.urlopen(
                    "POST", f"http://{address}{SCHEDULER_PATH}", body=json.dumps(call).encode(),
                    headers={"Content-Type": "application/json", "Accept": "application/json",
                             "Connection": "close", **self._auth},
                    preload_content=False, redirect=False,
                    timeout=urllib3.Timeout(connect=self.call_timeout_secs,
                                            read=STREAM_READ_TIMEOUT))
            except HTTPError as exc:
                log.info("Mesos master %s: SUBSCRIBE failed: %s", address, exc)
                return False
            if resp.status in (301, 302, 303, 307, 308):
                location = resp.headers.get("Location", "")
                resp.release_conn()
                # "//host:port/api/v1/scheduler": the leading master.
                address = self._leader = urllib.parse.urlsplit(
                    location if "//" in location else f"//{location}").netloc
                continue
            if resp.status != 200:
                body = resp.read(4096).decode(errors="replace")
                resp.release_conn()
                log.warning("Mesos master %s refused SUBSCRIBE: %s %s", address, resp.status, body)
                return False
            return self._read(resp, address)
        return False

    def _read(self, resp: Any, address: str) -> bool:
        self._stream, self._master = resp, address
        self.stream_id = resp.headers.get("Mesos-Stream-Id", "")
        subscribed = False
        try:
            for record in records(iter(lambda: resp.read1(65536), b"")):
                self.last_event = time.monotonic()
                if self.closed:
                    break  # a stopped link's last words: the link that replaced it speaks
                event = json.loads(record)
                if event.get("type") == "SUBSCRIBED":
                    subscribed = True
                self._dispatch(event)
                if self.retired:
                    break
        except (HTTPError, OSError, ValueError) as exc:
            if not self.closed:
                log.info("Mesos stream from %s ended: %s", address, exc)
        finally:
            self._stream = None
            self.stream_id = ""
            resp.release_conn()
        if subscribed and not self.closed:
            self.events.disconnected()
        return subscribed

    def _dispatch(self, event: Json) -> None:
        kind = event.get("type")
        body = event.get(str(kind).lower(), {}) or {}
        try:
            if kind == "SUBSCRIBED":
                self.framework_id = str(body.get("framework_id", {}).get("value", ""))
                self.heartbeat_secs = float(body.get("heartbeat_interval_seconds") or 15.0)
                self.events.subscribed(self.framework_id, self.stream_id)
            elif kind == "OFFERS":
                self.events.offers([dict(o) for o in body.get("offers", [])])
            elif kind == "RESCIND":
                self.events.rescinded(str(body.get("offer_id", {}).get("value", "")))
            elif kind == "UPDATE":
                self.events.update(dict(body.get("status", {})))
            elif kind == "FAILURE":
                if "agent_id" in body and "executor_id" not in body:
                    self.events.agent_lost(str(body["agent_id"].get("value", "")))
            elif kind == "ERROR":
                message = str(body.get("message", ""))
                if "failed over" in message.lower():
                    # Another scheduler subscribed with our framework id (a new host manager
                    # leader): stay away instead of taking the framework back.
                    self.retired = True
                self.events.error(message)
            # HEARTBEAT only refreshes last_event; INVERSE_OFFERS, MESSAGE and operation
            # feedback are not used (README.md beside this module).
        except Exception:
            log.exception("Mesos backend failed to handle %s", kind)

    def _info(self) -> Json:
        info = dict(self.framework)
        if self.framework_id:
            info["id"] = {"value": self.framework_id}
        return info

    def _cut(self) -> None:
        stream = self._stream
        if stream is not None:
            try:
                stream.shutdown()  # unblocks the reading thread
            except Exception:
                pass

    # -- calls ----------------------------------------------------------------------------------
    def call(self, kind: str, framework_id: str, body: Json | None = None) -> None:
        """POST one scheduler call (ACCEPT, DECLINE, KILL, ACKNOWLEDGE, RECONCILE, ...)."""
        stream_id = self.stream_id
        if not stream_id or not framework_id:
            raise CallNotSent("not subscribed to the Mesos master")
        msg: Json = {"type": kind, "framework_id": {"value": framework_id}}
        if body is not None:
            msg[kind.lower()] = body
        try:
            self._post(SCHEDULER_PATH, msg, {"Mesos-Stream-Id": stream_id})
        except CallRejected:
            if self.stream_id != stream_id:  # refused for a stream that just ended
                raise CallNotSent("the subscription changed during the call") from None
            raise

    def operator(self, body: Json) -> Json:
        """One operator API call (e.g. GET_AGENTS) to the current master."""
        reply = self._post("/api/v1", body, {"Accept": "application/json"})
        return json.loads(reply) if reply else {}

    def _post(self, path: str, body: Json, headers: dict[str, str]) -> bytes:
        master = self._master
        if not master:
            raise CallNotSent("no Mesos master known yet")
        try:
            resp = self._pool.urlopen(
                "POST", f"http://{master}{path}", body=json.dumps(body).encode(),
                headers={"Content-Type": "application/json", **headers, **self._auth},
                redirect=False, timeout=urllib3.Timeout(total=self.call_timeout_secs))
        except (NewConnectionError, ConnectTimeoutError) as exc:
            raise CallNotSent(f"cannot reach Mesos master {master}: {exc}") from None
        except HTTPError as exc:
            raise CallUncertain(f"call to Mesos master {master} broke: {exc}") from None
        if resp.status >= 300:
            raise CallRejected(f"Mesos master answered {resp.status} to {body.get('type')}: "
                               f"{resp.data.decode(errors='replace')[:500]}")
        return bytes(resp.data)


def agent_get(address: str, path: str, query: dict[str, str | int], timeout: float) -> bytes:
    """GET an agent's HTTP endpoint (its /files API); NotFound for 404, Unavailable otherwise."""
    try:
        resp = urllib3.request("GET", f"http://{address}{path}?{urllib.parse.urlencode(query)}",
                               retries=False, timeout=timeout)
    except HTTPError as exc:
        raise Unavailable(f"Mesos agent {address}: {exc}") from None
    if resp.status == 404:
        raise NotFound(f"{query.get('path', '')} not found on Mesos agent {address}")
    if resp.status >= 300:
        raise Unavailable(f"Mesos agent {address} answered {resp.status} to {path}")
    return bytes(resp.data)
