"""gRPC credentials from a process's TLS files (peloton/common/tls.py), and the peer's name.

Servers: `server_credentials` (client certificates required when a CA is
given).  Clients: `open_channel` makes a TLS channel when TLS files are
given, else a plaintext one, so every client in the repo opens channels the
same way.  `peer_certificate_name` reads the verified client certificate's
common name from a call's auth context (the caller's user name under mutual
TLS).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import grpc

from peloton.common.tls import TlsFiles


def server_credentials(tls: TlsFiles) -> grpc.ServerCredentials:
    """TLS for a server; mutual TLS when the files name a CA."""
    cert, key, ca = tls.read()
    return grpc.ssl_server_credentials([(key, cert)], root_certificates=ca,
                                       require_client_auth=ca is not None)


def channel_credentials(tls: TlsFiles) -> grpc.ChannelCredentials:
    """TLS for a client: verify the server against the CA, present our certificate."""
    cert, key, ca = tls.read()
    return grpc.ssl_channel_credentials(root_certificates=ca, private_key=key,
                                        certificate_chain=cert)


def open_channel(address: str, tls: TlsFiles | None,
                 options: Sequence[tuple[str, Any]] = ()) -> grpc.Channel:
    """A channel to `address`: TLS with `tls`, plaintext without."""
    if tls is None:
        return grpc.insecure_channel(address, options=list(options))
    return grpc.secure_channel(address, channel_credentials(tls), options=list(options))


def peer_certificate_name(context: grpc.ServicerContext) -> str:
    """The common name of the caller's verified client certificate, or ""."""
    try:
        auth = context.auth_context()
    except Exception:  # not every context (tests' fakes) has one
        return ""
    values = auth.get("x509_common_name") or []
    return values[0].decode("utf-8", "replace") if values else ""
