"""An in-memory Peloton that answers the Aurora bridge's calls like the real daemons.

`FakePeloton` has the methods of `aurorabridge.ports.PelotonPort` (the typed
client's signatures): handler tests use it directly, and
`fake_peloton_grpc.serve` puts it behind real gRPC servicers so the bridge
talks to it through the real client.  Behaviour: fake_peloton_state.py.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from peloton.api.gen.peloton.api.v0 import peloton_pb2 as v0_peloton
from peloton.api.gen.peloton.api.v0.host import host_pb2
from peloton.api.gen.peloton.api.v0.host.svc import host_svc_pb2
from peloton.api.gen.peloton.api.v0.respool import respool_pb2
from peloton.api.gen.peloton.api.v1alpha import peloton_pb2
from peloton.api.gen.peloton.api.v1alpha.job.stateless import stateless_pb2 as sl
from peloton.api.gen.peloton.api.v1alpha.job.stateless.svc import stateless_svc_pb2 as svc
from peloton.api.gen.peloton.api.v1alpha.pod import pod_pb2
from peloton.api.gen.peloton.api.v1alpha.pod.svc import pod_svc_pb2
from peloton.api.gen.peloton.api.v1alpha.query import query_pb2
from peloton.api.gen.pelotonpy.api.maintenance import maintenance_pb2
from peloton.core.errors import AlreadyExists, InvalidArgument, NotFound, Unavailable
from peloton.core.forecast.model import Forecast
from tests.harness.fake_peloton_cron import FakeCron
from tests.harness.fake_peloton_state import TERMINAL_WORKFLOWS, FakeJob, FakeState, now


class FakePeloton(FakeCron, FakeState):
    """Jobs, pods, workflows, pools, hosts and cron jobs in memory."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cron: dict[str, Any] = {}

    # -- stateless JobService -----------------------------------------------------------------
    def create_stateless_job(
        self,
        spec: Any,
        *,
        job_id: str = "",
        create_spec: Any = None,
        opaque_data: str = "",
        secrets: Sequence[Any] = (),
        options: Any = None,
    ) -> Any:
        self.record("create_stateless_job", spec=spec, create_spec=create_spec, opaque_data=opaque_data,
                    options=options)
        with self._lock:
            job_id = job_id or str(uuid.uuid4())
            stored = sl.JobSpec()
            stored.CopyFrom(spec)
            job = FakeJob(job_id, stored, {1: stored})
            self.jobs[job_id] = job
            self.names.setdefault(spec.name, []).insert(0, job_id)
            for i in range(spec.instance_count):
                self._launch(job, i, stored)
            paused = bool(create_spec is not None and create_spec.start_paused)
            update = sl.UpdateSpec(
                batch_size=create_spec.batch_size if create_spec else 0,
                max_instance_retries=create_spec.max_instance_retries if create_spec else 0,
                max_tolerable_instance_failures=(
                    create_spec.max_tolerable_instance_failures if create_spec else 0
                ),
            )
            self._workflow(
                job,
                sl.WORKFLOW_TYPE_UPDATE,
                paused,
                update,
                opaque_data,
                "0-0-0",
                list(range(spec.instance_count)),
                [],
                [],
            )
            return svc.CreateJobResponse(
                job_id=peloton_pb2.JobID(value=job_id), version=peloton_pb2.EntityVersion(value=job.version)
            )

    def replace_job(
        self, job_id: str, version: str, spec: Any, update_spec: Any, *, opaque_data: str = "",
        options: Any = None
    ) -> Any:
        self.record(
            "replace_job",
            job_id=job_id,
            version=version,
            spec=spec,
            update_spec=update_spec,
            opaque_data=opaque_data,
            options=options,
        )
        with self._lock:
            job = self._job(job_id)
            self._check(job, version)
            old, prev = job.spec, job.version
            stored = sl.JobSpec()
            stored.CopyFrom(spec)
            job.config += 1
            job.spec = stored
            job.specs[job.config] = stored
            added = [i for i in range(stored.instance_count) if i >= old.instance_count]
            removed = [i for i in range(old.instance_count) if i >= stored.instance_count]
            updated = [
                i
                for i in range(min(old.instance_count, stored.instance_count))
                if job.pod_spec(old, i) != job.pod_spec(stored, i)
            ]
            if update_spec.start_pods:
                job.desired_state = sl.JOB_STATE_RUNNING
            for i in added + updated:
                self._launch(job, i, stored)
            for i in range(stored.instance_count):
                stopped = job.pods[i].status.state == pod_pb2.POD_STATE_KILLED
                if update_spec.start_pods and stopped and i not in added + updated:
                    self._launch(job, i, stored)
            for i in removed:
                self._kill(job, i)
                del job.pods[i]
            self._workflow(
                job,
                sl.WORKFLOW_TYPE_UPDATE,
                update_spec.start_paused,
                update_spec,
                opaque_data,
                prev,
                added,
                updated,
                removed,
            )
            return svc.ReplaceJobResponse(version=peloton_pb2.EntityVersion(value=job.version))

    def restart_stateless_job(
        self, job_id: str, version: str, restart_spec: Any, *, opaque_data: str = ""
    ) -> Any:
        self.record("restart_stateless_job", job_id=job_id, version=version, restart_spec=restart_spec)
        with self._lock:
            job = self._job(job_id)
            self._check(job, version)
            ids = [i for r in restart_spec.ranges for i in range(getattr(r, "from"), r.to) if i in job.pods]
            for i in ids:
                self._launch(job, i, job.spec)
            prev = job.version
            job.workflow_version += 1
            self._workflow(
                job, sl.WORKFLOW_TYPE_RESTART, False, sl.UpdateSpec(), opaque_data, prev, [], ids, []
            )
            return svc.RestartJobResponse(version=peloton_pb2.EntityVersion(value=job.version))

    def _workflow_call(
        self, method: str, job_id: str, version: str, opaque_data: str, state: sl.WorkflowState
    ) -> Any:
        self.record(method, job_id=job_id, version=version, opaque_data=opaque_data)
        with self._lock:
            job = self._job(job_id)
            self._check(job, version)
            if not job.workflows or job.workflows[-1].status.state in TERMINAL_WORKFLOWS:
                raise InvalidArgument("no active workflow")
            self._set_workflow_state(job, state, opaque_data or None)
            return job.version

    def pause_workflow(self, job_id: str, version: str, *, opaque_data: str = "") -> Any:
        v = self._workflow_call("pause_workflow", job_id, version, opaque_data, sl.WORKFLOW_STATE_PAUSED)
        return svc.PauseJobWorkflowResponse(version=peloton_pb2.EntityVersion(value=v))

    def resume_workflow(self, job_id: str, version: str, *, opaque_data: str = "") -> Any:
        v = self._workflow_call(
            "resume_workflow", job_id, version, opaque_data, sl.WORKFLOW_STATE_ROLLING_FORWARD
        )
        return svc.ResumeJobWorkflowResponse(version=peloton_pb2.EntityVersion(value=v))

    def abort_workflow(self, job_id: str, version: str, *, opaque_data: str = "") -> Any:
        v = self._workflow_call("abort_workflow", job_id, version, opaque_data, sl.WORKFLOW_STATE_ABORTED)
        return svc.AbortJobWorkflowResponse(version=peloton_pb2.EntityVersion(value=v))

    def stop_stateless_job(self, job_id: str, version: str) -> Any:
        self.record("stop_stateless_job", job_id=job_id, version=version)
        with self._lock:
            job = self._job(job_id)
            self._check(job, version)
            job.desired_state = sl.JOB_STATE_KILLED
            job.desired += 1
            for i in job.pods:
                self._kill(job, i)
            return svc.StopJobResponse(version=peloton_pb2.EntityVersion(value=job.version))

    def get_stateless_job(self, job_id: str, *, version: str = "", summary_only: bool = False) -> Any:
        self.record("get_stateless_job", job_id=job_id, version=version)
        with self._lock:
            job = self._job(job_id)
            spec = job.spec
            if version:
                config = int(version.split("-", 1)[0])
                if config not in job.specs:
                    raise NotFound(f"job {job_id} has no configuration version {config}")
                spec = job.specs[config]
            info = sl.JobInfo(job_id=peloton_pb2.JobID(value=job_id), spec=spec, status=self._status(job))
            resp = svc.GetJobResponse(job_info=info)
            if job.workflows:
                resp.workflow_info.CopyFrom(job.workflows[-1])
            return resp

    def get_job_id_from_name(self, name: str) -> Any:
        self.record("get_job_id_from_name", name=name)
        with self._lock:
            ids = self.names.get(name)
            if not ids:
                raise NotFound(f"job with name {name} not found")
            return svc.GetJobIDFromJobNameResponse(job_id=[peloton_pb2.JobID(value=i) for i in ids])

    def query_stateless_jobs(self, spec: Any) -> Any:
        self.record("query_stateless_jobs", spec=spec)
        with self._lock:
            wanted = {(lab.key, lab.value) for lab in spec.labels}
            matches = [j for j in self.jobs.values() if wanted <= j.label_set]
            offset, limit = spec.pagination.offset, spec.pagination.limit or len(matches)
            records = [
                sl.JobSummary(
                    job_id=peloton_pb2.JobID(value=j.job_id),
                    name=j.spec.name,
                    owner=j.spec.owner,
                    labels=j.spec.labels,
                    instance_count=j.spec.instance_count,
                    respool_id=j.spec.respool_id,
                    status=self._status(j),
                    sla=j.spec.sla,
                )
                for j in matches[offset : offset + limit]
            ]
            return svc.QueryJobsResponse(
                records=records,
                pagination=query_pb2.Pagination(offset=offset, limit=limit, total=len(matches)),
            )

    def query_pods(
        self, job_id: str, spec: Any, *, pagination: Any = None, summary_only: bool = False
    ) -> Any:
        self.record("query_pods", job_id=job_id, spec=spec)
        with self._lock:
            job = self._job(job_id)
            names = {n.value for n in spec.names}
            pods = [
                p
                for _, p in sorted(job.pods.items())
                if (not spec.pod_states or p.status.state in spec.pod_states)
                and (not names or p.spec.pod_name.value in names)
                and (not spec.hosts or p.status.host in spec.hosts)
            ]
            if summary_only:  # statuses only, as Peloton answers
                pods = [pod_pb2.PodInfo(status=p.status) for p in pods]
            return svc.QueryPodsResponse(pods=pods)

    def list_job_workflows(
        self, job_id: str, *, updates_limit: int = 0, instance_events: bool = False
    ) -> Any:
        self.record("list_job_workflows", job_id=job_id, updates_limit=updates_limit)
        with self._lock:
            workflows = list(reversed(self._job(job_id).workflows))[: updates_limit or None]
            return svc.ListJobWorkflowsResponse(workflow_infos=workflows)

    def get_replace_job_diff(self, job_id: str, version: str, spec: Any) -> Any:
        self.record("get_replace_job_diff", job_id=job_id, version=version, spec=spec)
        with self._lock:
            job = self._job(job_id)
            self._check(job, version)
            old = job.spec
            common = range(min(old.instance_count, spec.instance_count))
            updated = [i for i in common if job.pod_spec(old, i) != job.pod_spec(spec, i)]
            return svc.GetReplaceJobDiffResponse(
                instances_added=_ranges(range(old.instance_count, spec.instance_count)),
                instances_removed=_ranges(range(spec.instance_count, old.instance_count)),
                instances_updated=_ranges(updated),
                instances_unchanged=_ranges([i for i in common if i not in updated]),
            )

    # -- PodService ---------------------------------------------------------------------------
    def _pod(self, name: str) -> tuple[FakeJob, int]:
        job_id, _, instance = name.rpartition("-")
        job = self._job(job_id)
        if not instance.isdigit() or int(instance) not in job.pods:
            raise NotFound(f"pod {name} not found")
        return job, int(instance)

    def stop_pod(self, name: str) -> Any:
        self.record("stop_pod", name=name)
        with self._lock:
            job, instance = self._pod(name)
            self._kill(job, instance)
            return pod_svc_pb2.StopPodResponse()

    def get_pod(self, name: str, *, status_only: bool = False, limit: int = 0) -> Any:
        self.record("get_pod", name=name, limit=limit)
        with self._lock:
            job, instance = self._pod(name)
            previous = job.history.get(instance, [])[: max(0, limit - 1) if limit else None]
            return pod_svc_pb2.GetPodResponse(current=job.pods[instance], previous=previous)

    def get_pod_events_v1(self, name: str, *, pod_id: str = "") -> Any:
        self.record("get_pod_events_v1", name=name, pod_id=pod_id)
        with self._lock:
            job, instance = self._pod(name)
            status = job.pods[instance].status
            events = [
                pod_pb2.PodEvent(
                    pod_id=status.pod_id,
                    actual_state=pod_pb2.PodState.Name(s),
                    timestamp=status.start_time,
                    hostname=status.host,
                    message=m,
                )
                for s, m in ((status.state, status.message), (pod_pb2.POD_STATE_PENDING, "queued"))
            ]
            return pod_svc_pb2.GetPodEventsResponse(events=events)

    # -- v0 ResourceManager and HostService ---------------------------------------------------
    def lookup_respool_id(self, path: str) -> Any:
        self.record("lookup_respool_id", path=path)
        with self._lock:
            for pool in self.pools.values():
                if pool.path.value == path:
                    return respool_pb2.LookupResponse(id=pool.id)
            raise NotFound(f"resource pool {path} not found")

    def create_respool(self, config: Any) -> Any:
        self.record("create_respool", config=config)
        with self._lock:
            parent = self.pools[config.parent.value]
            path = parent.path.value.rstrip("/") + "/" + config.name
            if any(p.path.value == path for p in self.pools.values()):
                raise AlreadyExists(f"resource pool {path} already exists")
            pool_id = str(uuid.uuid4())
            self.pools[pool_id] = respool_pb2.ResourcePoolInfo(
                id=v0_peloton.ResourcePoolID(value=pool_id),
                config=config,
                parent=config.parent,
                path=respool_pb2.ResourcePoolPath(value=path),
            )
            parent.children.add(value=pool_id)
            return respool_pb2.CreateResponse(result=v0_peloton.ResourcePoolID(value=pool_id))

    def get_respool(self, respool_id: str, *, include_children: bool = False) -> Any:
        self.record("get_respool", respool_id=respool_id)
        with self._lock:
            if respool_id not in self.pools:
                raise NotFound(f"resource pool {respool_id} not found")
            return respool_pb2.GetResponse(poolinfo=self.pools[respool_id])

    def update_respool(self, respool_id: str, config: Any, *, force: bool = False) -> Any:
        self.record("update_respool", respool_id=respool_id, config=config)
        with self._lock:
            self.pools[respool_id].config.CopyFrom(config)
            return respool_pb2.UpdateResponse()

    def query_hosts(self, states: Iterable[str] = ()) -> Any:
        self.record("query_hosts")
        with self._lock:
            return host_svc_pb2.QueryHostsResponse(
                host_infos=[host_pb2.HostInfo(hostname=h, state=s) for h, s in sorted(self.hosts.items())]
            )

    def start_maintenance(self, hostname: str) -> Any:
        self.record("start_maintenance", hostname=hostname)
        with self._lock:
            self.hosts[hostname] = host_pb2.HOST_STATE_DRAINING
            return host_svc_pb2.StartMaintenanceResponse(hostname=hostname)

    def complete_maintenance(self, hostname: str) -> Any:
        """v0 CompleteMaintenance: as Peloton, only a DOWN host comes back UP."""
        self.record("complete_maintenance", hostname=hostname)
        with self._lock:
            if self.hosts.get(hostname, host_pb2.HOST_STATE_UP) not in (
                    host_pb2.HOST_STATE_DOWN, host_pb2.HOST_STATE_UP):
                raise NotFound("Host is not DOWN")
            self.hosts[hostname] = host_pb2.HOST_STATE_UP
            self.drains.pop(hostname, None)
            return host_svc_pb2.CompleteMaintenanceResponse(hostname=hostname)

    def forecast(self, job_id: str, instances: Sequence[int] = (), *, horizon_secs: float = 0.0,
                 wall_secs: float = 0.0, variations: int = 0,
                 duration_secs: float = 0.0) -> Forecast:
        """ForecastService.Forecast: the canned `forecasts[job_id]`, else Unavailable (a
        cluster without the forecast: callers must do without it)."""
        self.record("forecast", job_id=job_id, instances=list(instances), wall_secs=wall_secs)
        with self._lock:
            got: Forecast | None = self.forecasts.get(job_id)
        if got is None:
            raise Unavailable("no forecast in the fake")
        return got

    def drain_hosts(self, hostnames: Sequence[str], drain: Any) -> list[Any]:
        """MaintenanceService.DrainHosts: every host DRAINING with `drain` (kept in `drains`)."""
        self.record("drain_hosts", hostnames=list(hostnames), drain=drain)
        with self._lock:
            unknown = [h for h in hostnames if h not in self.hosts]
            if unknown:
                raise NotFound(f"hosts not known to the host manager: {', '.join(unknown)}")
            out = []
            for name in hostnames:
                if self.hosts[name] == host_pb2.HOST_STATE_UP:
                    self.hosts[name] = host_pb2.HOST_STATE_DRAINING
                self.drains[name] = drain
                out.append(maintenance_pb2.HostDrain(hostname=name, drain=drain))
            return out


    def end_maintenance(self, hostnames: Sequence[str]) -> list[Any]:
        """MaintenanceService.EndMaintenance: every host UP from any state, its drain forgotten."""
        self.record("end_maintenance", hostnames=list(hostnames))
        with self._lock:
            unknown = [h for h in hostnames if h not in self.hosts]
            if unknown:
                raise NotFound(f"hosts not known to the host manager: {', '.join(unknown)}")
            for name in hostnames:
                self.hosts[name] = host_pb2.HOST_STATE_UP
                self.drains.pop(name, None)
            return [maintenance_pb2.HostDrain(hostname=n, state="HOST_STATE_UP") for n in hostnames]


def _ranges(ids: Iterable[int]) -> list[Any]:
    from tests.harness.fake_peloton_state import inclusive

    return inclusive(list(ids))


__all__ = ["FakePeloton", "now"]
