"""Calls to an Aurora scheduler (here: our bridge) over HTTP, as Aurora's client makes them.

The scheduler's base URL comes from the cluster: `scheduler_uri`, or the first
ServerSet member under `scheduler_zk_path` in ZooKeeper (`additionalEndpoints`
https, then http).  Calls POST to `<base>/api` in Thrift binary (Content-Type
and Accept `application/vnd.apache.thrift.binary`, Aurora's current client)
or Thrift JSON (`application/x-thrift`, its older one), with the IDL of
thrift/api.thrift loaded by thriftpy2.  `auth_mechanism: BASIC` sends the
~/.netrc credentials of the scheduler's host.

Failures: no answer -> Unreachable (after a few tries a second apart);
HTTP errors and malformed replies -> TransportFailed; a Response with
AUTH_FAILED -> AuthFailed; ERROR_TRANSIENT answers are retried like Aurora's
client does, a few times.  Other Responses are returned as they are.
"""

from __future__ import annotations

import base64
import http.client
import io
import netrc
import socket
import ssl
import time
import urllib.parse
from typing import Any

from thriftpy2.protocol import TApacheJSONProtocol
from thriftpy2.protocol.binary import TBinaryProtocol
from thriftpy2.thrift import TApplicationException, TClient
from thriftpy2.transport import TTransportException

from aurorabridge.client.clusters import Cluster
from aurorabridge.thrift_api import api

BINARY = "application/vnd.apache.thrift.binary"
USER_AGENT = "Aurora V2;peloton-py"
CONNECT_ATTEMPTS = 3
TRANSIENT_ATTEMPTS = 5


class SchedulerError(Exception):
    """A call that got no usable answer."""


class Unreachable(SchedulerError):
    """Nothing answered (connection refused, timed out, no scheduler in ZooKeeper)."""


class TransportFailed(SchedulerError):
    """An HTTP error or a reply that is not a Thrift answer."""


class AuthFailed(SchedulerError):
    """The scheduler refused the caller (AUTH_FAILED)."""


class _HttpTransport:
    """Buffers one Thrift call, POSTs it on flush, and serves the reply's bytes."""

    def __init__(self, url: str, headers: dict[str, str], timeout: float) -> None:
        self.url = urllib.parse.urlparse(url)
        self.headers = headers
        self.timeout = timeout
        self._out = io.BytesIO()
        self._in = io.BytesIO()

    def is_open(self) -> bool:
        """Always open: each call makes its own connection."""
        return True

    def open(self) -> None:
        """Connections are made per call."""

    def close(self) -> None:
        """Nothing stays open between calls."""

    def write(self, data: bytes) -> None:
        """Buffer part of the call."""
        self._out.write(data)

    def read(self, size: int) -> bytes:
        """Read from the reply."""
        return self._in.read(size)

    def flush(self) -> None:
        """POST the buffered call and keep the reply (TransportFailed unless HTTP 200)."""
        body, self._out = self._out.getvalue(), io.BytesIO()
        host = self.url.hostname or "localhost"
        conn: http.client.HTTPConnection
        if self.url.scheme == "https":
            conn = http.client.HTTPSConnection(host, self.url.port, timeout=self.timeout,
                                               context=ssl.create_default_context())
        else:
            conn = http.client.HTTPConnection(host, self.url.port, timeout=self.timeout)
        try:
            conn.request("POST", self.url.path or "/", body=body, headers=self.headers)
            reply = conn.getresponse()
            data = reply.read()
        finally:
            conn.close()
        if reply.status != 200:
            raise TransportFailed(f"HTTP {reply.status} {reply.reason} from {self.url.geturl()}: "
                                  f"{data[:200].decode('utf-8', 'replace')}")
        self._in = io.BytesIO(data)


def _netrc_auth(host: str) -> str | None:
    try:
        found = netrc.netrc().authenticators(host)
    except (OSError, netrc.NetrcParseError):
        return None
    if not found:
        return None
    login, _, password = found
    token = base64.b64encode(f"{login}:{password or ''}".encode()).decode()
    return f"Basic {token}"


