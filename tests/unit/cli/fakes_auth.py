"""A fake of our AuthService (pelotonpy.auth) for the CLI's login, logout and whoami.

One password ("right") is accepted for any user; the token it hands out is
`tok-<user>`, and WhoAmI reads the caller from the Bearer token it is sent
(no token: authentication off, as a cluster without --auth answers).
"""

from __future__ import annotations

import grpc

from peloton.api.gen.pelotonpy.auth import auth_pb2, auth_pb2_grpc
from peloton.core.errors import Unauthenticated
from tests.unit.cli.fakes import World

PASSWORD = "right"
#: 2100-01-01T00:00:00Z: tokens of the fake do not expire during a test.
EXPIRES = 4102444800.0


class FakeAuthService(auth_pb2_grpc.AuthServiceServicer):  # type: ignore[misc]  # grpc is untyped
    """Login and WhoAmI over the scripted world (requests recorded in `world.calls`)."""

    def __init__(self, world: World) -> None:
        self.world = world

    def Login(self, request: auth_pb2.LoginRequest,
              context: grpc.ServicerContext) -> auth_pb2.LoginResponse:
        self.world.record("AuthService.Login", request, context)
        metadata = dict(context.invocation_metadata())
        user = str(metadata.get("username", ""))
        if not user or metadata.get("password") != PASSWORD:
            raise Unauthenticated("invalid username/password combination")
        return auth_pb2.LoginResponse(token=f"tok-{user}", username=user, role="dev",
                                      expires=EXPIRES)

    def WhoAmI(self, request: auth_pb2.WhoAmIRequest,
               context: grpc.ServicerContext) -> auth_pb2.WhoAmIResponse:
        self.world.record("AuthService.WhoAmI", request, context)
        bearer = str(dict(context.invocation_metadata()).get("authorization", ""))
        if not bearer.startswith("Bearer tok-"):
            return auth_pb2.WhoAmIResponse(method="open", auth_enabled=False)
        return auth_pb2.WhoAmIResponse(username=bearer.removeprefix("Bearer tok-"), role="dev",
                                       method="token", auth_enabled=True)
