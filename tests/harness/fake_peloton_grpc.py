"""Serve a FakePeloton over real gRPC, at the paths and with the error forms Peloton uses.

`serve(fake)` starts a GrpcServer on 127.0.0.1 and a free port with the
v1alpha JobService and PodService, the v0 ResourceManager and HostService, and our
CronService and MaintenanceService
(through peloton.api.service_registry, so PelotonErrors become the status
codes our daemons use, and the v0 respool service also answers at its legacy
path).  v0 respool failures are embedded in the response, as Peloton does.
A test swaps this for a real cluster by pointing the bridge elsewhere.
"""

from __future__ import annotations

from typing import Any

from peloton.api.gen.peloton.api.v0.host.svc import host_svc_pb2_grpc
from peloton.api.gen.peloton.api.v0.respool import respool_pb2, respool_pb2_grpc
from peloton.api.gen.peloton.api.v1alpha.job.stateless.svc import stateless_svc_pb2_grpc as job_grpc
from peloton.api.gen.peloton.api.v1alpha.pod.svc import pod_svc_pb2_grpc as pod_grpc
from peloton.api.gen.pelotonpy.api.cron import cron_pb2, cron_pb2_grpc
from peloton.api.gen.pelotonpy.api.maintenance import maintenance_pb2, maintenance_pb2_grpc
from peloton.api.grpc_server import GrpcServer
from peloton.api.service_registry import register
from peloton.core.errors import AlreadyExists, NotFound
from tests.harness.fake_peloton import FakePeloton


class _Jobs(job_grpc.JobServiceServicer):  # type: ignore[misc]
    def __init__(self, fake: FakePeloton) -> None:
        self.f = fake

    def CreateJob(self, r: Any, ctx: Any) -> Any:
        return self.f.create_stateless_job(
            r.spec,
            job_id=r.job_id.value,
            create_spec=r.create_spec if r.HasField("create_spec") else None,
            opaque_data=r.opaque_data.data,
        )

    def ReplaceJob(self, r: Any, ctx: Any) -> Any:
        return self.f.replace_job(
            r.job_id.value, r.version.value, r.spec, r.update_spec, opaque_data=r.opaque_data.data
        )

    def RestartJob(self, r: Any, ctx: Any) -> Any:
        return self.f.restart_stateless_job(
            r.job_id.value, r.version.value, r.restart_spec, opaque_data=r.opaque_data.data
        )

    def PauseJobWorkflow(self, r: Any, ctx: Any) -> Any:
        return self.f.pause_workflow(r.job_id.value, r.version.value, opaque_data=r.opaque_data.data)

    def ResumeJobWorkflow(self, r: Any, ctx: Any) -> Any:
        return self.f.resume_workflow(r.job_id.value, r.version.value, opaque_data=r.opaque_data.data)

    def AbortJobWorkflow(self, r: Any, ctx: Any) -> Any:
        return self.f.abort_workflow(r.job_id.value, r.version.value, opaque_data=r.opaque_data.data)

    def StopJob(self, r: Any, ctx: Any) -> Any:
        return self.f.stop_stateless_job(r.job_id.value, r.version.value)

    def GetJob(self, r: Any, ctx: Any) -> Any:
        return self.f.get_stateless_job(r.job_id.value, version=r.version.value, summary_only=r.summary_only)

    def GetJobIDFromJobName(self, r: Any, ctx: Any) -> Any:
        return self.f.get_job_id_from_name(r.job_name)

    def QueryPods(self, r: Any, ctx: Any) -> Any:
        return self.f.query_pods(r.job_id.value, r.spec, summary_only=r.summary_only)

    def QueryJobs(self, r: Any, ctx: Any) -> Any:
        return self.f.query_stateless_jobs(r.spec)

    def ListJobWorkflows(self, r: Any, ctx: Any) -> Any:
        return self.f.list_job_workflows(
            r.job_id.value, updates_limit=r.updates_limit, instance_events=r.instance_events
        )

    def GetReplaceJobDiff(self, r: Any, ctx: Any) -> Any:
        return self.f.get_replace_job_diff(r.job_id.value, r.version.value, r.spec)


class _Pods(pod_grpc.PodServiceServicer):  # type: ignore[misc]
    def __init__(self, fake: FakePeloton) -> None:
        self.f = fake

    def StopPod(self, r: Any, ctx: Any) -> Any:
        return self.f.stop_pod(r.pod_name.value)

    def GetPod(self, r: Any, ctx: Any) -> Any:
        return self.f.get_pod(r.pod_name.value, status_only=r.status_only, limit=r.limit)

    def GetPodEvents(self, r: Any, ctx: Any) -> Any:
        return self.f.get_pod_events_v1(r.pod_name.value, pod_id=r.pod_id.value)


