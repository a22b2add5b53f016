"""v1alpha stateless JobService, the reading half: jobs, their workflows and diffs.

GetJob with a version returns that config version's spec only (as
Peloton); without, the current spec, status (with the current workflow's
status) and `workflow_info` with the workflow's own events.  Workflow
instance ranges are written with `to` inclusive, as Peloton wrote them
(see peloton.api.convert.v1_workflow).  ListJobs streams one response per
page of `LIST_PAGE` jobs.  QueryJobs answers as Peloton's store
(servicers/queries.py): a query it refuses (a time range missing a bound or
with min after max, a sort it cannot do) is INTERNAL "failed to get job
summaries: <why>", and a respool path that names no pool filters by none.
Errors are Peloton's, as in v1_jobs_write.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc

from peloton.api import peloton_texts as texts
from peloton.api.convert.common import job_id_from_wire, parse_entity_version
from peloton.api.convert.v1_job import (
    job_info_to_v1,
    job_query_from_v1,
    job_spec_from_v1,
    job_spec_to_v1,
    job_status_to_v1,
    job_summary_to_v1,
)
from peloton.api.convert.v1_workflow import (
    instance_ranges_to_v1,
    workflow_event_to_v1,
    workflow_info_to_v1,
)
from peloton.api.gen.peloton.api.v1alpha.job.stateless.svc import stateless_svc_pb2 as svc
from peloton.api.grpc_errors import PelotonStatus
from peloton.core.errors import Conflict, InvalidArgument, NotFound, Unavailable
from peloton.core.model.ids import is_uuid
from peloton.core.model.update import UpdateInfo, WorkflowEvent
from peloton.core.ports import ResourceManagerPort
from peloton.jobmgr.cache import JobCache
from peloton.jobmgr.jobs import JobOps
from peloton.jobmgr.servicers.common import job_spec_at, job_summary, version, workflow_of
from peloton.jobmgr.servicers.queries import QueryRefused, job_query
from peloton.jobmgr.servicers.v1_answers import is_stale, known_job, stale, unknown_job
from peloton.jobmgr.workflows import WorkflowOps
from peloton.storage import JobQuery, ReadOnlyStore, SortField

#: Jobs per ListJobs response.
LIST_PAGE = 500


def job_id_of(request: Any) -> str:
    """The request's job id; one that is not a UUID is kept (it names no job)."""
    if not request.job_id.value:
        raise InvalidArgument(texts.V1_NO_JOB_ID, field="job_id")
    value: str = request.job_id.value
    return job_id_from_wire(value, "job_id") if is_uuid(value) else value


