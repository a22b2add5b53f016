"""ResourceManagerPort over gRPC: what the job manager and the placement engine hold in
multi-process mode instead of the ResourceManager object.

Every method is one call to pelotonpy.internal.resmgr.ResourceManagerService
on the resource manager's leader (see channel.py for retries and terms).
The long polls (`get_placements`, `dequeue_gangs`) give the server their
own timeout on top of the call deadline.  Enqueue, kill, recover and
placements reports are safe to repeat (the resource manager makes them
idempotent), which is what makes retrying UNAVAILABLE safe.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from peloton.api.convert.private_recover import recovered_runs_to_pb
from peloton.api.convert.private_sched import (
    NeedsTable,
    enqueue_failure_from_pb,
    gang_from_pb,
    needs_from_pb,
    partitions_to_pb,
    placement_failure_to_pb,
    placement_from_pb,
    placements_into,
    resources_to_pb,
    rm_task_to_pb,
    rm_tasks_into,
    task_id_from_pb,
    task_id_to_pb,
    victim_from_pb,
)
from peloton.api.gen.pelotonpy.internal.resmgr import resmgr_pb2 as pb
from peloton.api.ports_grpc.channel import PeerChannel, PeerSecurity, Target
from peloton.core.errors import InvalidArgument, Unimplemented
from peloton.core.model.ids import TaskId
from peloton.core.model.resources import Resources
from peloton.core.model.sched import (
    EnqueueFailure,
    Placement,
    PlacementFailure,
    PlacementGang,
    Victim,
)
from peloton.core.partitions import PartitionSet
from peloton.core.ports import RecoveredRun
from peloton.core.respool.records import RmTask
from peloton.core.states import TaskState

log = logging.getLogger(__name__)

SERVICE = "pelotonpy.internal.resmgr.ResourceManagerService"
#: The resource manager's YARPC dispatcher name (api-compat.md §2).
RPC_SERVICE = "peloton-resmgr"


class GrpcResourceManager:
    """A `ResourceManagerPort` whose calls go to the resource manager's leader."""

    def __init__(self, target: Target, *, caller: str, timeout: float = 10.0,
                 security: PeerSecurity | None = None) -> None:
        self.channel = PeerChannel(target, SERVICE, rpc_service=RPC_SERVICE, caller=caller,
                                   timeout=timeout, security=security)
        #: The resource manager answered RecoverRuns UNIMPLEMENTED (an older version).
        self._per_run_recovery = False

    def close(self) -> None:
        """Close the channels."""
        self.channel.close()

    # -- job manager side ----------------------------------------------------------------------
    def validate_pool(self, pool_id: str, need: Resources | None = None) -> None:
        """A job may be created in this pool (NotFound / InvalidArgument otherwise)."""
        request = pb.ValidatePoolRequest(pool_id=pool_id)
        if need is not None:
            request.need.CopyFrom(resources_to_pb(need))
        self.channel.call("ValidatePool", request, pb.ValidatePoolResponse)

    def pool_id_for_path(self, path: str) -> str:
        """The id of the pool at `path`."""
        reply = self.channel.call("PoolIdForPath", pb.PoolIdForPathRequest(path=path),
                                  pb.PoolIdForPathResponse)
        return reply.pool_id

    def enqueue_gangs(self, pool_id: str, gangs: Sequence[Sequence[RmTask]]) -> list[EnqueueFailure]:
        """Queue gangs; returns the tasks refused."""
        table = NeedsTable()
        request = pb.EnqueueGangsRequest(pool_id=pool_id)
        for gang in gangs:
            rm_tasks_into(request.gangs.add().tasks, gang, table)
        request.needs.extend(table.messages)
        reply = self.channel.call("EnqueueGangs", request, pb.EnqueueGangsResponse)
        return [enqueue_failure_from_pb(f) for f in reply.failures]

    def kill_tasks(self, task_ids: Sequence[TaskId]) -> None:
        """Forget these tasks."""
        self.channel.call("KillTasks", pb.KillTasksRequest(
            task_ids=[task_id_to_pb(t) for t in task_ids]), pb.KillTasksResponse)

    def get_placements(self, limit: int, timeout: float,
                       partitions: PartitionSet | None = None, *,
                       still_current: Callable[[], bool] | None = None) -> list[Placement]:
        """Placed runs to launch (of jobs in `partitions`), waiting up to `timeout` for the
        first.  `still_current` is the serving side's and cannot be sent: InvalidArgument."""
        if still_current is not None:
            raise InvalidArgument("still_current is the resource manager's own check (its "
                                  "term fence); a client cannot send it",
                                  field="still_current")
        request = pb.GetPlacementsRequest(limit=limit, timeout=timeout)
        if partitions is not None:
            request.partitions.CopyFrom(partitions_to_pb(partitions))
        reply = self.channel.call("GetPlacements", request, pb.GetPlacementsResponse,
                                  wait=timeout)
        return [placement_from_pb(p) for p in reply.placements]

    def recover_task(self, pool_id: str, task: RmTask, state: TaskState, hostname: str = "") -> None:
        """Re-track a run already placed, launched or running."""
        table = NeedsTable()
        msg = rm_task_to_pb(task, table)
        self.channel.call("RecoverTask", pb.RecoverTaskRequest(
            pool_id=pool_id, needs=table.messages, task=msg, state=state.value,
            hostname=hostname), pb.RecoverTaskResponse)

    def recover_tasks(self, runs: Sequence[RecoveredRun]) -> None:
        """Re-track many runs in one call (RecoverRuns, grouped: private_recover.py; one
        message per run to a resource manager that predates it)."""
        if not runs:
            return
        if not self._per_run_recovery:
            try:
                self.channel.call("RecoverRuns", recovered_runs_to_pb(runs),
                                  pb.RecoverRunsResponse)
                return
            except Unimplemented:
                log.info("the resource manager has no RecoverRuns; recovering run by run")
                self._per_run_recovery = True
        request = pb.RecoverTasksRequest()
        for run in runs:
            table = NeedsTable()
            msg = rm_task_to_pb(run.task, table)
            request.runs.add(pool_id=run.pool_id, needs=table.messages, task=msg,
                             state=run.state.value, hostname=run.hostname)
        self.channel.call("RecoverTasks", request, pb.RecoverTasksResponse)

    def take_victims(self, limit: int, partitions: PartitionSet | None = None) -> list[Victim]:
        """Running tasks (of jobs in `partitions`) the preemptor wants stopped."""
        request = pb.TakeVictimsRequest(limit=limit)
        if partitions is not None:
            request.partitions.CopyFrom(partitions_to_pb(partitions))
        reply = self.channel.call("TakeVictims", request, pb.TakeVictimsResponse)
        return [victim_from_pb(v) for v in reply.victims]

    def pending_reasons(self, task_ids: Sequence[TaskId]) -> dict[TaskId, str]:
        """Why queued tasks are not running yet."""
        reply = self.channel.call("PendingReasons", pb.PendingReasonsRequest(
            task_ids=[task_id_to_pb(t) for t in task_ids]), pb.PendingReasonsResponse)
        return {task_id_from_pb(r.task_id): r.reason for r in reply.reasons}

    # -- placement engine side ---------------------------------------------------------------
    def dequeue_gangs(self, limit: int, timeout: float) -> list[PlacementGang]:
        """Admitted gangs to place, waiting up to `timeout` for the first."""
        reply = self.channel.call("DequeueGangs", pb.DequeueGangsRequest(limit=limit,
                                                                        timeout=timeout),
                                  pb.DequeueGangsResponse, wait=timeout)
        needs = needs_from_pb(reply.needs)
        return [gang_from_pb(g, needs) for g in reply.gangs]

    def set_placements(self, placements: Sequence[Placement],
                       failures: Sequence[PlacementFailure]) -> None:
        """Report a placement round."""
        request = pb.SetPlacementsRequest(
            failures=[placement_failure_to_pb(f) for f in failures])
        placements_into(request.placements, placements)
        self.channel.call("SetPlacements", request, pb.SetPlacementsResponse)
