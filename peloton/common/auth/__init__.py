"""Authentication and authorization shared by every front (gRPC, Aurora HTTP, web UI, CLI).

* `passwords` — salted scrypt hashes, constant-time checks, a cache of recent successes;
* `policy` — Peloton's accept/reject rules (plus Aurora's role part), roles with pool,
  owner and task-user scopes, the `Principal`;
* `config` — the users file (Peloton's BASIC YAML shape, hashed passwords);
* `tokens` — signed login tokens for the CLI and the UI;
* `authenticator` — the pluggable `Authenticator` and its implementations;
* `audit` — the audit log of mutating calls.

`Security` bundles what one process needs; `build_security` makes it from the
command line's `--auth FILE` (and `--tls-*`).  Each front maps refusals once:
gRPC UNAUTHENTICATED / PERMISSION_DENIED, Aurora AUTH_FAILED, HTTP 401 / 403.
"""

from __future__ import annotations

import ipaddress
import secrets
import socket
from dataclasses import dataclass, field
from pathlib import Path

from peloton.common.auth import config as auth_config
from peloton.common.auth.audit import AuditLog
from peloton.common.auth.authenticator import (
    Authenticator,
    Credentials,
    OpenAuthenticator,
    UsersAuthenticator,
    internal_credentials,
    new_internal_user,
)
from peloton.common.auth.policy import Principal
from peloton.common.auth.tokens import TokenSigner, load_or_create_key
from peloton.common.clock import SYSTEM_CLOCK, Clock
from peloton.common.tls import TlsFiles
from peloton.core.errors import InvalidArgument

__all__ = ["AuditLog", "Authenticator", "Credentials", "Principal", "Security", "build_security",
           "check_bind", "is_loopback"]


@dataclass(frozen=True)
class Security:
    """How one process authenticates callers, records what they do, and calls its peers."""

    authenticator: Authenticator = field(default_factory=OpenAuthenticator)
    audit: AuditLog = field(default_factory=AuditLog)
    tls: TlsFiles | None = None
    #: Metadata of this process's own calls to other daemons (the internal user); empty
    #: when authentication is off.
    internal: tuple[tuple[str, str], ...] = ()

    @property
    def enabled(self) -> bool:
        """Whether callers must authenticate (else everyone may do everything)."""
        return self.authenticator.enabled

    def close(self) -> None:
        """Close the audit log."""
        self.audit.close()


def build_security(auth_file: str | Path | None, tls: TlsFiles | None = None, *,
                   data_dir: Path | None = None, embedded: bool = False,
                   clock: Clock = SYSTEM_CLOCK) -> Security:
    """The Security of a process started with `--auth auth_file` (None: authentication off).

    The token key and the audit log default to files in `data_dir`.  Daemons call
    each other as the file's internal user, whose password is read from
    `internal_password_file`; in the embedded mode (`embedded`, all daemons in one
    process) a process-local internal user is made when the file has none.
    """
    if not auth_file:
        return Security(tls=tls)
    conf = auth_config.load(auth_file)
    key_file = conf.token_key_file or (data_dir / "token.key" if data_dir else None)
    # Without a key file the process accepts only the tokens it issued itself.
    key = load_or_create_key(key_file) if key_file is not None else secrets.token_bytes(32)
    signer = TokenSigner(key, ttl_secs=conf.token_ttl_secs, clock=clock)
    password = conf.internal_password()
    extra: tuple[str, str] | None = None
    if password is not None:
        name = conf.internal_user
        if not name:
            raise InvalidArgument(f"{auth_file}: internal_password_file needs internal_user",
                                  field="internal_user")
    elif embedded:
        extra = new_internal_user()
        name, password = extra
    else:
        name = ""
    authenticator = UsersAuthenticator(conf, signer, internal=extra, clock=clock)
    if password is not None:
        # Fail at start, not on the first call, when the password does not match the file.
        authenticator.authenticate(Credentials(name, password))
    audit_path = conf.audit_log or (data_dir / "audit.log" if data_dir else None)
    internal = tuple(internal_credentials(name, password).items()) if password else ()
    return Security(authenticator, AuditLog(audit_path, clock=clock), tls, internal)


def is_loopback(host: str) -> bool:
    """Whether binding `host` serves this machine only (127.0.0.0/8, ::1, localhost)."""
    if host in ("localhost", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        try:
            return all(ipaddress.ip_address(info[4][0]).is_loopback
                       for info in socket.getaddrinfo(host, None))
        except (OSError, ValueError):
            return False


def check_bind(host: str, security: Security, *, insecure: bool, what: str) -> None:
    """Refuse to serve other machines without authentication, unless `insecure`."""
    if security.enabled or insecure or is_loopback(host):
        return
    raise InvalidArgument(
        f"{what} would listen on {host}, reachable from other machines, with authentication "
        "off: anyone there could run commands as the agents' users. Start it with --auth FILE "
        "(see README, Security), bind 127.0.0.1, or pass --insecure to accept the risk",
        field="host")
