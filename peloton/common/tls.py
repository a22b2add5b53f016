"""TLS material of a process (`--tls-cert`, `--tls-key`, `--tls-ca`) and stdlib SSL contexts.

One certificate and key per process serve every server it runs (gRPC and
HTTP) and identify it as a client.  With a CA, servers require and verify
client certificates (mutual TLS) and clients verify servers against it; the
client certificate's common name is the caller's user name.  The gRPC side
builds its credentials from the same files (peloton/api/tls_grpc.py).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

from peloton.core.errors import InvalidArgument


@dataclass(frozen=True, slots=True)
class TlsFiles:
    """PEM files: this process's certificate chain and key, and the CA it trusts."""

    cert: Path
    key: Path
    ca: Path | None = None

    @staticmethod
    def from_options(cert: str, key: str, ca: str) -> TlsFiles | None:
        """From command-line values: None when none is given; all of cert and key, or nothing."""
        if not (cert or key or ca):
            return None
        if not (cert and key):
            raise InvalidArgument("--tls-cert and --tls-key go together (and --tls-ca "
                                  "turns on client certificates)", field="tls")
        files = TlsFiles(Path(cert), Path(key), Path(ca) if ca else None)
        for path in (files.cert, files.key, files.ca):
            if path is not None and not path.is_file():
                raise InvalidArgument(f"TLS file {path} does not exist", field="tls")
        return files

    def read(self) -> tuple[bytes, bytes, bytes | None]:
        """(certificate chain, key, CA) as bytes."""
        return (self.cert.read_bytes(), self.key.read_bytes(),
                self.ca.read_bytes() if self.ca is not None else None)

    def server_context(self) -> ssl.SSLContext:
        """For an HTTPS server; requires client certificates when a CA is given."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(str(self.cert), str(self.key))
        if self.ca is not None:
            ctx.load_verify_locations(str(self.ca))
            ctx.verify_mode = ssl.CERT_REQUIRED
        return ctx

    def client_context(self) -> ssl.SSLContext:
        """For an HTTPS client: verifies the server against the CA, presents our certificate."""
        ctx = ssl.create_default_context(cafile=str(self.ca) if self.ca is not None else None)
        ctx.load_cert_chain(str(self.cert), str(self.key))
        return ctx
