"""AgentRegistry: the service agents call on the host manager (register, heartbeat, report).

Status updates are handed to the backend's listener as they arrive, in
the order the agent sent them; an update from an agent the backend does
not know (it restarted) is refused with `reregister`, and the agent
re-sends it after registering again.
"""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING

import grpc

from peloton.api.auth_grpc import current_principal
from peloton.api.gen.pelotonpy.internal.agent import agent_pb2 as pb
from peloton.core.errors import PermissionDenied
from peloton.core.states import TaskState
from peloton.hostmgr.backends.base import StatusUpdate
from peloton.hostmgr.backends.local_wire import update_from_pb

if TYPE_CHECKING:
    from peloton.hostmgr.backends.local import LocalBackend

#: Namespace of the uuids of LOST updates the backend makes itself.
_LOST_NS = uuid.UUID("8d7f3f0e-2a51-4b8e-9f1e-3c4b5a6d7e80")
REASON_RECONCILIATION = "REASON_RECONCILIATION"


def lost_update(run_id: str, now: float | None = None) -> StatusUpdate:
    """LOST for a run no agent has (stable uuid, so repeats deduplicate)."""
    return StatusUpdate(uuid=str(uuid.uuid5(_LOST_NS, run_id)), run_id=run_id, state=TaskState.LOST,
                        hostname="", agent_id="", timestamp=time.time() if now is None else now,
                        message="no agent knows this run", reason=REASON_RECONCILIATION)


class AgentRegistryServicer:
    """Serves agents on behalf of one LocalBackend (duck-typed to the generated servicer)."""

    def __init__(self, backend: LocalBackend) -> None:
        self.backend = backend

    def Register(self, request: pb.RegisterRequest,
                 context: grpc.ServicerContext) -> pb.RegisterResponse:
        """Accept an agent; its re-sent unacknowledged updates follow in ReportStatus."""
        if self.backend.listener is None:
            context.abort(grpc.StatusCode.UNAVAILABLE, "host manager backend not started")
        if not request.agent.hostname or not request.agent.address:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "hostname and address are required")
        principal = current_principal()
        try:
            self.backend.agent_registered(request.agent, principal.name if principal else "")
        except PermissionDenied as exc:
            context.abort(grpc.StatusCode.PERMISSION_DENIED, exc.message)
        return pb.RegisterResponse(heartbeat_interval_secs=self.backend.heartbeat_secs)

    def Heartbeat(self, request: pb.HeartbeatRequest,
                  context: grpc.ServicerContext) -> pb.HeartbeatResponse:
        """Keep the agent's host alive; ask unknown agents to register."""
        slack = request.revocable_cpu if request.HasField("revocable_cpu") else None
        known = self._seen(context, request.hostname, request.agent_id, slack)
        return pb.HeartbeatResponse(reregister=not known)

    def ReportStatus(self, request: pb.ReportStatusRequest,
                     context: grpc.ServicerContext) -> pb.ReportStatusResponse:
        """Pass updates to the listener, in order."""
        listener = self.backend.listener
        if listener is None or not self._seen(context, request.hostname, request.agent_id):
            return pb.ReportStatusResponse(reregister=True)
        listener.status_updates([update_from_pb(msg, request.hostname, request.agent_id)
                                 for msg in request.updates])
        return pb.ReportStatusResponse()


    def _seen(self, context: grpc.ServicerContext, hostname: str, agent_id: str,
              slack: float | None = None) -> bool:
        """`agent_seen` as the caller; PERMISSION_DENIED when the host is another identity's
        (as Register answers), so one agent cannot keep another's host alive or forge the
        status of its tasks."""
        try:
            return self.backend.agent_seen(hostname, agent_id, slack, identity=_identity())
        except PermissionDenied as exc:
            context.abort(grpc.StatusCode.PERMISSION_DENIED, exc.message)
            raise  # unreachable: abort raises


def _identity() -> str:
    principal = current_principal()
    return principal.name if principal is not None else ""
