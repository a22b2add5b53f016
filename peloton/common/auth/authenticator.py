"""Authentication: from what a caller presents to a `Principal`, one pluggable `Authenticator`.

Every front turns what arrives into `Credentials` and asks the same
Authenticator: gRPC metadata `username`/`password` (Peloton's BASIC scheme,
as its CLI and daemons send them) or `authorization: Bearer <token>`;
HTTP Basic on the Aurora endpoint (gorealis' BasicAuth, the Aurora client's
netrc); the web UI's session token; and, with mutual TLS, the client
certificate's common name.  Presented credentials win over a certificate;
with neither, the caller is the default user if the file has one.

* `OpenAuthenticator`: authentication off (the embedded one-machine mode on
  loopback): everyone is one all-powerful principal.
* `UsersAuthenticator`: the users file (config.py), login tokens (tokens.py)
  and the internal user daemons call each other as.

Failures raise `Unauthenticated` with one message for every wrong
combination, so a caller cannot tell an unknown user from a wrong password;
unknown users cost as much time as known ones.

**Calls relayed for a caller.**  A job manager member forwards a call about
another member's job to its owner, and opens a client's Watch on other members
(peloton/jobmgr/servicers/forwarding.py, watch_fanin.py).  Under mutual TLS the
owner's transport sees the *member's* certificate, not the caller's, so what
the caller presented cannot simply be passed on.  Instead the relaying member
presents its own identity (the internal user's credentials, and under TLS its
certificate) and names the caller it authenticated in `peloton-caller`
(`relayed_metadata`).  The receiving side honours that entry only when what
was presented authenticates as an *internal* principal: then the caller is the
named user, with that user's own role from this process's users file (so a
relayed call never has more rights than its caller), and `method` "forwarded".
From anyone else the entry is ignored: the caller is who its own credentials
say, so a client that sends it itself gains nothing.  Without the entry the
caller is the peer itself.  A named user this file does not know is refused,
as an unknown certificate is.
"""

from __future__ import annotations

import base64
import hmac
import logging
import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol
from urllib.parse import quote, unquote

from peloton.common.auth.config import AuthConfig
from peloton.common.auth.passwords import VerifiedCache
from peloton.common.auth.policy import MATCH_ALL, OPEN_ROLE, Principal, Role, Rule
from peloton.common.auth.tokens import TokenSigner
from peloton.common.clock import SYSTEM_CLOCK, Clock
from peloton.core.errors import FailedPrecondition, Unauthenticated

log = logging.getLogger(__name__)

#: gRPC metadata keys of Peloton's BASIC scheme, and of tokens.
USERNAME_KEY, PASSWORD_KEY, AUTHORIZATION_KEY = "username", "password", "authorization"
#: gRPC metadata naming the caller of a call an internal peer relays (percent-encoded user
#: name; "" is the default user).  See the module docstring.
CALLER_KEY = "peloton-caller"
_BAD = "invalid username/password combination"
#: The role given to the process's own internal user when the file names none.
ROOT_ROLE = Role("peloton-internal", accept=(Rule((MATCH_ALL,)),))


