"""What every UI request passes before its route: the Host allowlist, the session, CSRF, login.

* **Host allowlist** (DNS rebinding): a request whose `Host` header names
  anything but this server (its bind address, `localhost`, 127.0.0.1, [::1],
  this machine's names when bound to all addresses, and `--ui-allowed-host`
  names) is refused with 421 before anything else.  A page on another site
  whose name was re-pointed at 127.0.0.1 sends its own name as Host.
* **Session** (sessions.py): an HttpOnly, SameSite=Strict cookie (Secure
  under TLS) on every browser.
* **CSRF**: every POST must carry the session's token (`X-CSRF-Token`, or a
  `csrf` form field for the login form) and, when the browser sends an
  `Origin`, come from this very host; else 403.
* **Login** (authentication on): pages redirect to /login, the JSON API
  answers 401; /login trades a username and password for a Peloton login
  token through the cluster's AuthService (the UI knows no users itself);
  each request then calls Peloton with that session's token, so the cluster
  authorizes what the user may see and do, exactly as for the CLI.
* **Anonymous requests** (authentication on) are limited per client address
  (ratelimit.py): past its burst a client gets 429, before any session is made.
* **Refusals** (401, 403, a failed login) are written to the audit log with
  the user (or `anonymous`), the request and what it named (`refused`, called
  by the one place in http.py that maps errors to statuses).
"""

from __future__ import annotations

import hmac
import ipaddress
import socket
from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from peloton.api.client import PelotonClient
from peloton.common.auth.audit import ANONYMOUS, AuditLog
from peloton.common.clock import SYSTEM_CLOCK, Clock
from peloton.core.errors import (
    InvalidArgument,
    PermissionDenied,
    ResourceExhausted,
    Unauthenticated,
)
from ui.ratelimit import ClientLimiter
from ui.sessions import COOKIE, Session, Sessions

CSRF_HEADER = "HTTP_X_CSRF_TOKEN"
MAX_FORM = 8 * 1024


class MisdirectedHost(Exception):
    """The request's Host header does not name this server."""


def allowed_hosts(bind: str, port: int, extra: Iterable[str] = ()) -> frozenset[str]:
    """The `host[:port]` values a request's Host header may carry."""
    names = {bind, *extra}
    loopback = _loopback(bind)
    if loopback or bind in ("", "0.0.0.0", "::"):
        names |= {"localhost", "127.0.0.1", "[::1]", "::1"}
    if bind in ("", "0.0.0.0", "::"):
        names |= {socket.gethostname(), socket.getfqdn()}
    names.discard("")
    out = set()
    for name in names:
        host = f"[{name}]" if ":" in name and not name.startswith("[") else name
        out |= {host.lower(), f"{host}:{port}".lower()}
    return frozenset(out)


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


