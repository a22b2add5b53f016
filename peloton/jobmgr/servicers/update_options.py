"""pelotonpy.api.update.WorkflowOptionsService: what a workflow runs with beyond Peloton's spec.

Our extension (proto/pelotonpy/api/update/update.proto).  The options are set
with the call that starts a workflow (request metadata, see
servicers/common.with_options); this reads them back with where the workflow
stands on them: whether it paused itself after a batch, and which instances
are waiting out the watch time and for how long yet.
"""

from __future__ import annotations

from typing import Any

from peloton.api.convert import update_options
from peloton.api.gen.pelotonpy.api.update import update_pb2 as pb
from peloton.api.gen.pelotonpy.api.update import update_pb2_grpc
from peloton.common.clock import Clock
from peloton.core.errors import NotFound
from peloton.core.model.ids import validate_uuid
from peloton.core.states import TaskState, WorkflowState
from peloton.core.update_plan import ready_since
from peloton.jobmgr.workflows import WorkflowOps


class WorkflowOptionsServicer(update_pb2_grpc.WorkflowOptionsServiceServicer):  # type: ignore[misc]
    """Read a workflow's update options and progress on them."""

    def __init__(self, workflows: WorkflowOps, clock: Clock) -> None:
        self.workflows = workflows
        self.clock = clock

    def GetWorkflowOptions(self, request: pb.GetWorkflowOptionsRequest,
                           context: Any) -> pb.GetWorkflowOptionsResponse:
        job_id = validate_uuid(request.job_id, "job_id")
        if request.update_id:
            update = self.workflows.get(request.update_id)
            if update.job_id != job_id:
                raise NotFound(f"job {job_id} has no workflow {request.update_id}",
                               field="update_id")
        else:
            current = self.workflows.current(job_id)
            if current is None:
                raise NotFound(f"job {job_id} has no workflow", field="job_id")
            update = current
        out = pb.GetWorkflowOptionsResponse(update_id=update.update_id)
        out.options.CopyFrom(update_options.to_pb(update.spec))
        touched = len(update.instances_done) + len(update.instances_failed) + \
            len(update.instances_current)
        out.auto_paused = (update.state is WorkflowState.PAUSED and update.autopaused_at >= 0
                           and update.autopaused_at == touched)
        watch = update.spec.watch_secs
        job = self.workflows.cache.get(job_id)
        if watch > 0 and job is not None and update.state.active:
            now = self.clock.wall()
            for inst in update.instances_current:
                rt = job.get_task(inst)
                if rt is None or rt.state is not TaskState.RUNNING or \
                        rt.config_version != update.config_version:
                    continue
                left = ready_since(rt) + watch - now
                if left > 0:
                    out.watching.add(instance_id=inst, remaining_ms=round(left * 1000))
        return out
