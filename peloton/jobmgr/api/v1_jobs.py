"""v1alpha stateless JobService (`peloton.api.v1alpha.job.stateless.svc.JobService`).

The servicer is assembled from its verb groups: writes (v1_jobs_write),
reads (v1_jobs_read) and the pods of a job (v1_job_pods).
"""

from __future__ import annotations

from peloton.api.gen.peloton.api.v1alpha.job.stateless.svc import stateless_svc_pb2_grpc as svc_grpc
from peloton.jobmgr.api.v1_job_pods import JobPods
from peloton.jobmgr.api.v1_jobs_read import JobReads
from peloton.jobmgr.api.v1_jobs_write import JobWrites
from peloton.jobmgr.context import JobContext
from peloton.jobmgr.jobs import JobOps
from peloton.jobmgr.tasks import TaskOps
from peloton.jobmgr.workflows import WorkflowOps


class JobServicer(JobWrites, JobReads, JobPods,
                  svc_grpc.JobServiceServicer):  # type: ignore[misc]
    """Stateless jobs of Peloton v1alpha."""

    def __init__(self, ctx: JobContext, jobs: JobOps, tasks: TaskOps,
                 workflows: WorkflowOps) -> None:
        self.ctx = ctx
        self.jobs = jobs
        self.tasks = tasks
        self.workflows = workflows
