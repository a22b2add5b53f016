"""AgentService: what the host manager can ask of an agent over gRPC.

Thin: every method converts, calls the executor (or the sandboxes), and
maps our errors to gRPC codes once, here.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from typing import Any, TypeVar

import grpc

from peloton.agent.caps import TOKEN_KEY, SandboxCaps
from peloton.agent.executor import Executor
from peloton.agent.reporter import StatusReporter
from peloton.agent.wire import run_spec_from_pb, update_to_pb
from peloton.api.gen.pelotonpy.internal.agent import agent_pb2 as pb
from peloton.core.errors import InvalidArgument, NotFound, PelotonError

T = TypeVar("T")
SERVICE_NAME = "pelotonpy.internal.agent.AgentService"
DEFAULT_READ = 1 << 20


def _mapped(context: grpc.ServicerContext, fn: Callable[[], T]) -> T:
    try:
        return fn()
    except NotFound as exc:
        context.abort(grpc.StatusCode.NOT_FOUND, str(exc))
    except InvalidArgument as exc:
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
    except PelotonError as exc:
        context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(exc))
    raise AssertionError("unreachable: abort raises")


class CallTokenInterceptor(grpc.ServerInterceptor):  # type: ignore[misc]
    """Refuses AgentService calls without this agent's call token (see caps.py)."""

    def __init__(self, token: str) -> None:
        self._token = token.encode()

    def intercept_service(self, continuation: Callable[[Any], Any],
                          details: grpc.HandlerCallDetails) -> Any:
        handler = continuation(details)
        if handler is None or not details.method.startswith(f"/{SERVICE_NAME}/"):
            return handler
        presented = next((v for k, v in details.invocation_metadata or () if k == TOKEN_KEY), "")
        raw = presented.encode() if isinstance(presented, str) else bytes(presented)
        if hmac.compare_digest(raw, self._token):
            return handler
        return grpc.unary_unary_rpc_method_handler(_refuse)


def _refuse(request: Any, context: grpc.ServicerContext) -> Any:
    context.abort(grpc.StatusCode.UNAUTHENTICATED,
                  "AgentService calls need the call token this agent gave its host manager")


class AgentServicer:
    """Serves one agent's executor (duck-typed to the generated servicer)."""

    def __init__(self, executor: Executor, reporter: StatusReporter,
                 caps: SandboxCaps | None = None) -> None:
        self.executor = executor
        self.reporter = reporter
        self.caps = caps

    def Launch(self, request: pb.LaunchRequest, context: grpc.ServicerContext) -> pb.LaunchResponse:
        """Start runs; duplicates (already known run ids) are listed, not started again."""
        specs = [run_spec_from_pb(t) for t in request.tasks]
        return pb.LaunchResponse(duplicates=self.executor.launch(specs))

    def Kill(self, request: pb.KillRequest, context: grpc.ServicerContext) -> pb.KillResponse:
        """Stop runs; idempotent."""
        self.executor.kill(list(request.run_ids), request.grace_secs)
        return pb.KillResponse()

    def Acknowledge(self, request: pb.AcknowledgeRequest,
                    context: grpc.ServicerContext) -> pb.AcknowledgeResponse:
        """Forget acknowledged updates; runs fully reported are forgotten too."""
        self.executor.settled(self.reporter.acknowledge(request.uuids))
        return pb.AcknowledgeResponse()

    def Reconcile(self, request: pb.ReconcileRequest,
                  context: grpc.ServicerContext) -> pb.ReconcileResponse:
        """Re-report runs (all when none are named); name the ones never seen here."""
        return pb.ReconcileResponse(unknown=self.executor.reconcile(list(request.run_ids)))

    def ListTasks(self, request: pb.ListTasksRequest,
                  context: grpc.ServicerContext) -> pb.ListTasksResponse:
        """Every run the agent tracks, with its latest status and processes."""
        out = []
        for run_id, run in self.executor.tasks():
            if run.last is None:
                continue
            out.append(pb.TaskInfo(status=update_to_pb(run.last), pid=run.pid,
                                   supervisor_pid=run.supervisor_pid,
                                   sandbox=str(self.executor.sandboxes.path(run_id))))
        return pb.ListTasksResponse(tasks=out)

    def ListSandbox(self, request: pb.ListSandboxRequest,
                    context: grpc.ServicerContext) -> pb.ListSandboxResponse:
        """Entries of a directory in a run's sandbox."""
        entries = _mapped(context, lambda: self.executor.sandboxes.listdir(request.run_id, request.path))
        # With the listing, a capability to fetch the files from the file server (caps.py).
        cap = self.caps.mint(request.run_id) if self.caps is not None else ""
        return pb.ListSandboxResponse(capability=cap, entries=[
            pb.SandboxEntry(name=n, size=s, is_dir=d, mtime=m) for n, s, d, m in entries])

    def DestroyVolumes(self, request: pb.DestroyVolumesRequest,
                       context: grpc.ServicerContext) -> pb.DestroyVolumesResponse:
        """Remove persistent volumes; idempotent, keeps (and names) those a live run uses."""
        kept = _mapped(context, lambda: self.executor.destroy_volumes(list(request.volume_ids)))
        return pb.DestroyVolumesResponse(in_use=kept)

    def ReadSandboxFile(self, request: pb.ReadSandboxFileRequest,
                        context: grpc.ServicerContext) -> pb.ReadSandboxFileResponse:
        """A slice of a sandbox file (stdout, stderr, anything the task wrote)."""
        data, size = _mapped(context, lambda: self.executor.sandboxes.read(
            request.run_id, request.path, request.offset, request.length or DEFAULT_READ))
        return pb.ReadSandboxFileResponse(data=data, size=size)
