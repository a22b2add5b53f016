"""Real gRPC servers for the member tests (test_forwarding.py, test_watch_fanin.py): each test
starts its servers, forwarders and channels through one `Served`, and the test's fixture
closes them all, newest first, whatever the test did.  Also the test users and TLS
certificates of the tests that forward under authentication."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar

import grpc

from peloton.api.grpc_server import GrpcServer
from peloton.api.service_registry import Forwarder, register
from peloton.api.tls_grpc import open_channel
from peloton.common.auth import Security, passwords
from peloton.common.auth import config as auth_config
from peloton.common.auth.audit import AuditLog
from peloton.common.auth.authenticator import UsersAuthenticator, internal_credentials
from peloton.common.auth.tokens import TokenSigner
from peloton.common.tls import TlsFiles
from peloton.jobmgr.servicers.forwarding import MemberForwarder

JOBS = "peloton.api.v1alpha.job.stateless.svc.JobService"
WATCH = "peloton.api.v1alpha.watch.svc.WatchService"
#: Passwords of the test users (the internal user is `peloton`).
PASSWORDS = {"alice": "alice-pw", "bob": "bob-pw", "peloton": "internal-pw"}
INTERNAL = tuple(internal_credentials("peloton", PASSWORDS["peloton"]).items())


class Closeable(Protocol):
    def close(self) -> Any: ...


C = TypeVar("C", bound=Closeable)


class Served:
    """What one test started; `close()` stops it all."""

    def __init__(self) -> None:
        self._closers: list[Callable[[], Any]] = []

    def server(self, add: Callable[[Any, Any], None], servicer: Any, *,
               forward: Forwarder | None = None, security: Security | None = None) -> GrpcServer:
        """`servicer` (added by its generated `add_*_to_server`) served on a free port."""
        server = GrpcServer("127.0.0.1:0", security=security)
        register(server, add, servicer, forward=forward)
        server.start()
        self._closers.append(lambda: server.stop(0))
        return server

    def forwarder(self, *args: Any, **kwargs: Any) -> MemberForwarder:
        """A MemberForwarder (its channels closed at the end)."""
        return self.closing(MemberForwarder(*args, **kwargs))

    def channel(self, where: GrpcServer | str, tls: TlsFiles | None = None) -> grpc.Channel:
        """A channel to a server (or an address), TLS with `tls`."""
        address = where if isinstance(where, str) else f"127.0.0.1:{where.port}"
        return self.closing(open_channel(address, tls))

    def closing(self, thing: C) -> C:
        """`thing`, whose `close()` is called at the end."""
        self._closers.append(thing.close)
        return thing

    def close(self) -> None:
        while self._closers:
            self._closers.pop()()


# -- authentication -------------------------------------------------------------------------------
def users() -> auth_config.AuthConfig:
    """alice (role dev: every JobService and WatchService method), bob (reader: GetJob only,
    and every WatchService method), admin (root) and the internal user `peloton` (root),
    each with a password and a client certificate; no default user."""
    def user(name: str, role: str) -> dict[str, Any]:
        return {"username": name, "role": role, "certificate": True,
                "password_hash": passwords.hash_password(PASSWORDS.get(name, "x"), log_n=10)}

    return auth_config.parse({
        "users": [user("alice", "dev"), user("bob", "reader"), user("admin", "root"),
                  user("peloton", "root")],
        "roles": [{"role": "dev", "accept": [f"{JOBS}:*", f"{WATCH}:*"], "owners": ["*"]},
                  {"role": "reader", "accept": [f"{JOBS}:GetJob", f"{WATCH}:*"]},
                  {"role": "root", "accept": ["*"]}],
        "internal_user": "peloton",
    })


def security(tls: TlsFiles | None = None, *, internal: bool = True) -> Security:
    """A member's Security over `users()`: with `internal`, it calls its peers as the
    internal user (the users file's internal_password_file); under TLS its certificate."""
    authenticator = UsersAuthenticator(users(), TokenSigner(b"t" * 32))
    return Security(authenticator, AuditLog(), tls, INTERNAL if internal else ())


def basic(user: str) -> tuple[tuple[str, str], ...]:
    """Peloton's BASIC metadata of a test user."""
    return tuple(internal_credentials(user, PASSWORDS[user]).items())


def make_certs(base: Path, *names: str) -> dict[str, TlsFiles]:
    """A CA and, per name, a certificate with that common name signed by it, valid for
    127.0.0.1 (each may serve and call: daemons use one certificate for both)."""
    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=base, check=True, capture_output=True)

    def key(name: str) -> None:
        openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", f"{name}.key")

    key("ca")
    openssl("req", "-x509", "-new", "-key", "ca.key", "-days", "2", "-subj", "/CN=test-ca",
            "-out", "ca.pem")
    (base / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    out = {}
    for name in names:
        key(name)
        openssl("req", "-new", "-key", f"{name}.key", "-subj", f"/CN={name}", "-out",
                f"{name}.csr")
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                "-CAcreateserial", "-days", "2", "-extfile", "san.ext", "-out", f"{name}.pem")
        out[name] = TlsFiles(base / f"{name}.pem", base / f"{name}.key", base / "ca.pem")
    return out
