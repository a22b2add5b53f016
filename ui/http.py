"""The UI's WSGI application: pages, static files and the JSON API under /ui/api.

Routes (every JSON answer is an object; errors are `{"error": kind, "message": text}`):

    GET  /  /jobs  /jobs/<id>  /jobs/<id>/tasks/<n>  /pools  /hosts   the page shell
    GET  /static/<file>                                                CSS, JS, icons
    GET  /health                                                       "OK"
    GET  /ui/api/overview | pools | hosts?state= | jobs?state=&name=&owner=&pool=&limit=
    GET  /ui/api/jobs/<id>          GET /ui/api/jobs/<id>/tasks/<n>?log_bytes=
    GET  /ui/api/jobs/<id>/explain  GET /ui/api/  (an index of these routes, ui/api_index.py)
    GET  /ui/api/jobs/<id>/forecast?instance=  (when pending tasks start; takes seconds)
    POST /ui/api/jobs/<id>/(stop|start|restart)        body {"batch_size": n} optional
    POST /ui/api/jobs/<id>/tasks/<n>/(stop|start|restart)
    POST /ui/api/jobs/<id>/workflow/(pause|resume|abort)
    POST /ui/api/hosts/<hostname>/maintenance/(start|complete)

Errors are mapped once, here: the kind of the client's `PelotonError`
picks the HTTP status (not_found 404, invalid_argument 400, conflict and
failed_precondition 409, unavailable 503, ...) and its message is passed
on as the server wrote it.  Anything else is a 500 that is also logged.
Refusals (401 and 403, a failed login included) are written to the audit
log there too, with the user or `anonymous`, the request and its target.

    GET  /login   POST /login (form: username, password, csrf)   POST /logout (form: csrf)

Before any route, ui/gate.py checks the Host header against the server's
own names (421 otherwise: DNS rebinding), gives the browser a session
cookie and, with authentication on, sends pages to /login and answers the
JSON API with 401 until the user logs in; each request then reaches Peloton
with that user's token.

Writes must be `POST` with `Content-Type: application/json`, the session's
CSRF token in `X-CSRF-Token` (the page embeds it) and, when the browser
sends an `Origin`, from this very host: a page elsewhere cannot make a
visitor's browser stop their jobs.  Pages may load nothing from elsewhere
(Content-Security-Policy `default-src 'self'`).
"""

from __future__ import annotations

import html
import json
import logging
import re
from collections.abc import Callable, Iterable
from importlib import resources
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from peloton.core.errors import InvalidArgument, PelotonError, Unauthenticated
from ui import api_index
from ui.actions import HOST_VERBS, JOB_VERBS, TASK_VERBS, WORKFLOW_VERBS, Actions
from ui.gate import MisdirectedHost, UiGate
from ui.reads import FORECAST_WALL_S, Reads, page_timeout_secs
from ui.sessions import Session

log = logging.getLogger(__name__)

StartResponse = Callable[[str, list[tuple[str, str]]], Any]

#: HTTP status of each error kind; unknown kinds are 500.
STATUS_OF_KIND = {
    "invalid_argument": 400, "unauthenticated": 401, "permission_denied": 403, "not_found": 404,
    "method_not_allowed": 405,
    "already_exists": 409, "conflict": 409, "failed_precondition": 409, "payload_too_large": 413,
    "unsupported_media_type": 415, "resource_exhausted": 429, "unimplemented": 501,
    "unavailable": 503, "deadline_exceeded": 504, "misdirected": 421,
}
_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
            405: "Method Not Allowed", 409: "Conflict", 413: "Payload Too Large",
            421: "Misdirected Request", 303: "See Other",
            415: "Unsupported Media Type", 429: "Too Many Requests", 500: "Internal Server Error",
            501: "Not Implemented", 503: "Service Unavailable", 504: "Gateway Timeout"}
_TYPES = {".html": "text/html; charset=utf-8", ".css": "text/css; charset=utf-8",
          ".js": "text/javascript; charset=utf-8", ".svg": "image/svg+xml", ".png": "image/png"}
_SECURITY = [("X-Content-Type-Options", "nosniff"), ("Referrer-Policy", "same-origin"),
             ("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'")]
MAX_BODY = 64 * 1024

