"""pelotonpy.auth.AuthService: log in for a token, ask who you are (see proto/pelotonpy/auth)."""

from __future__ import annotations

from typing import Any

from peloton.api.auth_grpc import current_principal
from peloton.api.gen.pelotonpy.auth import auth_pb2 as pb
from peloton.api.gen.pelotonpy.auth import auth_pb2_grpc as pb_grpc
from peloton.api.grpc_server import ServiceHost
from peloton.api.service_registry import register
from peloton.api.tls_grpc import peer_certificate_name
from peloton.common.auth import Credentials, Security

SERVICE_NAME = "pelotonpy.auth.AuthService"


class AuthServicer(pb_grpc.AuthServiceServicer):  # type: ignore[misc]
    """Serves logins with the process's authenticator."""

    def __init__(self, security: Security) -> None:
        self.security = security

    def Login(self, request: pb.LoginRequest, context: Any) -> pb.LoginResponse:
        """A token for the caller's password (or client certificate)."""
        creds = Credentials.from_metadata(context.invocation_metadata() or (),
                                          peer_certificate_name(context))
        principal, token, expires = self.security.authenticator.login(creds, request.ttl_secs)
        self.security.audit.record(who=principal.display, how=principal.method, front="grpc",
                                   what=f"{SERVICE_NAME}/Login", result="OK")
        return pb.LoginResponse(token=token, username=principal.name, role=principal.role.name,
                                expires=expires)

    def WhoAmI(self, request: pb.WhoAmIRequest, context: Any) -> pb.WhoAmIResponse:
        """The caller as the server sees it."""
        principal = current_principal()
        if principal is None:  # authentication off: the interceptor let it through unchecked
            return pb.WhoAmIResponse(method="open", auth_enabled=False, role="open")
        return pb.WhoAmIResponse(username=principal.name, role=principal.role.name,
                                 method=principal.method, auth_enabled=True)


def serve_auth(server: ServiceHost, security: Security) -> None:
    """Serve AuthService on `server`."""
    register(server, pb_grpc.add_AuthServiceServicer_to_server, AuthServicer(security))