def resolve_url(cluster: Cluster) -> str:
    """The scheduler's base URL for `cluster` (Unreachable when it cannot be found)."""
    if cluster.zk:
        if not cluster.scheduler_zk_path:
            raise Unreachable(f"cluster {cluster.name} names zk but no scheduler_zk_path")
        from kazoo.client import KazooClient
        from kazoo.handlers.threading import KazooTimeoutError

        from peloton.common.serverset import resolve
        from peloton.core.errors import PelotonError

        hosts = ",".join(f"{h.strip()}:{cluster.zk_port}" for h in cluster.zk.split(",") if h.strip())
        zk = KazooClient(hosts=hosts, timeout=10.0)
        try:
            zk.start(timeout=10.0)
        except KazooTimeoutError:
            raise Unreachable(f"Failed to connect to Zookeeper at {hosts} within 10 seconds.") from None
        try:
            return resolve(zk, cluster.scheduler_zk_path).http_url()
        except PelotonError:
            raise Unreachable(f"No schedulers detected in {cluster.name}!") from None
        finally:
            zk.stop()
            zk.close()
    if cluster.scheduler_uri:
        return cluster.scheduler_uri.rstrip("/")
    raise Unreachable(f'cluster {cluster.name} does not specify zk or scheduler_uri')


class SchedulerClient:
    """Aurora's Thrift API of one cluster's scheduler."""

    def __init__(self, cluster: Cluster, timeout: float = 60.0) -> None:
        self.cluster = cluster
        self.timeout = timeout
        self._url: str | None = None

    @property
    def url(self) -> str:
        """The scheduler's base URL (resolved once)."""
        if self._url is None:
            self._url = resolve_url(self.cluster)
        return self._url

    def _client(self) -> TClient:
        headers = {"User-Agent": USER_AGENT}
        if self.cluster.thrift_protocol == "json":
            headers["Content-Type"] = "application/x-thrift"
        else:
            headers["Content-Type"] = headers["Accept"] = BINARY
        if self.cluster.auth_mechanism.upper() == "BASIC":
            auth = _netrc_auth(urllib.parse.urlparse(self.url).hostname or "")
            if auth:
                headers["Authorization"] = auth
        transport = _HttpTransport(self.url + "/api", headers, self.timeout)
        proto: Any = (TApacheJSONProtocol(transport) if self.cluster.thrift_protocol == "json"
                      else TBinaryProtocol(transport))
        return TClient(api.AuroraAdmin, proto)

    def _once(self, method: str, args: tuple[Any, ...]) -> Any:
        last: Exception | None = None
        for attempt in range(CONNECT_ATTEMPTS):
            try:
                return getattr(self._client(), method)(*args)
            except (TimeoutError, ConnectionError, socket.gaierror) as exc:
                last = exc
            except OSError as exc:
                last = exc
            if attempt + 1 < CONNECT_ATTEMPTS:
                time.sleep(1.0)
        raise Unreachable(f"Could not connect to {self.url}/api: {last}")

    def call(self, method: str, *args: Any) -> Any:
        """Call `method`; the scheduler's Response (see the module doc for failures)."""
        for attempt in range(TRANSIENT_ATTEMPTS):
            try:
                response = self._once(method, args)
            except (TApplicationException, TTransportException, EOFError, ValueError,
                    UnicodeDecodeError) as exc:
                raise TransportFailed(f"{method}: the scheduler's reply is not a Thrift answer: "
                                      f"{exc}") from None
            code = response.responseCode
            if code == api.ResponseCode.AUTH_FAILED:
                raise AuthFailed(messages(response) or "Unauthorized")
            if code != api.ResponseCode.ERROR_TRANSIENT or attempt + 1 == TRANSIENT_ATTEMPTS:
                return response
            time.sleep(1.0)
        raise AssertionError("unreachable")  # pragma: no cover


def messages(response: Any) -> str:
    """The messages of a Response's details, joined as Aurora's client shows them."""
    return ", ".join(d.message or "Unknown error" for d in (response.details or []))