_PAGES = re.compile(r"^/(?:jobs(?:/[^/]+(?:/tasks/\d+)?)?|pools|hosts)?/?$")
_JOB = r"(?P<job>[^/]+)"
_TASK = r"/tasks/(?P<instance>\d+)"


#: Error kinds that are refusals (audited).
REFUSALS = frozenset({"unauthenticated", "permission_denied"})
_TARGETS = (re.compile(r"/jobs/(?P<job>[^/]+)(?:/tasks/(?P<instance>\d+))?"),
            re.compile(r"/hosts/(?P<host>[^/]+)"), re.compile(r"/(?P<pools>pools)\b"))


class HttpError(Exception):
    """A failure of the HTTP exchange itself (not of Peloton): a kind and a message, and the
    answer to give when it is not the JSON error (a login page that says why)."""

    def __init__(self, kind: str, message: str, reply: Reply | None = None) -> None:
        super().__init__(message)
        self.kind, self.message, self.reply = kind, message, reply


class Reply:
    """Status, headers and body of one answer."""

    def __init__(self, status: int, content_type: str, body: bytes, cache: str = "no-store") -> None:
        self.status, self.body = status, body
        self.headers = [("Content-Type", content_type), ("Cache-Control", cache), *_SECURITY]

    @classmethod
    def json(cls, status: int, data: object) -> Reply:
        """A JSON answer."""
        return cls(status, "application/json; charset=utf-8", json.dumps(data).encode())

    @classmethod
    def error(cls, kind: str, message: str) -> Reply:
        """The JSON error body for `kind`, with its HTTP status."""
        return cls.json(STATUS_OF_KIND.get(kind, 500), {"error": kind, "message": message})


Handler = Callable[[Reads, Actions, dict[str, str], dict[str, str], dict[str, Any]], object]


