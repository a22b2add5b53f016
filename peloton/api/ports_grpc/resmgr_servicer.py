"""pelotonpy.internal.resmgr.ResourceManagerService: a ResourceManagerPort served over gRPC.

The servicer only converts: each method decodes its request, calls the same
method of the port object it was given (the ResourceManager in a `peloton
resmgr` process, a fake in tests) and encodes the answer.  Errors are the
port's own, mapped to status codes once by service_registry.
"""

from __future__ import annotations

from typing import Any

from peloton.api.convert.private_recover import recovered_runs_count, recovered_runs_from_pb
from peloton.api.convert.private_sched import (
    NeedsTable,
    enqueue_failure_to_pb,
    enum_from_pb,
    gangs_into,
    needs_from_pb,
    partitions_from_pb,
    placement_failure_from_pb,
    placement_from_pb,
    placements_into,
    resources_from_pb,
    rm_task_from_pb,
    task_id_from_pb,
    task_id_to_pb,
    victim_to_pb,
)
from peloton.api.gen.pelotonpy.internal.resmgr import resmgr_pb2 as pb
from peloton.api.gen.pelotonpy.internal.resmgr import resmgr_pb2_grpc as pb_grpc
from peloton.api.grpc_server import ServiceHost
from peloton.api.ports_grpc.term_fence import EpochWatermark, still_current
from peloton.api.service_registry import register
from peloton.core.errors import InvalidArgument
from peloton.core.ports import RecoveredRun, ResourceManagerPort
from peloton.core.states import TaskState

#: Longest a long poll may hold a server thread, whatever the caller asked (seconds).
MAX_WAIT = 30.0
#: Runs in one RecoverTasks call (the job manager sends chunks of RECOVER_CHUNK).
MAX_RECOVERED_PER_CALL = 10_000


class ResourceManagerServicer(pb_grpc.ResourceManagerServiceServicer):  # type: ignore[misc]
    """Serves one ResourceManagerPort object."""

    def __init__(self, port: ResourceManagerPort, watermark: EpochWatermark | None = None) -> None:
        self.port = port
        #: The term fence's newest epochs (the daemon's TermFenceInterceptor), so a
        #: member's long poll ends once a partition it asked for has moved (None: unfenced).
        self.watermark = watermark

    def ValidatePool(self, request: pb.ValidatePoolRequest, context: Any) -> pb.ValidatePoolResponse:
        self.port.validate_pool(request.pool_id, resources_from_pb(request.need)
                                if request.HasField("need") else None)
        return pb.ValidatePoolResponse()

    def PoolIdForPath(self, request: pb.PoolIdForPathRequest,
                      context: Any) -> pb.PoolIdForPathResponse:
        return pb.PoolIdForPathResponse(pool_id=self.port.pool_id_for_path(request.path))

    def EnqueueGangs(self, request: pb.EnqueueGangsRequest,
                     context: Any) -> pb.EnqueueGangsResponse:
        needs = needs_from_pb(request.needs)
        gangs = [[rm_task_from_pb(t, needs) for t in g.tasks] for g in request.gangs]
        failures = self.port.enqueue_gangs(request.pool_id, gangs)
        return pb.EnqueueGangsResponse(failures=[enqueue_failure_to_pb(f) for f in failures])

    def KillTasks(self, request: pb.KillTasksRequest, context: Any) -> pb.KillTasksResponse:
        self.port.kill_tasks([task_id_from_pb(t) for t in request.task_ids])
        return pb.KillTasksResponse()

    def GetPlacements(self, request: pb.GetPlacementsRequest,
                      context: Any) -> pb.GetPlacementsResponse:
        partitions = partitions_from_pb(request.partitions) \
            if request.HasField("partitions") else None
        current = None if self.watermark is None else \
            still_current(self.watermark, context.invocation_metadata())
        placements = self.port.get_placements(request.limit, min(request.timeout, MAX_WAIT),
                                              partitions, still_current=current)
        out = pb.GetPlacementsResponse()
        placements_into(out.placements, placements)
        return out

    def RecoverTask(self, request: pb.RecoverTaskRequest, context: Any) -> pb.RecoverTaskResponse:
        task = rm_task_from_pb(request.task, needs_from_pb(request.needs))
        self.port.recover_task(request.pool_id, task,
                               enum_from_pb(TaskState, request.state, "state"), request.hostname)
        return pb.RecoverTaskResponse()

    def RecoverTasks(self, request: pb.RecoverTasksRequest,
                     context: Any) -> pb.RecoverTasksResponse:
        if len(request.runs) > MAX_RECOVERED_PER_CALL:
            raise InvalidArgument(f"at most {MAX_RECOVERED_PER_CALL} runs per call, got "
                                  f"{len(request.runs)}", field="runs")
        self.port.recover_tasks([
            RecoveredRun(r.pool_id, rm_task_from_pb(r.task, needs_from_pb(r.needs)),
                         enum_from_pb(TaskState, r.state, "state"), r.hostname)
            for r in request.runs])
        return pb.RecoverTasksResponse()

    def RecoverRuns(self, request: pb.RecoverRunsRequest, context: Any) -> pb.RecoverRunsResponse:
        count = recovered_runs_count(request)
        if count > MAX_RECOVERED_PER_CALL:
            raise InvalidArgument(f"at most {MAX_RECOVERED_PER_CALL} runs per call, got "
                                  f"{count}", field="groups")
        self.port.recover_tasks(recovered_runs_from_pb(request))
        return pb.RecoverRunsResponse()

    def TakeVictims(self, request: pb.TakeVictimsRequest, context: Any) -> pb.TakeVictimsResponse:
        partitions = partitions_from_pb(request.partitions) \
            if request.HasField("partitions") else None
        return pb.TakeVictimsResponse(victims=[
            victim_to_pb(v) for v in self.port.take_victims(request.limit, partitions)])

    def PendingReasons(self, request: pb.PendingReasonsRequest,
                       context: Any) -> pb.PendingReasonsResponse:
        reasons = self.port.pending_reasons([task_id_from_pb(t) for t in request.task_ids])
        return pb.PendingReasonsResponse(reasons=[
            pb.PendingReason(task_id=task_id_to_pb(t), reason=r) for t, r in reasons.items()])

    def DequeueGangs(self, request: pb.DequeueGangsRequest,
                     context: Any) -> pb.DequeueGangsResponse:
        gangs = self.port.dequeue_gangs(request.limit, min(request.timeout, MAX_WAIT))
        table = NeedsTable()
        out = pb.DequeueGangsResponse()
        gangs_into(out.gangs, gangs, table)
        out.needs.extend(table.messages)
        return out

    def SetPlacements(self, request: pb.SetPlacementsRequest,
                      context: Any) -> pb.SetPlacementsResponse:
        self.port.set_placements([placement_from_pb(p) for p in request.placements],
                                 [placement_failure_from_pb(f) for f in request.failures])
        return pb.SetPlacementsResponse()


def serve_resource_manager(server: ServiceHost, port: ResourceManagerPort,
                           watermark: EpochWatermark | None = None) -> str:
    """Register the service for `port` on `server` (before it starts); returns its name.
    With `watermark` (the server's term fence) a member's long poll for placements ends
    once a partition it asked for has a newer owner."""
    return register(server, pb_grpc.add_ResourceManagerServiceServicer_to_server,
                    ResourceManagerServicer(port, watermark))
