"""The few Kubernetes API calls the backend makes, as JSON over the official client's transport.

The `kubernetes` package loads credentials (kubeconfig with its tokens, client
certificates and exec plugins, or a pod's service account) and signs each
request; the bodies are read and written here as plain JSON (orjson), because
the client's model classes cost more than the call itself at thousands of
pods and cannot decode every reply (kubernetes-client/python#825).  Watches are
read line by line from the streamed reply.

Errors are typed: `Gone` (410: a watch's resourceVersion is too old, relist),
`Conflict` (409: the object exists), `KubeNotFound` (404), `Refused` (any other
4xx: the request is wrong or not allowed, retrying will not help) and
`Unreachable` (no answer, or 5xx / 429: retry later).
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterator, Sequence
from typing import Any

import orjson

from peloton.hostmgr.backends.k8s_config import KubeConfig

Json = dict[str, Any]


class KubeError(Exception):
    """An API call failed; `status` is the HTTP status (0: no answer)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}" if status else message)
        self.status = status
        self.message = message


class Gone(KubeError):
    """410: the resourceVersion asked for is no longer kept; list again."""


class Conflict(KubeError):
    """409: the object already exists (or changed meanwhile)."""


class KubeNotFound(KubeError):
    """404: no such object."""


class Refused(KubeError):
    """A 4xx other than the above: bad request, forbidden, invalid; retrying will not help."""


class Unreachable(KubeError):
    """No answer, a 5xx or 429: the call may succeed later."""


def _error(status: int, body: bytes) -> KubeError:
    try:
        message = str(orjson.loads(body).get("message", "")) or body.decode(errors="replace")
    except (orjson.JSONDecodeError, AttributeError):
        message = body.decode(errors="replace")[:500]
    kind: type[KubeError]
    if status == 410:
        kind = Gone
    elif status == 409:
        kind = Conflict
    elif status == 404:
        kind = KubeNotFound
    elif status == 429 or status >= 500:
        kind = Unreachable
    else:
        kind = Refused
    return kind(status, message)


class KubeApi:
    """One API server, reached with the credentials the config names."""

    def __init__(self, config: KubeConfig) -> None:
        # Imported here: the package is the optional `k8s` extra.
        from kubernetes import client as k8s_client
        from kubernetes import config as k8s_config

        conf = k8s_client.Configuration()
        if config.source == "in-cluster":
            k8s_config.load_incluster_config(client_configuration=conf)
        else:
            k8s_config.load_kube_config(config_file=config.source, context=config.context or None,
                                        client_configuration=conf)
        # Creations in flight plus two watches and a spare, each on its own connection.
        conf.connection_pool_maxsize = config.create_concurrency + 8
        conf.retries = False
        self._client = k8s_client.ApiClient(conf)
        self._timeout = config.call_timeout_secs
        self.host = str(conf.host)

    def close(self) -> None:
        """Drop the connections."""
        self._client.close()

    def _send(self, method: str, path: str, query: Sequence[tuple[str, str]] = (),
              body: Json | None = None, timeout: float | tuple[float, float] | None = None,
              content_type: str = "application/json") -> Any:
        url_path = path + ("?" + urllib.parse.urlencode(list(query)) if query else "")
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        _, url, headers, _, _ = self._client.param_serialize(
            method, url_path, header_params=headers, auth_settings=["BearerToken"])
        try:
            return self._client.call_api(
                method, url, header_params=headers,
                body=body,  # the transport writes JSON itself for a JSON content type
                _request_timeout=timeout if timeout is not None else self._timeout)
        except KubeError:
            raise
        except Exception as exc:  # urllib3 and ssl errors: nothing answered
            raise Unreachable(0, f"{method} {path}: {type(exc).__name__}: {exc}") from exc

    def raw(self, method: str, path: str, query: Sequence[tuple[str, str]] = (),
            body: Json | None = None) -> bytes:
        """One request; the bytes of its answer, or a typed KubeError."""
        resp = self._send(method, path, query, body)
        try:
            data = resp.read() or b""
        except Exception as exc:
            raise Unreachable(0, f"{method} {path}: reading the answer: {exc}") from exc
        if resp.status >= 300:
            raise _error(resp.status, data)
        return bytes(data)

    def call(self, method: str, path: str, query: Sequence[tuple[str, str]] = (),
             body: Json | None = None) -> Json:
        """One request; its JSON answer, or a typed KubeError."""
        data = self.raw(method, path, query, body)
        return orjson.loads(data) if data else {}

    def list(self, path: str, query: Sequence[tuple[str, str]] = ()) -> tuple[list[Json], str]:
        """Every item of a collection (in pages of 500) and the list's resourceVersion."""
        items: list[Json] = []
        cont = ""
        while True:
            page = self.call("GET", path, [*query, ("limit", "500"), *(
                [("continue", cont)] if cont else [])])
            items.extend(page.get("items") or ())
            meta = page.get("metadata") or {}
            cont = meta.get("continue") or ""
            if not cont:
                return items, str(meta.get("resourceVersion", ""))

    def patch(self, path: str, body: Json) -> Json:
        """A JSON merge patch of one object."""
        resp = self._send("PATCH", path, (), body, content_type="application/merge-patch+json")
        data = resp.read()
        if resp.status >= 300:
            raise _error(resp.status, data or b"")
        return orjson.loads(data) if data else {}

    def watch(self, path: str, resource_version: str, query: Sequence[tuple[str, str]] = (),
              timeout_secs: int = 300) -> KubeWatch:
        """An open watch of a collection from `resource_version` (events ADDED, MODIFIED,
        DELETED, BOOKMARK) until the server ends it or `close()` is called."""
        resp = self._send("GET", path, [*query, ("watch", "1"), ("resourceVersion", resource_version),
                                        ("allowWatchBookmarks", "true"),
                                        ("timeoutSeconds", str(timeout_secs))],
                          timeout=(self._timeout, timeout_secs + 30.0))
        if resp.status >= 300:
            try:
                raise _error(resp.status, resp.read() or b"")
            finally:
                resp.response.release_conn()
        return KubeWatch(path, resp.response)


class KubeWatch:
    """The stream of one watch; `close()` (from any greenlet) ends `events()`."""

    def __init__(self, path: str, raw: Any) -> None:
        self._path = path
        self._raw = raw
        self.closed = False

    def events(self) -> Iterator[Json]:
        """Events as they arrive.  A 410 as an ERROR event raises Gone; a broken stream
        raises Unreachable; a stream the server ended (or `close()`) simply stops."""
        buffer = b""
        try:
            for chunk in self._raw.stream(65536, decode_content=True):
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if not line.strip():
                        continue
                    event = orjson.loads(line)
                    if event.get("type") == "ERROR":
                        status = event.get("object") or {}
                        raise _error(int(status.get("code", 500)), orjson.dumps(status))
                    yield event
        except KubeError:
            raise
        except Exception as exc:
            if not self.closed:
                raise Unreachable(0, f"watch {self._path}: {type(exc).__name__}: {exc}") from exc
        finally:
            self.close()

    def close(self) -> None:
        """End the watch (a blocked read returns)."""
        if self.closed:
            return
        self.closed = True
        try:
            self._raw.shutdown()
        except Exception:
            pass  # older urllib3 has no shutdown(); close() below still ends the stream
        try:
            self._raw.close()
        except Exception:
            pass  # already closed by the other side