class UiApp:
    """The WSGI callable: see the module docstring for routes and rules."""

    def __init__(self, gate: UiGate, *, refresh_ms: int = 2000,
                 forecast_wall_secs: float = FORECAST_WALL_S) -> None:
        self.gate = gate
        self.refresh_ms = refresh_ms
        self.forecast_wall_secs = forecast_wall_secs
        #: What the pages wait for an answer (the page shell tells their script).
        self.api_timeout_ms = round(page_timeout_secs(forecast_wall_secs) * 1000)
        get: list[tuple[str, Handler]] = [
            (r"", lambda r, a, m, q, b: api_index.index(self.route_patterns)),
            (r"/overview", lambda r, a, m, q, b: r.overview()),
            (r"/pools", lambda r, a, m, q, b: r.pools()),
            (r"/hosts", lambda r, a, m, q, b: r.hosts(q)),
            (r"/jobs", lambda r, a, m, q, b: r.jobs(q)),
            (rf"/jobs/{_JOB}", lambda r, a, m, q, b: r.job(m["job"])),
            (rf"/jobs/{_JOB}/explain", lambda r, a, m, q, b: r.explain(m["job"])),
            (rf"/jobs/{_JOB}/forecast", lambda r, a, m, q, b: r.forecast(m["job"], q)),
            (rf"/jobs/{_JOB}{_TASK}", lambda r, a, m, q, b: r.task(m["job"], _instance(m), q)),
        ]
        post: list[tuple[str, Handler]] = [
            (rf"/jobs/{_JOB}/(?P<verb>{'|'.join(JOB_VERBS)})",
             lambda r, a, m, q, b: a.job(m["job"], m["verb"], b)),
            (rf"/jobs/{_JOB}{_TASK}/(?P<verb>{'|'.join(TASK_VERBS)})",
             lambda r, a, m, q, b: a.task(m["job"], _instance(m), m["verb"])),
            (rf"/jobs/{_JOB}/workflow/(?P<verb>{'|'.join(WORKFLOW_VERBS)})",
             lambda r, a, m, q, b: a.workflow(m["job"], m["verb"])),
            (rf"/hosts/(?P<host>[^/]+)/maintenance/(?P<verb>{'|'.join(HOST_VERBS)})",
             lambda r, a, m, q, b: a.host(m["host"], m["verb"])),
        ]
        self._routes = {"GET": _compile(get), "POST": _compile(post)}
        #: (method, regex) of every API route, for the index.
        self.route_patterns = [(m, p) for m, table in (("GET", get), ("POST", post))
                               for p, _ in table]

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        cookies: list[tuple[str, str]] = []
        session: Session | None = None
        failure: tuple[str, str] | None = None
        try:
            self.gate.check_host(environ)
            session, new = self.gate.session(environ)
            if new:
                cookies.append(self.gate.cookie(session))
            reply = self._route(environ, session, cookies)
        except MisdirectedHost as exc:
            reply = Reply.error("misdirected", str(exc))
        except HttpError as exc:
            reply = exc.reply or Reply.error(exc.kind, exc.message)
            failure = exc.kind, exc.message
        except PelotonError as exc:
            reply = Reply.error(exc.kind, exc.message)
            failure = exc.kind, exc.message
        except Exception as exc:  # a bug or an unexpected failure: say so, and log it
            log.exception("UI request %s %s failed", environ.get("REQUEST_METHOD"),
                          environ.get("PATH_INFO"))
            reply = Reply.error("internal", f"{type(exc).__name__}: internal error (logged)")
        if failure is not None and failure[0] in REFUSALS:
            self.gate.refused(environ, session, f"{failure[0].upper()}: {failure[1]}",
                              _target(environ.get("PATH_INFO", "")))
        headers = [*reply.headers, *cookies, ("Content-Length", str(len(reply.body)))]
        start_response(f"{reply.status} {_REASONS.get(reply.status, '')}".rstrip(), headers)
        return [reply.body]

    def _route(self, environ: dict[str, Any], session: Session,
               cookies: list[tuple[str, str]]) -> Reply:
        path = environ.get("PATH_INFO", "") or "/"
        method = environ.get("REQUEST_METHOD", "GET")
        if path.startswith("/ui/api/"):
            return self._api(method, path.removeprefix("/ui/api"), environ, session)
        if path in ("/login", "/logout") and method == "POST":
            return self._account(path, environ, session, cookies)
        if method not in ("GET", "HEAD"):
            raise HttpError("method_not_allowed", f"{method} is not allowed on {path}")
        if path == "/health":
            return Reply(200, "text/plain; charset=utf-8", b"OK")
        if path.startswith("/static/"):
            return _static(path.removeprefix("/static/"))
        if path == "/login":
            return self._login_page(session) if self.gate.auth else _redirect("/")
        if self.gate.auth and not self.gate.logged_in(session):
            return _redirect("/login")
        # Unknown pages get the shell too, with a 404: its script draws a "not found" page.
        return self._page("index.html", session, status=200 if _PAGES.match(path) else 404)

    def _page(self, name: str, session: Session, error: str = "", status: int = 200) -> Reply:
        account = ""
        if self.gate.auth and self.gate.logged_in(session):
            account = (f'<form class="logout" method="post" action="/logout">'
                       f'<input type="hidden" name="csrf" value="{html.escape(session.csrf)}">'
                       f'<span>{html.escape(session.username)}</span> '
                       f'<button type="submit" class="button">Log out</button></form>')
        page = (_asset(name).decode().replace("{{REFRESH_MS}}", str(self.refresh_ms))
                .replace("{{API_TIMEOUT_MS}}", str(self.api_timeout_ms))
                .replace("{{CSRF}}", html.escape(session.csrf)).replace("{{ACCOUNT}}", account)
                .replace("{{ERROR}}", html.escape(error)))
        return Reply(status, _TYPES[".html"], page.encode())

    def _login_page(self, session: Session, error: str = "", status: int = 200) -> Reply:
        return self._page("login.html", session, error, status)

    def _account(self, path: str, environ: dict[str, Any], session: Session,
                 cookies: list[tuple[str, str]]) -> Reply:
        if path == "/logout":
            fresh = self.gate.logout(environ, session)
            cookies[:] = [self.gate.cookie(fresh)]
            return _redirect("/login" if self.gate.auth else "/")
        if not self.gate.auth:
            return _redirect("/")
        try:
            fresh = self.gate.login(environ, session)
        except (Unauthenticated, InvalidArgument) as exc:
            raise HttpError(exc.kind, exc.message,
                            self._login_page(session, exc.message, 401)) from None
        cookies[:] = [self.gate.cookie(fresh)]
        return _redirect("/")

    def _api(self, method: str, path: str, environ: dict[str, Any], session: Session) -> Reply:
        routes = self._routes.get(method)
        found = _match(routes, path) if routes is not None else None
        if found is None:
            allowed = [m for m, table in self._routes.items() if _match(table, path) is not None]
            if allowed:
                raise HttpError("method_not_allowed", f"use {' or '.join(allowed)} for /ui/api{path}")
            raise HttpError("not_found", f"no API route /ui/api{path}")
        handler, params = found
        query = dict(parse_qsl(environ.get("QUERY_STRING", ""), keep_blank_values=True))
        body: dict[str, Any] = {}
        if method == "POST":
            body = _json_body(environ)
            self.gate.check_post(environ, session)
        client = self.gate.client_for(session)
        reads = Reads(client, self.forecast_wall_secs)
        return Reply.json(200, handler(reads, Actions(client), params, query, body))


