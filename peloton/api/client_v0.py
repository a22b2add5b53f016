"""The v0 half of the typed client: jobs, tasks, resource pools, updates, hosts.

One thin method per RPC.  Each builds the request from plain arguments,
calls the daemon that serves it, raises the error a v0 response embeds
(see client_errors) and returns the response message unchanged.
Instance ranges are `(from, to)` pairs, half-open like Peloton's.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from google.protobuf.message import Message

from peloton.api.client_errors import raise_embedded
from peloton.api.client_transport import M, ServiceHandle
from peloton.api.convert.update_options import to_metadata
from peloton.api.gen.peloton.api.v0 import peloton_pb2
from peloton.api.gen.peloton.api.v0.host.svc import host_svc_pb2
from peloton.api.gen.peloton.api.v0.job import job_pb2
from peloton.api.gen.peloton.api.v0.respool import respool_pb2
from peloton.api.gen.peloton.api.v0.task import task_pb2
from peloton.api.gen.peloton.api.v0.update import update_pb2
from peloton.api.gen.peloton.api.v0.update.svc import update_svc_pb2
from peloton.api.gen.pelotonpy.api.update import update_pb2 as options_pb2

#: An instance range `[from, to)`.
Range = tuple[int, int]


def instance_range(r: Range) -> task_pb2.InstanceRange:
    """A v0 InstanceRange (`from` is a Python keyword, hence the dict)."""
    return task_pb2.InstanceRange(**{"from": r[0], "to": r[1]})


def _ranges(ranges: Iterable[Range]) -> list[task_pb2.InstanceRange]:
    return [instance_range(r) for r in ranges]


def _job(job_id: str) -> peloton_pb2.JobID:
    return peloton_pb2.JobID(value=job_id)


def _opaque(data: str) -> peloton_pb2.OpaqueData | None:
    return peloton_pb2.OpaqueData(data=data) if data else None


class V0Calls:
    """Methods of JobManager, TaskManager, ResourceManager, UpdateService and HostService."""

    _jobs: ServiceHandle
    _tasks: ServiceHandle
    _respools: ServiceHandle
    _updates: ServiceHandle
    _hosts: ServiceHandle

    # -- JobManager ---------------------------------------------------------------------------
    def create_job(self, config: job_pb2.JobConfig, *, job_id: str = "",
                   secrets: Sequence[peloton_pb2.Secret] = ()) -> job_pb2.CreateResponse:
        """Create a job (any type) from a v0 JobConfig; `job_id` is an optional UUID."""
        req = job_pb2.CreateRequest(id=_job(job_id), config=config, secrets=list(secrets))
        return self._checked(self._jobs, "Create", req, job_pb2.CreateResponse)

    def get_job(self, job_id: str) -> job_pb2.GetResponse:
        """Config and runtime of a job."""
        return self._checked(self._jobs, "Get", job_pb2.GetRequest(id=_job(job_id)), job_pb2.GetResponse)

    def query_jobs(self, spec: job_pb2.QuerySpec, *, respool_id: str = "",
                   summary_only: bool = True) -> job_pb2.QueryResponse:
        """Jobs matching `spec`, optionally only those in one resource pool;
        `pagination.total` counts every match unless `spec` sets a maxLimit (Peloton's
        default counts 100)."""
        req = job_pb2.QueryRequest(spec=spec, summaryOnly=summary_only)
        if not spec.pagination.maxLimit:
            req.spec.pagination.maxLimit = 2**32 - 1
        if respool_id:
            req.respoolID.value = respool_id
        return self._checked(self._jobs, "Query", req, job_pb2.QueryResponse)

    def delete_job(self, job_id: str) -> job_pb2.DeleteResponse:
        """Delete a terminal job."""
        req = job_pb2.DeleteRequest(id=_job(job_id))
        return self._checked(self._jobs, "Delete", req, job_pb2.DeleteResponse)

    def update_job(self, job_id: str, config: job_pb2.JobConfig) -> job_pb2.UpdateResponse:
        """Replace a batch job's config (adding instances)."""
        req = job_pb2.UpdateRequest(id=_job(job_id), config=config)
        return self._checked(self._jobs, "Update", req, job_pb2.UpdateResponse)

    def restart_job(self, job_id: str, *, ranges: Iterable[Range] = (), resource_version: int = 0,
                    batch_size: int = 0) -> job_pb2.RestartResponse:
        """Restart instances of a job, `batch_size` at a time (0 = all at once)."""
        req = job_pb2.RestartRequest(id=_job(job_id), ranges=_ranges(ranges),
                                     resourceVersion=resource_version,
                                     restartConfig=job_pb2.RestartConfig(batchSize=batch_size))
        return self._checked(self._jobs, "Restart", req, job_pb2.RestartResponse)

    def start_job(self, job_id: str, *, ranges: Iterable[Range] = (), resource_version: int = 0,
                  batch_size: int = 0) -> job_pb2.StartResponse:
        """Start stopped instances of a job."""
        req = job_pb2.StartRequest(id=_job(job_id), ranges=_ranges(ranges),
                                   resourceVersion=resource_version,
                                   startConfig=job_pb2.StartConfig(batchSize=batch_size))
        return self._checked(self._jobs, "Start", req, job_pb2.StartResponse)

    def stop_job(self, job_id: str, *, ranges: Iterable[Range] = (), resource_version: int = 0,
                 batch_size: int = 0) -> job_pb2.StopResponse:
        """Stop instances of a job through JobManager.Stop (the rolling variant)."""
        req = job_pb2.StopRequest(id=_job(job_id), ranges=_ranges(ranges),
                                  resourceVersion=resource_version,
                                  stopConfig=job_pb2.StopConfig(batchSize=batch_size))
        return self._checked(self._jobs, "Stop", req, job_pb2.StopResponse)

    def refresh_job(self, job_id: str) -> job_pb2.RefreshResponse:
        """Reload a job from storage and re-run its goal-state actions (debugging aid)."""
        req = job_pb2.RefreshRequest(id=_job(job_id))
        return self._checked(self._jobs, "Refresh", req, job_pb2.RefreshResponse)

    def get_job_cache(self, job_id: str) -> job_pb2.GetCacheResponse:
        """The job manager's in-memory view of a job."""
        req = job_pb2.GetCacheRequest(id=_job(job_id))
        return self._checked(self._jobs, "GetCache", req, job_pb2.GetCacheResponse)

    def get_active_jobs(self) -> job_pb2.GetActiveJobsResponse:
        """IDs of every non-terminal job."""
        req = job_pb2.GetActiveJobsRequest()
        return self._checked(self._jobs, "GetActiveJobs", req, job_pb2.GetActiveJobsResponse)

    # -- TaskManager --------------------------------------------------------------------------
    def get_task(self, job_id: str, instance_id: int) -> task_pb2.GetResponse:
        """The current run of one instance."""
        req = task_pb2.GetRequest(jobId=_job(job_id), instanceId=instance_id)
        return self._checked(self._tasks, "Get", req, task_pb2.GetResponse)

    def list_tasks(self, job_id: str, rng: Range | None = None) -> task_pb2.ListResponse:
        """Instances of a job, optionally only those in `rng` (empty when it has none yet).

        Peloton answers "no task in the range" with `notFound` even for a job
        that exists (say, one whose tasks are still being created); the job
        is then read to tell the two apart, and only an unknown job raises.
        """
        req = task_pb2.ListRequest(jobId=_job(job_id))
        if rng is not None:
            req.range.CopyFrom(instance_range(rng))
        response = self._tasks.call("List", req, task_pb2.ListResponse)
        if response.HasField("notFound"):
            self.get_job(job_id)  # NotFound for an unknown job
            return task_pb2.ListResponse()
        raise_embedded(response)
        return response

    def start_tasks(self, job_id: str, ranges: Iterable[Range] = ()) -> task_pb2.StartResponse:
        """Start instances (all when `ranges` is empty)."""
        req = task_pb2.StartRequest(jobId=_job(job_id), ranges=_ranges(ranges))
        return self._checked(self._tasks, "Start", req, task_pb2.StartResponse)

    def stop_tasks(self, job_id: str, ranges: Iterable[Range] = ()) -> task_pb2.StopResponse:
        """Stop instances (all when `ranges` is empty)."""
        req = task_pb2.StopRequest(jobId=_job(job_id), ranges=_ranges(ranges))
        return self._checked(self._tasks, "Stop", req, task_pb2.StopResponse)

    def restart_tasks(self, job_id: str, ranges: Iterable[Range] = ()) -> task_pb2.RestartResponse:
        """Restart instances (all when `ranges` is empty)."""
        req = task_pb2.RestartRequest(jobId=_job(job_id), ranges=_ranges(ranges))
        return self._checked(self._tasks, "Restart", req, task_pb2.RestartResponse)

    def query_tasks(self, job_id: str, spec: task_pb2.QuerySpec) -> task_pb2.QueryResponse:
        """Instances of a job matching `spec` (states, names, hosts, paging)."""
        req = task_pb2.QueryRequest(jobId=_job(job_id), spec=spec)
        return self._checked(self._tasks, "Query", req, task_pb2.QueryResponse)

    def browse_sandbox(self, job_id: str, instance_id: int,
                       task_id: str = "") -> task_pb2.BrowseSandboxResponse:
        """Where an instance's sandbox lives (host, port) and the files in it."""
        req = task_pb2.BrowseSandboxRequest(jobId=_job(job_id), instanceId=instance_id, taskId=task_id)
        return self._checked(self._tasks, "BrowseSandbox", req, task_pb2.BrowseSandboxResponse)

    def refresh_tasks(self, job_id: str, rng: Range | None = None) -> task_pb2.RefreshResponse:
        """Reload instances from storage and re-run their goal-state actions."""
        req = task_pb2.RefreshRequest(jobId=_job(job_id))
        if rng is not None:
            req.range.CopyFrom(instance_range(rng))
        return self._checked(self._tasks, "Refresh", req, task_pb2.RefreshResponse)

    def get_task_cache(self, job_id: str, instance_id: int) -> task_pb2.GetCacheResponse:
        """The job manager's in-memory view of one instance."""
        req = task_pb2.GetCacheRequest(jobId=_job(job_id), instanceId=instance_id)
        return self._checked(self._tasks, "GetCache", req, task_pb2.GetCacheResponse)

    def get_pod_events(self, job_id: str, instance_id: int, *, run_id: str = "",
                       limit: int = 0) -> task_pb2.GetPodEventsResponse:
        """State changes of an instance's runs, newest first."""
        req = task_pb2.GetPodEventsRequest(jobId=_job(job_id), instanceId=instance_id,
                                           runId=run_id, limit=limit)
        return self._checked(self._tasks, "GetPodEvents", req, task_pb2.GetPodEventsResponse)

    def delete_task_pod_events(self, job_id: str, instance_id: int,
                               run_id: int) -> task_pb2.DeletePodEventsResponse:
        """Delete the events of an instance's runs 1..`run_id` (the archiver's trim)."""
        req = task_pb2.DeletePodEventsRequest(jobId=_job(job_id), instanceId=instance_id, runId=run_id)
        return self._checked(self._tasks, "DeletePodEvents", req, task_pb2.DeletePodEventsResponse)

    # -- ResourceManager ----------------------------------------------------------------------
    def create_respool(self, config: respool_pb2.ResourcePoolConfig) -> respool_pb2.CreateResponse:
        """Create a pool; `config.parent` names its parent pool's ID."""
        req = respool_pb2.CreateRequest(config=config)
        return self._checked(self._respools, "CreateResourcePool", req, respool_pb2.CreateResponse)

    def get_respool(self, respool_id: str, *, include_children: bool = False) -> respool_pb2.GetResponse:
        """One pool's config and usage."""
        req = respool_pb2.GetRequest(id=peloton_pb2.ResourcePoolID(value=respool_id),
                                     includeChildPools=include_children)
        return self._checked(self._respools, "GetResourcePool", req, respool_pb2.GetResponse)

    def update_respool(self, respool_id: str, config: respool_pb2.ResourcePoolConfig, *,
                       force: bool = False) -> respool_pb2.UpdateResponse:
        """Replace a pool's config (`force` skips the server's validation)."""
        req = respool_pb2.UpdateRequest(id=peloton_pb2.ResourcePoolID(value=respool_id),
                                        config=config, Force=force)
        return self._checked(self._respools, "UpdateResourcePool", req, respool_pb2.UpdateResponse)

    def delete_respool(self, path: str) -> respool_pb2.DeleteResponse:
        """Delete an idle leaf pool by path."""
        req = respool_pb2.DeleteRequest(path=respool_pb2.ResourcePoolPath(value=path))
        return self._checked(self._respools, "DeleteResourcePool", req, respool_pb2.DeleteResponse)

    def lookup_respool_id(self, path: str) -> respool_pb2.LookupResponse:
        """The ID of the pool at `path` (e.g. `/DefaultResPool`); NotFound if none."""
        req = respool_pb2.LookupRequest(path=respool_pb2.ResourcePoolPath(value=path))
        return self._checked(self._respools, "LookupResourcePoolID", req, respool_pb2.LookupResponse)

    def query_respools(self) -> respool_pb2.QueryResponse:
        """Every pool with its config and usage."""
        req = respool_pb2.QueryRequest()
        return self._checked(self._respools, "Query", req, respool_pb2.QueryResponse)

    # -- UpdateService ------------------------------------------------------------------------
    def create_update(self, job_id: str, config: job_pb2.JobConfig, update_config: update_pb2.UpdateConfig,
                      *, opaque_data: str = "",
                      options: options_pb2.UpdateOptions | None = None,
                      ) -> update_svc_pb2.CreateUpdateResponse:
        """Start a rolling update of a job to `config` (its changeLog.version is compared-and-set),
        with our update `options` (strategy, watch time)."""
        req = update_svc_pb2.CreateUpdateRequest(jobId=_job(job_id), jobConfig=config,
                                                 updateConfig=update_config,
                                                 opaque_data=_opaque(opaque_data))
        return self._updates.call("CreateUpdate", req, update_svc_pb2.CreateUpdateResponse,
                                  metadata=(to_metadata(options),) if options is not None else ())

    def get_update(self, update_id: str, *, status_only: bool = False) -> update_svc_pb2.GetUpdateResponse:
        """An update's config and progress."""
        req = update_svc_pb2.GetUpdateRequest(updateId=peloton_pb2.UpdateID(value=update_id),
                                              statusOnly=status_only)
        return self._updates.call("GetUpdate", req, update_svc_pb2.GetUpdateResponse)

    def list_updates(self, job_id: str, *, limit: int = 0) -> update_svc_pb2.ListUpdatesResponse:
        """Updates of a job, newest first."""
        req = update_svc_pb2.ListUpdatesRequest(jobID=_job(job_id), limit=limit)
        return self._updates.call("ListUpdates", req, update_svc_pb2.ListUpdatesResponse)

    def get_update_cache(self, update_id: str) -> update_svc_pb2.GetUpdateCacheResponse:
        """The job manager's in-memory view of an update."""
        req = update_svc_pb2.GetUpdateCacheRequest(updateId=peloton_pb2.UpdateID(value=update_id))
        return self._updates.call("GetUpdateCache", req, update_svc_pb2.GetUpdateCacheResponse)

    def pause_update(self, update_id: str, *, opaque_data: str = "") -> update_svc_pb2.PauseUpdateResponse:
        """Pause an update; instances in flight finish."""
        req = update_svc_pb2.PauseUpdateRequest(updateId=peloton_pb2.UpdateID(value=update_id),
                                                opaque_data=_opaque(opaque_data))
        return self._updates.call("PauseUpdate", req, update_svc_pb2.PauseUpdateResponse)

    def resume_update(self, update_id: str, *, opaque_data: str = "") -> update_svc_pb2.ResumeUpdateResponse:
        """Resume a paused update."""
        req = update_svc_pb2.ResumeUpdateRequest(updateId=peloton_pb2.UpdateID(value=update_id),
                                                 opaque_data=_opaque(opaque_data))
        return self._updates.call("ResumeUpdate", req, update_svc_pb2.ResumeUpdateResponse)

    def rollback_update(self, update_id: str) -> update_svc_pb2.RollbackUpdateResponse:
        """Roll an update back to the previous config."""
        req = update_svc_pb2.RollbackUpdateRequest(updateId=peloton_pb2.UpdateID(value=update_id))
        return self._updates.call("RollbackUpdate", req, update_svc_pb2.RollbackUpdateResponse)

    def abort_update(self, update_id: str, *, opaque_data: str = "") -> update_svc_pb2.AbortUpdateResponse:
        """Abort an update, leaving instances as they are."""
        req = update_svc_pb2.AbortUpdateRequest(updateId=peloton_pb2.UpdateID(value=update_id),
                                                opaque_data=_opaque(opaque_data))
        return self._updates.call("AbortUpdate", req, update_svc_pb2.AbortUpdateResponse)

    # -- HostService --------------------------------------------------------------------------
    def query_hosts(self, states: Iterable[str] = ()) -> host_svc_pb2.QueryHostsResponse:
        """Hosts in any of `states` (HostState names such as HOST_STATE_DOWN; all when empty)."""
        req = host_svc_pb2.QueryHostsRequest(host_states=list(states))
        return self._hosts.call("QueryHosts", req, host_svc_pb2.QueryHostsResponse)

    def start_maintenance(self, hostname: str) -> host_svc_pb2.StartMaintenanceResponse:
        """Drain a host and take it down (UP → DRAINING → DRAINED → DOWN)."""
        req = host_svc_pb2.StartMaintenanceRequest(hostname=hostname)
        return self._hosts.call("StartMaintenance", req, host_svc_pb2.StartMaintenanceResponse)

    def complete_maintenance(self, hostname: str) -> host_svc_pb2.CompleteMaintenanceResponse:
        """Bring a host in maintenance back UP."""
        req = host_svc_pb2.CompleteMaintenanceRequest(hostname=hostname)
        return self._hosts.call("CompleteMaintenance", req, host_svc_pb2.CompleteMaintenanceResponse)

    # -----------------------------------------------------------------------------------------
    @staticmethod
    def _checked(handle: ServiceHandle, method: str, request: Message, response_type: type[M]) -> M:
        response = handle.call(method, request, response_type)
        raise_embedded(response)
        return response
