"""The Peloton calls the bridge makes: a Protocol that the typed API client satisfies.

The signatures are those of `peloton.api.client.PelotonClient` (a subset),
so production code passes the real client and tests may pass an in-memory
fake with the same methods.  Responses are the generated protobuf messages;
failures are raised as peloton.core.errors (NotFound, InvalidArgument,
Conflict for a stale entity version, Unavailable, ...), which the bridge
maps to Aurora ResponseCodes in one place (responses.code_for).

* v1alpha stateless JobService (jobmgr): *_stateless_job, replace_job,
  *_workflow, get_job_id_from_name, query_pods, list_job_workflows,
  get_replace_job_diff;
* v1alpha PodService (jobmgr): stop_pod, get_pod, get_pod_events_v1;
* v0 ResourceManager (resmgr): lookup_respool_id, create_respool, get_respool, update_respool;
* v0 HostService (hostmgr): query_hosts, start_maintenance, complete_maintenance;
* CronService (jobmgr, our extension): *_cron_job(s);
* MaintenanceService (hostmgr, our extension): drain_hosts, end_maintenance;
* ForecastService (resmgr, our extension): forecast (getPendingReason's estimate);
* the host manager's Reconcile: reconcile_tasks.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from peloton.api.gen.peloton.api.v0.host.svc import host_svc_pb2
from peloton.api.gen.peloton.api.v0.respool import respool_pb2
from peloton.api.gen.peloton.api.v1alpha import peloton_pb2 as v1_pb2
from peloton.api.gen.peloton.api.v1alpha.job.stateless import stateless_pb2
from peloton.api.gen.peloton.api.v1alpha.job.stateless.svc import stateless_svc_pb2 as svc
from peloton.api.gen.peloton.api.v1alpha.pod import pod_pb2
from peloton.api.gen.peloton.api.v1alpha.pod.svc import pod_svc_pb2
from peloton.api.gen.peloton.api.v1alpha.query import query_pb2
from peloton.api.gen.pelotonpy.api.cron import cron_pb2
from peloton.api.gen.pelotonpy.api.maintenance import maintenance_pb2
from peloton.api.gen.pelotonpy.api.update import update_pb2
from peloton.core.forecast.model import Forecast


class PelotonPort(Protocol):
    """The subset of PelotonClient the Aurora bridge uses."""

    # v1alpha stateless JobService
    def create_stateless_job(self, spec: stateless_pb2.JobSpec, *, job_id: str = "",
                             create_spec: stateless_pb2.CreateSpec | None = None,
                             opaque_data: str = "", secrets: Sequence[v1_pb2.Secret] = (),
                             options: update_pb2.UpdateOptions | None = None,
                             ) -> svc.CreateJobResponse: ...
    def replace_job(self, job_id: str, version: str, spec: stateless_pb2.JobSpec,
                    update_spec: stateless_pb2.UpdateSpec, *, opaque_data: str = "",
                    options: update_pb2.UpdateOptions | None = None) -> svc.ReplaceJobResponse: ...
    def restart_stateless_job(self, job_id: str, version: str,
                              restart_spec: stateless_pb2.RestartSpec, *,
                              opaque_data: str = "") -> svc.RestartJobResponse: ...
    def pause_workflow(self, job_id: str, version: str, *,
                       opaque_data: str = "") -> svc.PauseJobWorkflowResponse: ...
    def resume_workflow(self, job_id: str, version: str, *,
                        opaque_data: str = "") -> svc.ResumeJobWorkflowResponse: ...
    def abort_workflow(self, job_id: str, version: str, *,
                       opaque_data: str = "") -> svc.AbortJobWorkflowResponse: ...
    def stop_stateless_job(self, job_id: str, version: str) -> svc.StopJobResponse: ...
    def get_stateless_job(self, job_id: str, *, version: str = "",
                          summary_only: bool = False) -> svc.GetJobResponse: ...
    def get_job_id_from_name(self, name: str) -> svc.GetJobIDFromJobNameResponse: ...
    def query_stateless_jobs(self, spec: stateless_pb2.QuerySpec) -> svc.QueryJobsResponse: ...
    def query_pods(self, job_id: str, spec: pod_pb2.QuerySpec, *,
                   pagination: query_pb2.PaginationSpec | None = None,
                   summary_only: bool = False) -> svc.QueryPodsResponse: ...
    def list_job_workflows(self, job_id: str, *, updates_limit: int = 0,
                           instance_events: bool = False) -> svc.ListJobWorkflowsResponse: ...
    def get_replace_job_diff(self, job_id: str, version: str,
                             spec: stateless_pb2.JobSpec) -> svc.GetReplaceJobDiffResponse: ...

    # v1alpha PodService
    def stop_pod(self, name: str) -> pod_svc_pb2.StopPodResponse: ...
    def get_pod(self, name: str, *, status_only: bool = False,
                limit: int = 0) -> pod_svc_pb2.GetPodResponse: ...
    def get_pod_events_v1(self, name: str, *, pod_id: str = "") -> pod_svc_pb2.GetPodEventsResponse: ...

    # v0 ResourceManager (embedded v0 errors are raised by the client)
    def lookup_respool_id(self, path: str) -> respool_pb2.LookupResponse: ...
    def create_respool(self, config: respool_pb2.ResourcePoolConfig) -> respool_pb2.CreateResponse: ...
    def get_respool(self, respool_id: str, *,
                    include_children: bool = False) -> respool_pb2.GetResponse: ...
    def update_respool(self, respool_id: str, config: respool_pb2.ResourcePoolConfig, *,
                       force: bool = False) -> respool_pb2.UpdateResponse: ...

    # v0 HostService
    def query_hosts(self, states: Iterable[str] = ()) -> host_svc_pb2.QueryHostsResponse: ...
    def start_maintenance(self, hostname: str) -> host_svc_pb2.StartMaintenanceResponse: ...
    def complete_maintenance(self, hostname: str) -> host_svc_pb2.CompleteMaintenanceResponse: ...

    # pelotonpy.api.maintenance.MaintenanceService (our extension, on the host manager)
    def drain_hosts(self, hostnames: Sequence[str],
                    drain: maintenance_pb2.DrainSpec) -> list[maintenance_pb2.HostDrain]: ...
    def end_maintenance(self, hostnames: Sequence[str]) -> list[maintenance_pb2.HostDrain]: ...

    # pelotonpy.api.forecast.ForecastService (our extension, on the resource manager)
    def forecast(self, job_id: str, instances: Sequence[int] = (), *, horizon_secs: float = 0.0,
                 wall_secs: float = 0.0, variations: int = 0,
                 duration_secs: float = 0.0) -> Forecast: ...

    # pelotonpy.api.cron.CronService (our extension, on the job manager)
    def schedule_cron_job(self, job: cron_pb2.CronJob, *,
                          mode: int = 0) -> cron_pb2.ScheduleCronJobResponse: ...
    def deschedule_cron_job(self, name: str) -> bool: ...
    def start_cron_job(self, name: str) -> str: ...
    def get_cron_job(self, name: str) -> cron_pb2.CronJob: ...
    def list_cron_jobs(self, name_prefix: str = "") -> list[cron_pb2.CronJob]: ...

    # task reconciliation with the host backends (the host manager's Reconcile)
    def reconcile_tasks(self, run_ids: Sequence[str] | None = None) -> None: ...