class JobReads:
    """The reading RPCs of JobService (mixed into JobServicer)."""

    cache: JobCache
    store: ReadOnlyStore
    resmgr: ResourceManagerPort
    jobs: JobOps
    workflows: WorkflowOps

    def _events(self, update: UpdateInfo, instances: bool, limit: int = 0) -> list[WorkflowEvent]:
        store = self.store
        events = store.get_workflow_events(update.update_id, None)
        if instances:
            for inst in sorted({*update.instances_added, *update.instances_removed,
                                *update.instances_updated}):
                events.extend(store.get_workflow_events(update.update_id, inst, limit or None))
        return events

    def GetJob(self, request: svc.GetJobRequest, context: Any) -> svc.GetJobResponse:
        job_id = job_id_of(request)
        out = svc.GetJobResponse()
        wanted = version(request)
        if request.summary_only:
            spec, runtime = known_job(self.jobs, job_id, "failed to get job summary from DB", "index")
            out.summary.CopyFrom(job_summary_to_v1(job_summary(job_id, spec, runtime),
                                                   workflow_of(self.cache, self.store, job_id, runtime)))
        elif wanted:
            config, _, _ = parse_entity_version(wanted, "version")
            known_job(self.jobs, job_id, "fail to get job spec", "config")
            try:
                spec = job_spec_at(self.cache, self.store, job_id, config)
            except NotFound:
                raise unknown_job("fail to get job spec", job_id, "config") from None
            out.job_info.job_id.value = job_id
            out.job_info.spec.CopyFrom(job_spec_to_v1(spec))
        else:
            spec, runtime = known_job(self.jobs, job_id, "failed to get job status")
            update = workflow_of(self.cache, self.store, job_id, runtime)
            out.job_info.CopyFrom(job_info_to_v1(job_id, spec, runtime, update))
            if update is not None:
                out.workflow_info.CopyFrom(workflow_info_to_v1(update, runtime,
                                                               self._events(update, False)))
        return out

    def GetJobIDFromJobName(self, request: svc.GetJobIDFromJobNameRequest,
                            context: Any) -> svc.GetJobIDFromJobNameResponse:
        ids = self.store.get_job_ids_by_name(request.job_name)
        if not ids:
            raise NotFound(f'job id for job name not found: "{request.job_name}"',
                           field="job_name")
        out = svc.GetJobIDFromJobNameResponse()
        for job_id in ids:
            out.job_id.add().value = job_id
        return out

    def GetWorkflowEvents(self, request: svc.GetWorkflowEventsRequest,
                          context: Any) -> svc.GetWorkflowEventsResponse:
        if not is_uuid(request.job_id.value):
            raise InvalidArgument(texts.V1_WORKFLOW_EVENTS_ID, field="job_id")
        job_id = job_id_of(request)
        _, runtime = known_job(self.jobs, job_id, "failed to get job runtime")
        if not runtime.update_id:
            raise Unavailable(texts.V1_NO_WORKFLOW)
        events = self.store.get_workflow_events(runtime.update_id, request.instance_id,
                                                    request.limit or None)
        return svc.GetWorkflowEventsResponse(events=[workflow_event_to_v1(e) for e in events])

    def QueryJobs(self, request: svc.QueryJobsRequest, context: Any) -> svc.QueryJobsResponse:
        spec = job_query_from_v1(request.spec)
        pool = None
        if spec.respool_path:
            try:
                pool = self.resmgr.pool_id_for_path(spec.respool_path)
            except (NotFound, InvalidArgument):
                # Peloton's LookupResourcePoolID answers these inside its reply, which
                # QueryJobs reads as "no pool": it filters by none.
                pool = None
        try:
            page = job_query(spec, pool, self.jobs.clock.wall())
        except QueryRefused as exc:
            raise PelotonStatus(grpc.StatusCode.INTERNAL,
                                f"failed to get job summaries: {exc.message}") from None
        result = page.answer(self.jobs.query(page.query))
        out = svc.QueryJobsResponse(spec=request.spec)
        for summary in result.jobs:
            update = workflow_of(self.cache, self.store, summary.job_id, summary.runtime)
            out.records.append(job_summary_to_v1(summary, update))
        out.pagination.offset = request.spec.pagination.offset
        out.pagination.limit = request.spec.pagination.limit
        out.pagination.total = result.total
        return out

    def ListJobs(self, request: svc.ListJobsRequest, context: Any) -> Iterator[svc.ListJobsResponse]:
        offset = 0
        while True:
            page = self.jobs.query(JobQuery(order_by=SortField.JOB_ID, descending=False,
                                            offset=offset, limit=LIST_PAGE))
            if page.jobs:
                yield svc.ListJobsResponse(jobs=[
                    job_summary_to_v1(s, workflow_of(self.cache, self.store, s.job_id, s.runtime))
                    for s in page.jobs])
            offset += len(page.jobs)
            if len(page.jobs) < LIST_PAGE or offset >= page.total:
                return

    def ListJobWorkflows(self, request: svc.ListJobWorkflowsRequest,
                         context: Any) -> svc.ListJobWorkflowsResponse:
        job_id = job_id_of(request)
        out = svc.ListJobWorkflowsResponse()
        try:
            _, runtime = self.jobs.get(job_id)
        except (NotFound, InvalidArgument):
            return out  # Peloton lists the workflows it has: none
        for update in self.workflows.for_job(job_id, request.updates_limit):
            events = self._events(update, request.instance_events, request.instance_events_limit)
            out.workflow_infos.append(workflow_info_to_v1(update, runtime, events))
        return out

    def GetReplaceJobDiff(self, request: svc.GetReplaceJobDiffRequest,
                          context: Any) -> svc.GetReplaceJobDiffResponse:
        if not is_uuid(request.job_id.value):
            raise InvalidArgument(texts.UPDATE_JOB_ID_NOT_UUID, field="job_id")
        job_id = job_id_of(request)
        old, runtime = known_job(self.jobs, job_id, "failed to get job status")
        wanted = version(request)
        if wanted != runtime.entity_version():  # none included, as Peloton's
            raise stale()
        spec = job_spec_from_v1(request.spec)
        if spec.type is not old.type:
            raise InvalidArgument(texts.JOB_TYPE_IMMUTABLE, field="spec.type")
        if spec.respool_id != old.respool_id:
            raise InvalidArgument(texts.POOL_IMMUTABLE, field="spec.respool_id")
        try:
            added, removed, updated, unchanged = self.workflows.preview(job_id, spec, wanted)
        except Conflict as exc:
            if is_stale(exc):
                raise stale() from None
            raise
        return svc.GetReplaceJobDiffResponse(
            instances_added=instance_ranges_to_v1(added),
            instances_removed=instance_ranges_to_v1(removed),
            instances_updated=instance_ranges_to_v1(updated),
            instances_unchanged=instance_ranges_to_v1(unchanged))

    def GetJobCache(self, request: svc.GetJobCacheRequest, context: Any) -> svc.GetJobCacheResponse:
        job = self.cache.get(job_id_of(request))
        if job is None:
            raise NotFound(texts.V1_JOB_NOT_IN_CACHE, field="job_id")
        return svc.GetJobCacheResponse(spec=job_spec_to_v1(job.spec),
                                       status=job_status_to_v1(job.runtime, job.update))
