"""Mutual TLS on every server of `peloton up` (certificates the test makes), and the CLI's
login: `peloton login` keeps a token (mode 0600) that later commands send."""

from __future__ import annotations

import ssl
import stat
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from peloton.api.client import PelotonClient
from peloton.common.tls import TlsFiles
from peloton.core.errors import PelotonError
from tests.harness.cluster import UpCluster, eventually
from tests.harness.procs import PELOTON
from tests.security.conftest import PASSWORDS, SecureCluster, write_users

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_certs(base: Path) -> dict[str, TlsFiles]:
    """A CA, a server certificate for 127.0.0.1 / localhost, and client certificates named
    `admin` and `stranger` (the latter signed by another CA)."""
    for ca in ("ca", "other-ca"):
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
                f"/CN={ca}", "-keyout", f"{ca}.key", "-out", f"{ca}.pem", cwd=base)
    ext = base / "san.ext"
    ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    out = {}
    for name, ca in (("server", "ca"), ("admin", "ca"), ("stranger", "other-ca")):
        cn = "localhost" if name == "server" else name
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={cn}", "-keyout",
                f"{name}.key", "-out", f"{name}.csr", cwd=base)
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
                "-CAcreateserial", "-days", "2", "-extfile", str(ext), "-out", f"{name}.pem",
                cwd=base)
        out[name] = TlsFiles(base / f"{name}.pem", base / f"{name}.key", base / "ca.pem")
    return out


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[UpCluster, dict[str, TlsFiles]]]:
    base = tmp_path_factory.mktemp("tls")
    certs = make_certs(base)
    server = certs["server"]
    users = write_users(base)
    cluster = UpCluster(base, agents=1, extra=[
        "--auth", str(users), "--tls-cert", str(server.cert), "--tls-key", str(server.key),
        "--tls-ca", str(server.ca)]).start()
    try:
        yield cluster, certs
    finally:
        cluster.close()


def test_every_server_speaks_mutual_tls_and_a_certificate_names_the_caller(
        tls_cluster: tuple[UpCluster, dict[str, TlsFiles]]) -> None:
    up, certs = tls_cluster
    address = f"127.0.0.1:{up.jobmgr_port}"
    admin = PelotonClient(address, f"127.0.0.1:{up.resmgr_port}", f"127.0.0.1:{up.hostmgr_port}",
                          tls=certs["admin"], timeout=10)
    who = admin.whoami()
    assert (who.username, who.method) == ("admin", "certificate")
    # The cluster works over TLS end to end: its agent registered and runs tasks.
    eventually(lambda: len(admin.query_hosts().host_infos) == 1, 30, "the agent over mTLS")
    for stranger in (PelotonClient(address, timeout=5),  # plaintext
                     PelotonClient(address, tls=certs["stranger"], timeout=5)):  # foreign CA
        with pytest.raises(PelotonError):
            stranger.whoami()
    context = certs["admin"].client_context()
    with urllib.request.urlopen(f"https://127.0.0.1:{up.aurora_port}/health", context=context,
                                timeout=10) as reply:
        assert reply.read() == b"OK"
    anonymous = ssl.create_default_context(cafile=str(certs["admin"].ca))
    for port in (up.aurora_port, up.ui_port):
        with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError)):
            urllib.request.urlopen(f"https://127.0.0.1:{port}/health", context=anonymous, timeout=10)
    with pytest.raises((urllib.error.URLError, ConnectionError)):
        urllib.request.urlopen(f"http://127.0.0.1:{up.ui_port}/health", timeout=10)
    admin.close()


def test_cli_login_keeps_a_private_token_that_later_commands_use(
        secure: SecureCluster, tmp_path: Path) -> None:
    up = secure.up
    env = {"PELOTON_TOKEN_FILE": str(tmp_path / "tokens.yaml"), "PATH": "/usr/bin:/bin"}
    flags = ["-m", f"127.0.0.1:{up.jobmgr_port}", "-v", f"127.0.0.1:{up.resmgr_port}",
             "-u", f"127.0.0.1:{up.hostmgr_port}"]

    def run(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return subprocess.run([PELOTON, *flags, *args], input=stdin, capture_output=True, text=True,
                              env=env, timeout=60)

    before = run("auth", "whoami")
    assert before.returncode == 0 and "(default user)" in before.stdout
    bad = run("login", "-U", "alice", "--password-stdin", stdin="wrong\n")
    assert bad.returncode == 13, bad.stderr  # not authenticated
    ok = run("login", "-U", "alice", "--password-stdin", stdin=PASSWORDS["alice"] + "\n")
    assert ok.returncode == 0 and "logged in" in ok.stdout, ok.stderr
    token_file = tmp_path / "tokens.yaml"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    after = run("auth", "whoami")
    assert "alice (role dev, by token)" in after.stdout, after.stdout + after.stderr
    denied = run("respool", "create", "/x", "/dev/null")
    assert denied.returncode != 0
    hashed = subprocess.run([PELOTON, "auth", "hash-password", "--stdin"], input="s3cret\n",
                            capture_output=True, text=True, timeout=60)
    assert hashed.returncode == 0 and hashed.stdout.startswith("scrypt$")
    logout = run("logout")
    assert logout.returncode == 0 and "(default user)" in run("auth", "whoami").stdout