@dataclass(frozen=True, slots=True)
class Credentials:
    """What one caller presented (empty strings where it presented nothing)."""

    username: str = ""
    password: str = ""
    token: str = ""
    certificate_name: str = ""
    #: The user a relaying peer names as its caller (`CALLER_KEY`); None: none named.
    #: Honoured only if the rest of these credentials are an internal principal's.
    on_behalf_of: str | None = None

    @staticmethod
    def from_metadata(metadata: Iterable[tuple[str, str | bytes]],
                      certificate_name: str = "") -> Credentials:
        """From gRPC metadata (Peloton's `username`/`password`, or `authorization`, and a
        relaying peer's `peloton-caller`)."""
        found: dict[str, str] = {}
        for key, value in metadata:
            if key in (USERNAME_KEY, PASSWORD_KEY, AUTHORIZATION_KEY, CALLER_KEY) \
                    and key not in found:
                found[key] = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
        named = found.get(CALLER_KEY)
        creds = Credentials(found.get(USERNAME_KEY, ""), found.get(PASSWORD_KEY, ""),
                            certificate_name=certificate_name,
                            on_behalf_of=None if named is None else unquote(named))
        return creds.with_authorization(found.get(AUTHORIZATION_KEY, ""))

    def with_authorization(self, header: str) -> Credentials:
        """Add an HTTP-style `Authorization` value: `Bearer <token>` or `Basic <base64>`."""
        scheme, _, value = header.strip().partition(" ")
        scheme = scheme.lower()
        if scheme == "bearer" and value.strip():
            return replace(self, token=value.strip())
        if scheme == "basic" and value.strip():
            try:
                user, sep, password = base64.b64decode(value.strip(), validate=True).decode(
                    "utf-8").partition(":")
            except (ValueError, UnicodeDecodeError):
                raise Unauthenticated("malformed Basic authorization header") from None
            if not sep:
                raise Unauthenticated("malformed Basic authorization header")
            return replace(self, username=user, password=password)
        if header.strip():
            raise Unauthenticated("unsupported authorization scheme (use Basic or Bearer)")
        return self

    @property
    def presented(self) -> bool:
        """Whether any password or token was presented."""
        return bool(self.username or self.password or self.token)


class Authenticator(Protocol):
    """Turns credentials into a principal; one implementation per scheme."""

    #: False when authentication is off (every caller may do everything).
    enabled: bool

    def authenticate(self, credentials: Credentials) -> Principal:
        """The caller; Unauthenticated when the credentials are wrong (or required and absent)."""
        ...

    def login(self, credentials: Credentials, ttl_secs: float = 0.0) -> tuple[Principal, str, float]:
        """(principal, token, expiry) for a caller that proved itself with a password or
        certificate; the token lives `ttl_secs` (0, or more than allowed: the maximum)."""
        ...


class OpenAuthenticator:
    """Authentication off: every caller is the same all-powerful principal."""

    enabled = False

    def authenticate(self, credentials: Credentials) -> Principal:
        """Everyone is let in (credentials, if any, are ignored)."""
        return Principal(credentials.username, OPEN_ROLE, "open")

    def login(self, credentials: Credentials, ttl_secs: float = 0.0) -> tuple[Principal, str, float]:
        """No tokens without authentication."""
        raise FailedPrecondition("authentication is off on this cluster: no login is needed")