class _Pools(respool_pb2_grpc.ResourceManagerServicer):  # type: ignore[misc]
    def __init__(self, fake: FakePeloton) -> None:
        self.f = fake

    def LookupResourcePoolID(self, r: Any, ctx: Any) -> Any:
        try:
            return self.f.lookup_respool_id(r.path.value)
        except NotFound as exc:
            err = respool_pb2.LookupResponse.Error(
                notFound=respool_pb2.ResourcePoolPathNotFound(path=r.path, message=exc.message)
            )
            return respool_pb2.LookupResponse(error=err)

    def CreateResourcePool(self, r: Any, ctx: Any) -> Any:
        try:
            return self.f.create_respool(r.config)
        except AlreadyExists as exc:
            err = respool_pb2.CreateResponse.Error(
                alreadyExists=respool_pb2.ResourcePoolAlreadyExists(message=exc.message)
            )
            return respool_pb2.CreateResponse(error=err)

    def GetResourcePool(self, r: Any, ctx: Any) -> Any:
        try:
            return self.f.get_respool(r.id.value)
        except NotFound as exc:
            err = respool_pb2.GetResponse.Error(
                notFound=respool_pb2.ResourcePoolNotFound(id=r.id, message=exc.message)
            )
            return respool_pb2.GetResponse(error=err)

    def UpdateResourcePool(self, r: Any, ctx: Any) -> Any:
        return self.f.update_respool(r.id.value, r.config, force=r.Force)


class _Hosts(host_svc_pb2_grpc.HostServiceServicer):  # type: ignore[misc]
    def __init__(self, fake: FakePeloton) -> None:
        self.f = fake

    def QueryHosts(self, r: Any, ctx: Any) -> Any:
        return self.f.query_hosts(r.host_states)

    def StartMaintenance(self, r: Any, ctx: Any) -> Any:
        return self.f.start_maintenance(r.hostname)

    def CompleteMaintenance(self, r: Any, ctx: Any) -> Any:
        return self.f.complete_maintenance(r.hostname)


class _Maintenance(maintenance_pb2_grpc.MaintenanceServiceServicer):  # type: ignore[misc]
    def __init__(self, fake: FakePeloton) -> None:
        self.f = fake

    def DrainHosts(self, r: Any, ctx: Any) -> Any:
        return maintenance_pb2.DrainHostsResponse(hosts=self.f.drain_hosts(list(r.hostnames), r.drain))

    def EndMaintenance(self, r: Any, ctx: Any) -> Any:
        return maintenance_pb2.EndMaintenanceResponse(hosts=self.f.end_maintenance(list(r.hostnames)))


class _Cron(cron_pb2_grpc.CronServiceServicer):  # type: ignore[misc]
    def __init__(self, fake: FakePeloton) -> None:
        self.f = fake

    def ScheduleCronJob(self, r: Any, ctx: Any) -> Any:
        return self.f.schedule_cron_job(r.job, mode=r.mode)

    def DescheduleCronJob(self, r: Any, ctx: Any) -> Any:
        return cron_pb2.DescheduleCronJobResponse(existed=self.f.deschedule_cron_job(r.name))

    def StartCronJob(self, r: Any, ctx: Any) -> Any:
        return cron_pb2.StartCronJobResponse(run_job_id=self.f.start_cron_job(r.name))

    def GetCronJob(self, r: Any, ctx: Any) -> Any:
        return cron_pb2.GetCronJobResponse(job=self.f.get_cron_job(r.name))

    def ListCronJobs(self, r: Any, ctx: Any) -> Any:
        return cron_pb2.ListCronJobsResponse(jobs=self.f.list_cron_jobs(r.name_prefix))


def serve(fake: FakePeloton) -> GrpcServer:
    """A started GrpcServer on 127.0.0.1 serving `fake`; its address is `127.0.0.1:<server.port>`."""
    server = GrpcServer("127.0.0.1:0", max_workers=32)
    register(server, job_grpc.add_JobServiceServicer_to_server, _Jobs(fake))
    register(server, pod_grpc.add_PodServiceServicer_to_server, _Pods(fake))
    register(server, respool_pb2_grpc.add_ResourceManagerServicer_to_server, _Pools(fake))
    register(server, host_svc_pb2_grpc.add_HostServiceServicer_to_server, _Hosts(fake))
    register(server, cron_pb2_grpc.add_CronServiceServicer_to_server, _Cron(fake))
    register(server, maintenance_pb2_grpc.add_MaintenanceServiceServicer_to_server,
             _Maintenance(fake))
    server.start()
    return server
