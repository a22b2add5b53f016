"""State and internals of the fake Peloton (see fake_peloton.py for the calls).

Semantics follow Peloton's job manager where the Aurora bridge depends on them:

* entity versions `<config>-<desired state>-<workflow>` are compare-and-set
  tokens: a write with a stale one raises Conflict (gRPC ABORTED);
* CreateJob / ReplaceJob start an UPDATE workflow (paused when asked), a new
  ReplaceJob aborts the active one; workflow ranges are inclusive [from, to];
  RestartSpec ranges are half-open, as Peloton reads them;
* pods come up in `pod_state` (RUNNING by default) with ids
  `<job>-<instance>-<run>`; changed instances get a new run; StopJob sets the
  desired state KILLED and kills every pod;
* workflows stay ROLLING_FORWARD until `finish_workflow` (tests decide).

Every call is recorded in `calls` as (method, arguments) so tests can assert
what was sent.  Thread-safe (served from gRPC worker threads).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from peloton.api.gen.peloton.api.v0 import peloton_pb2 as v0_peloton
from peloton.api.gen.peloton.api.v0.host import host_pb2
from peloton.api.gen.peloton.api.v0.respool import respool_pb2
from peloton.api.gen.peloton.api.v1alpha import peloton_pb2
from peloton.api.gen.peloton.api.v1alpha.job.stateless import stateless_pb2 as sl
from peloton.api.gen.peloton.api.v1alpha.pod import pod_pb2
from peloton.core.errors import Conflict, InvalidArgument, NotFound

TERMINAL_WORKFLOWS = {
    sl.WORKFLOW_STATE_SUCCEEDED,
    sl.WORKFLOW_STATE_ABORTED,
    sl.WORKFLOW_STATE_FAILED,
    sl.WORKFLOW_STATE_ROLLED_BACK,
}

#: Pod states of a run that has ended.
_ENDED = frozenset({pod_pb2.POD_STATE_SUCCEEDED, pod_pb2.POD_STATE_FAILED, pod_pb2.POD_STATE_LOST,
                    pod_pb2.POD_STATE_KILLED, pod_pb2.POD_STATE_DELETED})


def now() -> str:
    """The current time as an RFC 3339 string with microseconds.  The clock is read once: the
    seconds and the fraction used to come from two reads, so a second boundary between them
    yielded a time almost a second early (and updates listed out of order)."""
    micros = time.time_ns() // 1000
    seconds, fraction = divmod(micros, 1_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{fraction:06d}Z"


def inclusive(ids: list[int]) -> list[Any]:
    out: list[list[int]] = []
    for i in sorted(ids):
        if out and out[-1][1] == i - 1:
            out[-1][1] = i
        else:
            out.append([i, i])
    return [pod_pb2.InstanceIDRange(**{"from": a, "to": b}) for a, b in out]


@dataclass
class FakeJob:
    job_id: str
    spec: Any
    specs: dict[int, Any]
    config: int = 1
    desired: int = 1
    workflow_version: int = 1
    desired_state: sl.JobState = sl.JOB_STATE_RUNNING
    workflows: list[Any] = field(default_factory=list)
    pods: dict[int, Any] = field(default_factory=dict)  # instance -> PodInfo
    history: dict[int, list[Any]] = field(default_factory=dict)  # instance -> earlier PodInfos
    created: str = field(default_factory=now)

    @property
    def label_set(self) -> frozenset[tuple[str, str]]:
        """The job's labels as pairs, recomputed only when the spec object changes (QueryJobs)."""
        if getattr(self, "_labels_of", None) is not self.spec:
            self._labels_of = self.spec
            self._labels = frozenset((lab.key, lab.value) for lab in self.spec.labels)
        return self._labels

    @property
    def version(self) -> str:
        return f"{self.config}-{self.desired}-{self.workflow_version}"

    def pod_spec(self, spec: Any, instance: int) -> Any:
        return spec.instance_spec.get(instance, spec.default_spec)