class UiGate:
    """The checks of the module docstring, for one UI server."""

    def __init__(self, client: PelotonClient, *, auth: bool, secure: bool,
                 hosts: frozenset[str], clock: Clock = SYSTEM_CLOCK,
                 audit: AuditLog | None = None, limiter: ClientLimiter | None = None) -> None:
        """`audit`: where refusals are written (default: the `peloton.audit` logger only)."""
        self.client = client
        self.auth = auth
        self.secure = secure
        self.hosts = hosts
        self.sessions = Sessions(clock)
        self.audit = audit or AuditLog(clock=clock)
        self.limiter = limiter or ClientLimiter(clock=clock)

    def check_host(self, environ: dict[str, Any]) -> None:
        """MisdirectedHost unless the Host header names this server."""
        host = (environ.get("HTTP_HOST") or "").strip().lower()
        if host not in self.hosts:
            raise MisdirectedHost(f"this server does not answer for host {host or '(none)'!r}")

    def session(self, environ: dict[str, Any]) -> tuple[Session, bool]:
        """The request's session, and whether it is new (its cookie must be set);
        ResourceExhausted when an anonymous client is over its rate (see ratelimit.py)."""
        found = self.sessions.get(_cookie(environ.get("HTTP_COOKIE", ""), COOKIE))
        if self.auth and not (found is not None and self.logged_in(found)):
            client = str(environ.get("REMOTE_ADDR") or "")
            if not self.limiter.allow(client):
                raise ResourceExhausted(f"too many requests without a login from {client}; "
                                        "wait a moment and try again")
        if found is not None:
            return found, False
        return self.sessions.new(), True

    def refused(self, environ: dict[str, Any], session: Session | None, result: str,
                target: str) -> None:
        """Write one refused request to the audit log (a no-op with authentication off)."""
        if not self.auth:
            return
        signed_in = session is not None and session.username and self.logged_in(session)
        what = f"{environ.get('REQUEST_METHOD', 'GET')} {environ.get('PATH_INFO', '') or '/'}"
        self.audit.record(who=session.username if session is not None and signed_in else ANONYMOUS,
                          how="session" if signed_in else "", front="ui", what=what[:300],
                          target=target, result=result)

    def cookie(self, session: Session) -> tuple[str, str]:
        """The Set-Cookie header carrying `session`."""
        flags = "; Path=/; HttpOnly; SameSite=Strict" + ("; Secure" if self.secure else "")
        return "Set-Cookie", f"{COOKIE}={session.sid}{flags}"

    def check_post(self, environ: dict[str, Any], session: Session, form_token: str = "") -> None:
        """PermissionDenied unless a POST carries the session's CSRF token from this origin."""
        origin, host = environ.get("HTTP_ORIGIN", ""), environ.get("HTTP_HOST", "")
        if origin and urlsplit(origin).netloc.lower() != host.lower():
            raise PermissionDenied(f"cross-origin request from {origin} refused")
        presented = environ.get(CSRF_HEADER, "") or form_token
        if not hmac.compare_digest(presented.encode(), session.csrf.encode()):
            raise PermissionDenied("missing or wrong CSRF token: reload the page and try again")

    def logged_in(self, session: Session) -> bool:
        """Whether `session` has a user logged in (whose token has not expired)."""
        return self.sessions.logged_in(session)

    def client_for(self, session: Session) -> PelotonClient:
        """The client a request of `session` calls Peloton with."""
        if not self.auth:
            return self.client
        if not self.logged_in(session):
            raise Unauthenticated("log in first (/login)")
        return self.client.with_headers({"authorization": f"Bearer {session.token}"})

    def login(self, environ: dict[str, Any], session: Session) -> Session:
        """Check the login form and trade its credentials for a token; the new session."""
        form = read_form(environ)
        self.check_post(environ, session, form.get("csrf", ""))
        username, password = form.get("username", ""), form.get("password", "")
        if not username or not password:
            raise InvalidArgument("enter a username and a password", field="username")
        reply = self.client.with_headers({"username": username, "password": password}).login()
        return self.sessions.login(session, reply.username, reply.token, reply.expires)

    def logout(self, environ: dict[str, Any], session: Session) -> Session:
        """End `session` (CSRF-checked); a fresh anonymous one."""
        form = read_form(environ)
        self.check_post(environ, session, form.get("csrf", ""))
        self.sessions.drop(session.sid)
        return self.sessions.new()


def read_form(environ: dict[str, Any]) -> dict[str, str]:
    """An `application/x-www-form-urlencoded` POST body as a dict (bounded)."""
    content_type = (environ.get("CONTENT_TYPE") or "").split(";")[0].strip().lower()
    if content_type != "application/x-www-form-urlencoded":
        return {}
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        raise InvalidArgument("bad Content-Length", field="body") from None
    if not 0 <= length <= MAX_FORM:
        raise InvalidArgument(f"form over {MAX_FORM} bytes", field="body")
    raw = environ["wsgi.input"].read(length) if length else b""
    return dict(parse_qsl(raw.decode("utf-8", "replace"), keep_blank_values=True))


def _cookie(header: str, name: str) -> str:
    for part in header.split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value
    return ""