class UsersAuthenticator:
    """The users file, login tokens and the internal user (see the module docstring)."""

    enabled = True

    def __init__(self, config: AuthConfig, signer: TokenSigner, *,
                 internal: tuple[str, str] | None = None,
                 cache: VerifiedCache | None = None, clock: Clock = SYSTEM_CLOCK) -> None:
        """`internal` is (name, password) of an internal user known only to this process
        (`peloton up` makes one when the file names none); it has a root role."""
        self.config = config
        self.signer = signer
        self._cache = cache or VerifiedCache(clock=clock)
        self._internal = internal
        self._users = {u.username: u for u in config.users}

    @property
    def internal_user(self) -> str:
        """The name daemons call each other as."""
        return self._internal[0] if self._internal else self.config.internal_user

    def authenticate(self, credentials: Credentials) -> Principal:
        """See the module docstring for the order in which credentials are tried, and for
        a caller named by a relaying internal peer."""
        peer = self._peer(credentials)
        if credentials.on_behalf_of is None or not peer.internal:
            return peer
        named = credentials.on_behalf_of
        if not named:
            return self._default()
        return self._principal(named, "forwarded")

    def _peer(self, credentials: Credentials) -> Principal:
        """Who presented `credentials` (not whom it names)."""
        if credentials.token:
            claims = self.signer.verify(credentials.token)
            return self._principal(claims.user, "token")
        if credentials.username or credentials.password:
            return self._password(credentials.username, credentials.password)
        if credentials.certificate_name:
            return self._principal(credentials.certificate_name, "certificate")
        return self._default()

    def _default(self) -> Principal:
        default = self._users.get("")
        if default is None:
            raise Unauthenticated("authentication required: send username and password, a "
                                  "token (`peloton login`), or a client certificate")
        return Principal("", self.config.roles[default.role], "default")

    def login(self, credentials: Credentials, ttl_secs: float = 0.0) -> tuple[Principal, str, float]:
        """A token for a caller authenticated by password or certificate (not by a token,
        not as the default user)."""
        if credentials.token or not (credentials.presented or credentials.certificate_name):
            raise Unauthenticated("log in with a username and password (or a client certificate)")
        # A token is issued to whoever proved itself, never to a user a peer names.
        principal = self._peer(credentials)
        ttl = min(ttl_secs, self.signer.ttl_secs) if ttl_secs > 0 else self.signer.ttl_secs
        token = self.signer.issue(principal.name, ttl)
        return principal, token, self.signer.verify(token).expires

    def _password(self, username: str, password: str) -> Principal:
        if not username or not password:
            raise Unauthenticated(_BAD)
        if self._internal is not None and username == self._internal[0]:
            if hmac.compare_digest(password.encode(), self._internal[1].encode()):
                return Principal(username, ROOT_ROLE, "password", internal=True)
            raise Unauthenticated(_BAD)
        entry = self._users.get(username)
        if entry is None or not entry.password_hash:
            self._cache.burn(password)
            raise Unauthenticated(_BAD)
        if not self._cache.check(username, password, entry.password_hash):
            raise Unauthenticated(_BAD)
        return self._principal(username, "password")

    def _principal(self, name: str, method: str) -> Principal:
        if self._internal is not None and name == self._internal[0]:
            return Principal(name, ROOT_ROLE, method, internal=True)
        entry = self._users.get(name) if name else None
        if entry is None:
            raise Unauthenticated(f"unknown user {name!r}" if method in ("certificate", "forwarded")
                                  else _BAD)
        return Principal(name, self.config.roles[entry.role], method,
                         internal=bool(name) and name == self.config.internal_user)


def internal_credentials(name: str, password: str) -> Mapping[str, str]:
    """The metadata daemons send as the internal user (Peloton's BASIC headers)."""
    return {USERNAME_KEY: name, PASSWORD_KEY: password}


def relayed_metadata(metadata: Iterable[tuple[str, str | bytes]], caller: Principal | None,
                     identity: Sequence[tuple[str, str]]) -> list[tuple[str, str | bytes]]:
    """The metadata of a call this daemon relays to a peer for `caller` (see the module
    docstring): the caller's metadata without gRPC's own entries (`:...`, `grpc-...`,
    `user-agent`) and without any `peloton-caller` it sent itself.  With a caller and an
    `identity` to present (the internal user's credentials), the caller's credentials are
    replaced by `identity` and the caller is named; with a caller and no identity (under
    TLS the relaying daemon's certificate may be the internal one) its credentials are kept
    and it is named too.  Without a caller (authentication off here) nothing is added: the
    peer authenticates what the caller presented, as if it had called directly."""
    passed = [(k, v) for k, v in metadata
              if not k.startswith((":", "grpc-")) and k not in ("user-agent", CALLER_KEY)]
    if caller is None:
        return passed
    if identity:
        credentials = (USERNAME_KEY, PASSWORD_KEY, AUTHORIZATION_KEY)
        passed = [(k, v) for k, v in passed if k not in credentials]
        passed.extend(identity)
    passed.append((CALLER_KEY, quote(caller.name, safe="")))
    return passed


def new_internal_user() -> tuple[str, str]:
    """A process-local internal user: a fixed name, a random password."""
    return "peloton-internal", secrets.token_urlsafe(32)
