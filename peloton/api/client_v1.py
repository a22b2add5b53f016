"""The v1alpha half of the typed client: stateless jobs, pods, watch and admin.

v1alpha reports failures as gRPC status codes only, so these methods are a
request builder and a call each.  Entity versions (`"3-1-2"` style) are the
compare-and-set tokens of every write; a stale one is rejected with
Conflict (gRPC ABORTED).  Streaming methods return iterators.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import TypeVar

from peloton.api.client_transport import ServiceHandle
from peloton.api.convert.update_options import to_metadata
from peloton.api.gen.peloton.api.v1alpha import peloton_pb2 as v1_pb2
from peloton.api.gen.peloton.api.v1alpha.admin.svc import admin_svc_pb2
from peloton.api.gen.peloton.api.v1alpha.job.stateless import stateless_pb2
from peloton.api.gen.peloton.api.v1alpha.job.stateless.svc import stateless_svc_pb2 as svc
from peloton.api.gen.peloton.api.v1alpha.pod import pod_pb2
from peloton.api.gen.peloton.api.v1alpha.pod.svc import pod_svc_pb2
from peloton.api.gen.peloton.api.v1alpha.query import query_pb2
from peloton.api.gen.peloton.api.v1alpha.watch import watch_pb2
from peloton.api.gen.peloton.api.v1alpha.watch.svc import watch_svc_pb2
from peloton.api.gen.pelotonpy.api.update import update_pb2

#: A page size or match cap that means "all of them" (the largest uint32).
EVERYTHING = 2**32 - 1
_Q = TypeVar("_Q", pod_pb2.QuerySpec, stateless_pb2.QuerySpec)


def _copy(spec: _Q) -> _Q:
    out = type(spec)()
    out.CopyFrom(spec)
    return out


def _job(job_id: str) -> v1_pb2.JobID:
    return v1_pb2.JobID(value=job_id)


def _version(version: str) -> v1_pb2.EntityVersion | None:
    return v1_pb2.EntityVersion(value=version) if version else None


def _opaque(data: str) -> v1_pb2.OpaqueData | None:
    return v1_pb2.OpaqueData(data=data) if data else None


def options_metadata(options: update_pb2.UpdateOptions | None) -> tuple[tuple[str, bytes], ...]:
    """The metadata carrying our update options (none when there are none)."""
    return (to_metadata(options),) if options is not None else ()


def _pod(name: str) -> v1_pb2.PodName:
    return v1_pb2.PodName(value=name)


def _pod_id(pod_id: str) -> v1_pb2.PodID | None:
    return v1_pb2.PodID(value=pod_id) if pod_id else None


class V1Calls:
    """Methods of the stateless JobService, PodService, WatchService and AdminService."""

    _stateless: ServiceHandle
    _pods: ServiceHandle
    _watch: ServiceHandle
    _admin: ServiceHandle
    _workflow_options: ServiceHandle

    # -- stateless JobService -----------------------------------------------------------------
    def create_stateless_job(self, spec: stateless_pb2.JobSpec, *, job_id: str = "",
                             create_spec: stateless_pb2.CreateSpec | None = None,
                             opaque_data: str = "",
                             secrets: Sequence[v1_pb2.Secret] = (),
                             options: update_pb2.UpdateOptions | None = None,
                             ) -> svc.CreateJobResponse:
        """Create a service job; pods come up `create_spec.batch_size` at a time (`options`:
        our update options for the create workflow: strategy, watch time)."""
        req = svc.CreateJobRequest(job_id=_job(job_id) if job_id else None, spec=spec,
                                   create_spec=create_spec, opaque_data=_opaque(opaque_data),
                                   secrets=list(secrets))
        return self._stateless.call("CreateJob", req, svc.CreateJobResponse,
                                    metadata=options_metadata(options))

    def replace_job(self, job_id: str, version: str, spec: stateless_pb2.JobSpec,
                    update_spec: stateless_pb2.UpdateSpec, *, opaque_data: str = "",
                    options: update_pb2.UpdateOptions | None = None) -> svc.ReplaceJobResponse:
        """Roll a job forward to `spec` (an UPDATE workflow), with our update `options`."""
        req = svc.ReplaceJobRequest(job_id=_job(job_id), version=_version(version), spec=spec,
                                    update_spec=update_spec, opaque_data=_opaque(opaque_data))
        return self._stateless.call("ReplaceJob", req, svc.ReplaceJobResponse,
                                    metadata=options_metadata(options))

    def get_workflow_options(self, job_id: str,
                             update_id: str = "") -> update_pb2.GetWorkflowOptionsResponse:
        """The update options a workflow runs with (default: the job's current one), whether
        it paused itself after a batch, and the instances waiting out the watch time."""
        req = update_pb2.GetWorkflowOptionsRequest(job_id=job_id, update_id=update_id)
        return self._workflow_options.call("GetWorkflowOptions", req,
                                           update_pb2.GetWorkflowOptionsResponse)

    def restart_stateless_job(self, job_id: str, version: str, restart_spec: stateless_pb2.RestartSpec,
                              *, opaque_data: str = "") -> svc.RestartJobResponse:
        """Restart pods of a job in batches (a RESTART workflow)."""
        req = svc.RestartJobRequest(job_id=_job(job_id), version=_version(version),
                                    restart_spec=restart_spec, opaque_data=_opaque(opaque_data))
        return self._stateless.call("RestartJob", req, svc.RestartJobResponse)

    def pause_workflow(self, job_id: str, version: str, *,
                       opaque_data: str = "") -> svc.PauseJobWorkflowResponse:
        """Pause the job's current workflow."""
        req = svc.PauseJobWorkflowRequest(job_id=_job(job_id), version=_version(version),
                                          opaque_data=_opaque(opaque_data))
        return self._stateless.call("PauseJobWorkflow", req, svc.PauseJobWorkflowResponse)

    def resume_workflow(self, job_id: str, version: str, *,
                        opaque_data: str = "") -> svc.ResumeJobWorkflowResponse:
        """Resume the job's paused workflow."""
        req = svc.ResumeJobWorkflowRequest(job_id=_job(job_id), version=_version(version),
                                           opaque_data=_opaque(opaque_data))
        return self._stateless.call("ResumeJobWorkflow", req, svc.ResumeJobWorkflowResponse)

    def abort_workflow(self, job_id: str, version: str, *,
                       opaque_data: str = "") -> svc.AbortJobWorkflowResponse:
        """Abort the job's current workflow, leaving pods as they are."""
        req = svc.AbortJobWorkflowRequest(job_id=_job(job_id), version=_version(version),
                                          opaque_data=_opaque(opaque_data))
        return self._stateless.call("AbortJobWorkflow", req, svc.AbortJobWorkflowResponse)

    def start_stateless_job(self, job_id: str, version: str) -> svc.StartJobResponse:
        """Start every pod of a stopped job."""
        req = svc.StartJobRequest(job_id=_job(job_id), version=_version(version))
        return self._stateless.call("StartJob", req, svc.StartJobResponse)

    def stop_stateless_job(self, job_id: str, version: str) -> svc.StopJobResponse:
        """Stop every pod of a job."""
        req = svc.StopJobRequest(job_id=_job(job_id), version=_version(version))
        return self._stateless.call("StopJob", req, svc.StopJobResponse)

    def delete_stateless_job(self, job_id: str, version: str, *,
                             force: bool = False) -> svc.DeleteJobResponse:
        """Delete a job (`force` stops it first)."""
        req = svc.DeleteJobRequest(job_id=_job(job_id), version=_version(version), force=force)
        return self._stateless.call("DeleteJob", req, svc.DeleteJobResponse)

    def get_stateless_job(self, job_id: str, *, version: str = "",
                          summary_only: bool = False) -> svc.GetJobResponse:
        """Spec and status of a job (a past spec when `version` is given)."""
        req = svc.GetJobRequest(job_id=_job(job_id), version=_version(version), summary_only=summary_only)
        return self._stateless.call("GetJob", req, svc.GetJobResponse)

    def get_job_id_from_name(self, name: str) -> svc.GetJobIDFromJobNameResponse:
        """IDs of the jobs called `name`, newest first."""
        req = svc.GetJobIDFromJobNameRequest(job_name=name)
        return self._stateless.call("GetJobIDFromJobName", req, svc.GetJobIDFromJobNameResponse)

    def get_workflow_events(self, job_id: str, instance_id: int, *,
                            limit: int = 0) -> svc.GetWorkflowEventsResponse:
        """Events of the latest workflow for one instance."""
        req = svc.GetWorkflowEventsRequest(job_id=_job(job_id), instance_id=instance_id, limit=limit)
        return self._stateless.call("GetWorkflowEvents", req, svc.GetWorkflowEventsResponse)

    def list_pods(self, job_id: str, rng: tuple[int, int] | None = None) -> Iterator[svc.ListPodsResponse]:
        """Summaries of a job's pods, streamed in batches."""
        req = svc.ListPodsRequest(job_id=_job(job_id))
        if rng is not None:
            req.range.CopyFrom(pod_pb2.InstanceIDRange(**{"from": rng[0], "to": rng[1]}))
        return self._stateless.stream("ListPods", req, svc.ListPodsResponse,
                                      timeout=self._stateless.transport.timeout)

    def query_pods(self, job_id: str, spec: pod_pb2.QuerySpec, *,
                   pagination: query_pb2.PaginationSpec | None = None,
                   summary_only: bool = False) -> svc.QueryPodsResponse:
        """Pods of a job matching `spec`; every one of them unless `spec` pages
        (Peloton's page without one is 10 pods)."""
        if not spec.HasField("pagination"):
            spec = _copy(spec)
            spec.pagination.limit = EVERYTHING
        req = svc.QueryPodsRequest(job_id=_job(job_id), spec=spec, pagination=pagination,
                                   summary_only=summary_only)
        return self._stateless.call("QueryPods", req, svc.QueryPodsResponse)

    def query_stateless_jobs(self, spec: stateless_pb2.QuerySpec) -> svc.QueryJobsResponse:
        """Job summaries matching `spec`; `pagination.total` counts every match unless
        `spec` sets a max_limit (Peloton's default counts 100)."""
        if not spec.pagination.max_limit:
            spec = _copy(spec)
            spec.pagination.max_limit = EVERYTHING
        return self._stateless.call("QueryJobs", svc.QueryJobsRequest(spec=spec), svc.QueryJobsResponse)

    def list_stateless_jobs(self) -> Iterator[svc.ListJobsResponse]:
        """Every job's summary, streamed in batches."""
        return self._stateless.stream("ListJobs", svc.ListJobsRequest(), svc.ListJobsResponse,
                                      timeout=self._stateless.transport.timeout)

    def list_job_workflows(self, job_id: str, *, updates_limit: int = 0,
                           instance_events: bool = False) -> svc.ListJobWorkflowsResponse:
        """The job's workflows, newest first."""
        req = svc.ListJobWorkflowsRequest(job_id=_job(job_id), updates_limit=updates_limit,
                                          instance_events=instance_events)
        return self._stateless.call("ListJobWorkflows", req, svc.ListJobWorkflowsResponse)

    def get_replace_job_diff(self, job_id: str, version: str,
                             spec: stateless_pb2.JobSpec) -> svc.GetReplaceJobDiffResponse:
        """Which instances a ReplaceJob to `spec` would add, remove, update or leave alone."""
        req = svc.GetReplaceJobDiffRequest(job_id=_job(job_id), version=_version(version), spec=spec)
        return self._stateless.call("GetReplaceJobDiff", req, svc.GetReplaceJobDiffResponse)

    def refresh_stateless_job(self, job_id: str) -> svc.RefreshJobResponse:
        """Reload a job from storage and re-run its goal-state actions."""
        return self._stateless.call("RefreshJob", svc.RefreshJobRequest(job_id=_job(job_id)),
                                    svc.RefreshJobResponse)

    def get_stateless_job_cache(self, job_id: str) -> svc.GetJobCacheResponse:
        """The job manager's in-memory view of a job."""
        return self._stateless.call("GetJobCache", svc.GetJobCacheRequest(job_id=_job(job_id)),
                                    svc.GetJobCacheResponse)

    # -- PodService ---------------------------------------------------------------------------
    def start_pod(self, name: str) -> pod_svc_pb2.StartPodResponse:
        """Start one pod (`<job-id>-<instance>`)."""
        return self._pods.call("StartPod", pod_svc_pb2.StartPodRequest(pod_name=_pod(name)),
                               pod_svc_pb2.StartPodResponse)

    def stop_pod(self, name: str) -> pod_svc_pb2.StopPodResponse:
        """Stop one pod."""
        return self._pods.call("StopPod", pod_svc_pb2.StopPodRequest(pod_name=_pod(name)),
                               pod_svc_pb2.StopPodResponse)

    def restart_pod(self, name: str) -> pod_svc_pb2.RestartPodResponse:
        """Restart one pod with a new run."""
        return self._pods.call("RestartPod", pod_svc_pb2.RestartPodRequest(pod_name=_pod(name)),
                               pod_svc_pb2.RestartPodResponse)

    def get_pod(self, name: str, *, status_only: bool = False, limit: int = 0) -> pod_svc_pb2.GetPodResponse:
        """The current run of a pod and up to `limit` earlier runs (0 = all)."""
        req = pod_svc_pb2.GetPodRequest(pod_name=_pod(name), status_only=status_only, limit=limit)
        return self._pods.call("GetPod", req, pod_svc_pb2.GetPodResponse)

    def get_pod_events_v1(self, name: str, *, pod_id: str = "") -> pod_svc_pb2.GetPodEventsResponse:
        """Events of one run of a pod (the latest when `pod_id` is empty)."""
        req = pod_svc_pb2.GetPodEventsRequest(pod_name=_pod(name), pod_id=_pod_id(pod_id))
        return self._pods.call("GetPodEvents", req, pod_svc_pb2.GetPodEventsResponse)

    def browse_pod_sandbox(self, name: str, *, pod_id: str = "") -> pod_svc_pb2.BrowsePodSandboxResponse:
        """Where a pod's sandbox lives (host, port) and the files in it."""
        req = pod_svc_pb2.BrowsePodSandboxRequest(pod_name=_pod(name), pod_id=_pod_id(pod_id))
        return self._pods.call("BrowsePodSandbox", req, pod_svc_pb2.BrowsePodSandboxResponse)

    def refresh_pod(self, name: str) -> pod_svc_pb2.RefreshPodResponse:
        """Reload a pod from storage and re-run its goal-state actions."""
        return self._pods.call("RefreshPod", pod_svc_pb2.RefreshPodRequest(pod_name=_pod(name)),
                               pod_svc_pb2.RefreshPodResponse)

    def get_pod_cache(self, name: str) -> pod_svc_pb2.GetPodCacheResponse:
        """The job manager's in-memory status of a pod."""
        return self._pods.call("GetPodCache", pod_svc_pb2.GetPodCacheRequest(pod_name=_pod(name)),
                               pod_svc_pb2.GetPodCacheResponse)

    def delete_pod_events(self, name: str, pod_id: str) -> pod_svc_pb2.DeletePodEventsResponse:
        """Delete the stored events of one run of a pod."""
        req = pod_svc_pb2.DeletePodEventsRequest(pod_name=_pod(name), pod_id=_pod_id(pod_id))
        return self._pods.call("DeletePodEvents", req, pod_svc_pb2.DeletePodEventsResponse)

    # -- WatchService and AdminService --------------------------------------------------------
    def watch_jobs(self, job_ids: Sequence[str] = (), labels: Iterable[tuple[str, str]] = (), *,
                   timeout: float | None = None) -> Iterator[watch_svc_pb2.WatchResponse]:
        """Stream changes of stateless jobs (all when `job_ids` is empty)."""
        flt = watch_pb2.StatelessJobFilter(job_ids=[_job(j) for j in job_ids],
                                           labels=[v1_pb2.Label(key=k, value=v) for k, v in labels])
        req = watch_svc_pb2.WatchRequest(stateless_job_filter=flt)
        return self._watch.stream("Watch", req, watch_svc_pb2.WatchResponse, timeout=timeout)

    def watch_pods(self, job_id: str = "", pod_names: Sequence[str] = (),
                   labels: Iterable[tuple[str, str]] = (), *,
                   timeout: float | None = None) -> Iterator[watch_svc_pb2.WatchResponse]:
        """Stream changes of pods (of one job, or of named pods in it)."""
        flt = watch_pb2.PodFilter(job_id=_job(job_id) if job_id else None,
                                  pod_names=[_pod(n) for n in pod_names],
                                  labels=[v1_pb2.Label(key=k, value=v) for k, v in labels])
        req = watch_svc_pb2.WatchRequest(pod_filter=flt)
        return self._watch.stream("Watch", req, watch_svc_pb2.WatchResponse, timeout=timeout)

    def cancel_watch(self, watch_id: str) -> watch_svc_pb2.CancelResponse:
        """End a watch stream started elsewhere."""
        return self._watch.call("Cancel", watch_svc_pb2.CancelRequest(watch_id=watch_id),
                                watch_svc_pb2.CancelResponse)

    def lockdown(self, components: Iterable[str]) -> admin_svc_pb2.LockdownResponse:
        """Lock down job manager components (admin.svc.Component names, e.g. `Write`)."""
        req = admin_svc_pb2.LockdownRequest(components=list(components))
        return self._admin.call("Lockdown", req, admin_svc_pb2.LockdownResponse)

    def remove_lockdown(self, components: Iterable[str]) -> admin_svc_pb2.RemoveLockdownResponse:
        """Lift a lockdown."""
        req = admin_svc_pb2.RemoveLockdownRequest(components=list(components))
        return self._admin.call("RemoveLockdown", req, admin_svc_pb2.RemoveLockdownResponse)
