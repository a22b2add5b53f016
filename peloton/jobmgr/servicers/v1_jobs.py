"""v1alpha stateless JobService (`peloton.api.v1alpha.job.stateless.svc.JobService`).

The servicer is assembled from its verb groups: writes (v1_jobs_write),
reads (v1_jobs_read) and, here, the pods of a job (ListPods, QueryPods).

QueryPods filters, sorts and pages as Peloton's store (servicers/queries.py):
by states, hosts and names (the task's name, as Peloton, or a pod name
`<job>-<instance>`, ours), by `spec.pagination` with 10 pods when it sets no
limit; the reply echoes the request's own `pagination` with the total, and
a sort Peloton cannot do is INTERNAL "failed to query tasks from DB: ...".
It works in memory (a job's runtimes are cached) and explains waiting pods
(waiting.py): the reason goes in `reason` (Peloton's
fillReasonForPendingTasksFromResMgr) and, when the pod has no other message,
in `message`; ListPods does the same.  `summary_only` leaves the spec out
(only its `pod_name` is set) so a big job's statuses come back cheaply
(Peloton ignored it and always sent the spec).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc

from peloton.api.convert.v1_job import pod_spec_for_instance
from peloton.api.convert.v1_pod_status import pod_info_to_v1, pod_query_from_v1, pod_summary_to_v1
from peloton.api.gen.peloton.api.v1alpha.job.stateless.svc import stateless_svc_pb2 as svc
from peloton.api.gen.peloton.api.v1alpha.job.stateless.svc import stateless_svc_pb2_grpc as svc_grpc
from peloton.api.gen.peloton.api.v1alpha.pod import pod_pb2
from peloton.api.grpc_errors import PelotonStatus
from peloton.core.errors import InvalidArgument, NotFound
from peloton.core.model.job import JobSpec
from peloton.core.ports import HostManagerPort, ResourceManagerPort
from peloton.core.states import TaskState
from peloton.jobmgr.cache import JobCache
from peloton.jobmgr.jobs import JobOps
from peloton.jobmgr.servicers.common import job_spec_at
from peloton.jobmgr.servicers.queries import QueryRefused, select_tasks
from peloton.jobmgr.servicers.v1_answers import unknown_job
from peloton.jobmgr.servicers.v1_jobs_read import JobReads, job_id_of
from peloton.jobmgr.servicers.v1_jobs_write import JobWrites
from peloton.jobmgr.servicers.waiting import waiting_reasons, with_reasons
from peloton.jobmgr.tasks import TaskOps
from peloton.jobmgr.workflows import WorkflowOps
from peloton.storage import ReadOnlyStore

#: Pods per ListPods response.
LIST_PAGE = 500
S = TaskState


class JobPods:
    """ListPods and QueryPods of JobService (mixed into JobServicer)."""

    cache: JobCache
    store: ReadOnlyStore
    resmgr: ResourceManagerPort
    hostmgr: HostManagerPort
    jobs: JobOps
    tasks: TaskOps

    def ListPods(self, request: svc.ListPodsRequest, context: Any) -> Iterator[svc.ListPodsResponse]:
        job_id = job_id_of(request)
        try:
            self.jobs.get(job_id)
        except (NotFound, InvalidArgument):
            return  # Peloton streams the pods it has: none
        lo, hi = 0, None
        if request.HasField("range"):
            lo, hi = getattr(request.range, "from"), request.range.to or None
        rows = [(i, rt) for i, rt in sorted(self.tasks.runtimes(job_id).items())
                if i >= lo and (hi is None or i < hi)]
        rows = with_reasons(rows, waiting_reasons(
            self.resmgr, self.hostmgr, job_id, rows,
            lambda version: job_spec_at(self.cache, self.store, job_id, version)))
        for start in range(0, len(rows), LIST_PAGE):
            yield svc.ListPodsResponse(pods=[pod_summary_to_v1(job_id, i, rt)
                                             for i, rt in rows[start:start + LIST_PAGE]])

    def QueryPods(self, request: svc.QueryPodsRequest, context: Any) -> svc.QueryPodsResponse:
        job_id = job_id_of(request)
        try:
            self.jobs.get(job_id)
        except (NotFound, InvalidArgument):
            raise unknown_job("failed to find job runtime", job_id) from None
        specs: dict[int, JobSpec] = {}

        def spec_at(version: int) -> JobSpec:
            if version not in specs:
                specs[version] = job_spec_at(self.cache, self.store, job_id, version)
            return specs[version]

        try:
            page, total = select_tasks(
                sorted(self.tasks.runtimes(job_id).items()), pod_query_from_v1(request.spec),
                lambda row: spec_at(row[1].config_version).task_spec(row[0]).name,
                also_named=lambda row: f"{job_id}-{row[0]}")
        except QueryRefused as exc:
            raise PelotonStatus(grpc.StatusCode.INTERNAL,
                                f"failed to query tasks from DB: {exc.message}") from None
        page = with_reasons(page, waiting_reasons(self.resmgr, self.hostmgr, job_id, page, spec_at))
        out = svc.QueryPodsResponse()
        for inst, rt in page:
            if request.summary_only:
                info = pod_pb2.PodInfo(status=pod_summary_to_v1(job_id, inst, rt).status)
                info.spec.pod_name.value = f"{job_id}-{inst}"
            else:
                pod = pod_spec_for_instance(spec_at(rt.config_version), job_id, inst)
                info = pod_info_to_v1(pod, job_id, inst, rt)
            out.pods.append(info)
        # As Peloton: the pods are paged by spec.pagination, the reply echoes the request's.
        out.pagination.offset = request.pagination.offset
        out.pagination.limit = request.pagination.limit
        out.pagination.total = total
        return out


class JobServicer(JobWrites, JobReads, JobPods,
                  svc_grpc.JobServiceServicer):  # type: ignore[misc]
    """Stateless jobs of Peloton v1alpha."""

    def __init__(self, cache: JobCache, store: ReadOnlyStore, resmgr: ResourceManagerPort,
                 hostmgr: HostManagerPort, jobs: JobOps, tasks: TaskOps,
                 workflows: WorkflowOps) -> None:
        self.cache = cache
        self.store = store
        self.resmgr = resmgr
        self.hostmgr = hostmgr
        self.jobs = jobs
        self.tasks = tasks
        self.workflows = workflows