class FakeState:
    """The fake cluster's state, test helpers and internals."""

    def __init__(
        self, pod_state: pod_pb2.PodState = pod_pb2.POD_STATE_RUNNING, hosts: tuple[str, ...] = ("host-1",)
    ) -> None:
        self.pod_state = pod_state
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.jobs: dict[str, FakeJob] = {}
        self.names: dict[str, list[str]] = {}
        self.pools: dict[str, Any] = {}  # id -> ResourcePoolInfo
        self.hosts = {h: host_pb2.HOST_STATE_UP for h in hosts}
        #: hostname -> the DrainSpec of its last MaintenanceService.DrainHosts.
        self.drains: dict[str, Any] = {}
        #: job id -> the Forecast ForecastService answers (none: Unavailable).
        self.forecasts: dict[str, Any] = {}
        self.pod_message = ""
        self._lock = threading.RLock()
        root = respool_pb2.ResourcePoolInfo(
            id=v0_peloton.ResourcePoolID(value="root"), path=respool_pb2.ResourcePoolPath(value="/")
        )
        self.pools["root"] = root

    # -- helpers for tests --------------------------------------------------------------------
    def record(self, method: str, **kwargs: Any) -> None:
        self.calls.append((method, kwargs))

    def calls_of(self, method: str) -> list[dict[str, Any]]:
        return [kw for m, kw in self.calls if m == method]

    def job_by_name(self, name: str) -> FakeJob:
        return self.jobs[self.names[name][0]]

    def finish_workflow(self, job_id: str, state: sl.WorkflowState = sl.WORKFLOW_STATE_SUCCEEDED) -> None:
        with self._lock:
            job = self.jobs[job_id]
            self._set_workflow_state(job, state)

    def set_pod(self, job_id: str, instance: int, state: pod_pb2.PodState, message: str = "",
                reason: str = "") -> None:
        with self._lock:
            status = self.jobs[job_id].pods[instance].status
            status.state, status.message, status.reason = state, message, reason

    def relaunch_pods(self, job_id: str, instances: list[int]) -> list[str]:
        """Give each instance a new run (new pod id, start time; the old run becomes its
        history), as a restart would; the new pod ids, in order."""
        with self._lock:
            job = self.jobs[job_id]
            for instance in instances:
                self._launch(job, instance, job.spec)
            return [job.pods[i].status.pod_id.value for i in instances]

    def move_pods(self, job_id: str, instances: list[int], state: pod_pb2.PodState) -> None:
        """Put each instance's current run in `state` with a new start time (a pod that
        flapped, or restarted in place), as the job manager's status updates would."""
        with self._lock:
            job = self.jobs[job_id]
            started = now()
            for instance in instances:
                status = job.pods[instance].status
                status.state, status.start_time = state, started

    # -- internals ------------------------------------------------------------------------------
    def _job(self, job_id: str) -> FakeJob:
        job = self.jobs.get(job_id)
        if job is None:
            raise NotFound(f"job {job_id} not found")
        return job

    def _check(self, job: FakeJob, version: str) -> None:
        if version and version != job.version:
            raise Conflict(f"unexpected entity version {version}, current is {job.version}")

    def _launch(self, job: FakeJob, instance: int, spec: Any) -> None:
        old = job.pods.get(instance)
        run = 1
        if old is not None:
            run = int(old.status.pod_id.value.rsplit("-", 1)[1]) + 1
            if old.status.state not in _ENDED:
                # A run ends before the pod's next one starts (Peloton kills it first).
                old.status.state = pod_pb2.POD_STATE_KILLED
            job.history.setdefault(instance, []).insert(0, old)
        pod_spec = pod_pb2.PodSpec()
        pod_spec.CopyFrom(job.pod_spec(spec, instance))
        pod_spec.pod_name.value = f"{job.job_id}-{instance}"
        ports = (
            {p.name: 31000 + instance for p in pod_spec.containers[0].ports} if pod_spec.containers else {}
        )
        status = pod_pb2.PodStatus(
            state=self.pod_state,
            pod_id=peloton_pb2.PodID(value=f"{job.job_id}-{instance}-{run}"),
            host=next(iter(self.hosts)),
            start_time=now(),
            desired_state=pod_pb2.POD_STATE_RUNNING,
            message=self.pod_message,
            version=peloton_pb2.EntityVersion(value=job.version),
            containers_status=[pod_pb2.ContainerStatus(ports=ports)],
        )
        if run > 1:
            status.prev_pod_id.value = f"{job.job_id}-{instance}-{run - 1}"
        job.pods[instance] = pod_pb2.PodInfo(spec=pod_spec, status=status)

    def _kill(self, job: FakeJob, instance: int) -> None:
        job.pods[instance].status.state = pod_pb2.POD_STATE_KILLED
        job.pods[instance].status.desired_state = pod_pb2.POD_STATE_KILLED  # as StopPod: not to run again
        job.pods[instance].status.completion_time = now()

    def _workflow(
        self,
        job: FakeJob,
        kind: sl.WorkflowType,
        paused: bool,
        update_spec: Any,
        opaque: str,
        prev_version: str,
        added: list[int],
        updated: list[int],
        removed: list[int],
    ) -> None:
        for w in job.workflows:
            if w.status.state not in TERMINAL_WORKFLOWS:
                w.status.state = sl.WORKFLOW_STATE_ABORTED
                w.events.insert(
                    0, sl.WorkflowEvent(type=w.status.type, state=sl.WORKFLOW_STATE_ABORTED, timestamp=now())
                )
        state = sl.WORKFLOW_STATE_PAUSED if paused else sl.WORKFLOW_STATE_ROLLING_FORWARD
        info = sl.WorkflowInfo(
            status=sl.WorkflowStatus(
                type=kind,
                state=state,
                version=peloton_pb2.EntityVersion(value=job.version),
                prev_version=peloton_pb2.EntityVersion(value=prev_version),
                creation_time=now(),
                update_time=now(),
            ),
            update_spec=update_spec,
            opaque_data=peloton_pb2.OpaqueData(data=opaque),
            events=[sl.WorkflowEvent(type=kind, state=state, timestamp=now())],
            instances_added=inclusive(added),
            instances_updated=inclusive(updated),
            instances_removed=inclusive(removed),
        )
        for i in sorted(set(added + updated)):
            info.instance_events.add(
                instance_id=i, events=[sl.WorkflowEvent(type=kind, state=state, timestamp=now())]
            )
        job.workflows.append(info)

    def _set_workflow_state(self, job: FakeJob, state: sl.WorkflowState, opaque: str | None = None) -> None:
        if not job.workflows:
            raise InvalidArgument("job has no workflow")
        w = job.workflows[-1]
        w.status.prev_state = w.status.state
        w.status.state = state
        w.status.update_time = now()
        if opaque is not None:
            w.opaque_data.data = opaque
        w.events.insert(0, sl.WorkflowEvent(type=w.status.type, state=state, timestamp=now()))
        job.workflow_version += 1
        w.status.version.value = job.version

    def _status(self, job: FakeJob) -> Any:
        stats: dict[str, int] = {}
        for pod in job.pods.values():
            name = pod_pb2.PodState.Name(pod.status.state)
            stats[name] = stats.get(name, 0) + 1
        workflow = job.workflows[-1].status if job.workflows else None
        running = any(p.status.state == pod_pb2.POD_STATE_RUNNING for p in job.pods.values())
        status = sl.JobStatus(
            state=sl.JOB_STATE_RUNNING if running else sl.JOB_STATE_KILLED,
            desired_state=job.desired_state,
            creation_time=job.created,
            pod_stats=stats,
            version=peloton_pb2.EntityVersion(value=job.version),
        )
        if workflow is not None:
            status.workflow_status.CopyFrom(workflow)
        return status