def _target(path: str) -> str:
    """What a UI path names, for the audit log ("job <id>", "host <name>", ...)."""
    for pattern in _TARGETS:
        m = pattern.search(path)
        if m is None:
            continue
        found = {k: unquote(v)[:200] for k, v in m.groupdict().items() if v}
        if "job" in found:
            instance = found.get("instance")
            return f"job {found['job']}" + (f", instance {instance}" if instance else "")
        return f"host {found['host']}" if "host" in found else "pools"
    return ""


def _redirect(location: str) -> Reply:
    reply = Reply(303, "text/plain; charset=utf-8", f"see {location}\n".encode())
    reply.headers.append(("Location", location))
    return reply


def _instance(params: dict[str, str]) -> int:
    value = int(params["instance"])  # the route admits digits only
    if value >= 2**31:
        raise InvalidArgument(f"instance: {value} is not an instance id", field="instance")
    return value


def _compile(table: list[tuple[str, Handler]]) -> list[tuple[re.Pattern[str], Handler]]:
    return [(re.compile(f"^{pattern}/?$"), handler) for pattern, handler in table]


def _match(table: list[tuple[re.Pattern[str], Handler]],
           path: str) -> tuple[Handler, dict[str, str]] | None:
    for pattern, handler in table:
        m = pattern.match(path)
        if m:
            return handler, {k: unquote(v) for k, v in m.groupdict().items()}
    return None


def _json_body(environ: dict[str, Any]) -> dict[str, Any]:
    """The POST body as a JSON object, after the same-origin checks of the module docstring."""
    content_type = (environ.get("CONTENT_TYPE") or "").split(";")[0].strip().lower()
    if content_type != "application/json":
        raise HttpError("unsupported_media_type", "actions take Content-Type: application/json")
    origin, host = environ.get("HTTP_ORIGIN", ""), environ.get("HTTP_HOST", "")
    if origin and urlsplit(origin).netloc != host:
        raise HttpError("permission_denied", f"cross-origin request from {origin} refused")
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        raise HttpError("invalid_argument", "bad Content-Length") from None
    if length > MAX_BODY:
        raise HttpError("payload_too_large", f"request body over {MAX_BODY} bytes")
    raw = environ["wsgi.input"].read(length) if length > 0 else b""
    try:
        body = json.loads(raw or b"{}")
    except ValueError as exc:
        raise InvalidArgument(f"request body is not JSON: {exc}", field="body") from None
    if not isinstance(body, dict):
        raise InvalidArgument("request body must be a JSON object", field="body")
    return body


def _asset(name: str) -> bytes:
    return resources.files("ui").joinpath("static", name).read_bytes()


def _static(name: str) -> Reply:
    """A file under ui/static; names are plain `[a-z0-9_-]` segments, so no `..`."""
    if not re.fullmatch(r"(?:[\w-]+/)*[\w-]+\.\w+", name) or "." + name.rsplit(".", 1)[-1] not in _TYPES:
        raise HttpError("not_found", f"no static file {name!r}")
    try:
        data = _asset(name)
    except (FileNotFoundError, IsADirectoryError):
        raise HttpError("not_found", f"no static file {name!r}") from None
    return Reply(200, _TYPES["." + name.rsplit(".", 1)[-1]], data, cache="no-cache")
