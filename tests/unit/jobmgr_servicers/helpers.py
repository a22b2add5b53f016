"""Job specs and small waits shared by the job manager API tests."""

from __future__ import annotations

from functools import partial
from typing import Any

from peloton.api.gen.peloton.api.v1alpha import peloton_pb2
from peloton.api.gen.peloton.api.v1alpha.job.stateless import stateless_pb2
from peloton.api.gen.peloton.api.v1alpha.job.stateless.svc import stateless_svc_pb2 as svc
from peloton.api.gen.peloton.api.v1alpha.pod import pod_pb2
from tests.unit.jobmgr_servicers.conftest import Cluster

POOL = "respool-default"
RUNNING = pod_pb2.POD_STATE_RUNNING


def service_spec(instances: int = 3, *, tag: str = "v1", name: str = "www/prod/web",
                 labels: tuple[tuple[str, str], ...] = (("team", "web"),)) -> stateless_pb2.JobSpec:
    """A small stateless job; `tag` changes every pod's command (so an update touches all)."""
    spec = stateless_pb2.JobSpec(name=name, owner="alice", instance_count=instances)
    spec.respool_id.value = POOL
    for key, value in labels:
        spec.labels.add(key=key, value=value)
    pod = spec.default_spec
    pod.labels.add(key="tier", value="web")
    box = pod.containers.add(name="app")
    box.resource.cpu_limit, box.resource.mem_limit_mb, box.resource.disk_limit_mb = 0.1, 32, 10
    box.entrypoint.value = f"serve --tag {tag}"
    box.ports.add(name="http", env_name="PORT_HTTP")
    return spec


def job_id(value: str) -> peloton_pb2.JobID:
    return peloton_pb2.JobID(value=value)


def version(value: str) -> peloton_pb2.EntityVersion:
    return peloton_pb2.EntityVersion(value=value)


def create(c: Cluster, spec: stateless_pb2.JobSpec | None = None, **kwargs: Any
           ) -> svc.CreateJobResponse:
    """CreateJob and return the response."""
    resp: svc.CreateJobResponse = c.jobs.CreateJob(
        svc.CreateJobRequest(spec=spec or service_spec(), **kwargs), timeout=10)
    return resp


def get(c: Cluster, jid: str) -> svc.GetJobResponse:
    """GetJob of the current version."""
    resp: svc.GetJobResponse = c.jobs.GetJob(svc.GetJobRequest(job_id=job_id(jid)), timeout=10)
    return resp


def current(c: Cluster, jid: str) -> peloton_pb2.EntityVersion:
    """The job's entity version now (Peloton refuses a mutation without the current one)."""
    return version(get(c, jid).job_info.status.version.value)


def pods(c: Cluster, jid: str, **kwargs: Any) -> list[Any]:
    """QueryPods of the whole job (PodInfos in instance order)."""
    resp = c.jobs.QueryPods(svc.QueryPodsRequest(job_id=job_id(jid), **kwargs), timeout=10)
    return list(resp.pods)


def wait_running(c: Cluster, jid: str, count: int, config: int | None = None) -> list[Any]:
    """Wait until `count` pods run (on config version `config` if given)."""
    def probe() -> list[Any] | None:
        found = [p for p in pods(c, jid, summary_only=True) if p.status.state == RUNNING
                 and (config is None or p.status.version.value == f"{config}-0-0")]
        return found if len(found) == count else None

    return c.until(probe, f"{count} running pods of {jid} (config {config})")


def workflow_state(c: Cluster, jid: str) -> str:
    return stateless_pb2.WorkflowState.Name(get(c, jid).workflow_info.status.state)


def wait_workflow(c: Cluster, jid: str, state: str) -> svc.GetJobResponse:
    def probe() -> svc.GetJobResponse | None:
        resp = get(c, jid)
        return resp if stateless_pb2.WorkflowState.Name(
            resp.workflow_info.status.state) == state else None

    return c.until(probe, f"workflow of {jid} in {state}")


class Releaser:
    """Holds new runs in LAUNCHED (the fake host manager stops auto-running) until released."""

    def __init__(self, c: Cluster) -> None:
        self.c = c
        self.seen: set[str] = set(c.hosts.runs())
        c.hosts.auto_run = False

    def _launched_at_least(self, count: int) -> bool:
        return len(self.launched()) >= count

    def launched(self) -> list[str]:
        """Runs launched since the last release, not yet reported."""
        return sorted(set(self.c.hosts.runs()) - self.seen)

    def release(self, state: Any = None, count: int | None = None) -> list[str]:
        """Report launched runs RUNNING (or `state`); waits for `count` of them if given."""
        from peloton.core.states import TaskState

        if count is not None:
            self.c.until(partial(self._launched_at_least, count), f"{count} launched runs")
        runs = self.launched()

        def emit() -> None:
            hosts = self.c.hosts.runs()
            for run in runs:
                self.c.hosts.emit(run, state or TaskState.RUNNING, hosts[run])

        emit()
        self.seen.update(runs)
        return runs

    def stop(self) -> None:
        """Auto-run again, releasing whatever waits (in one step on the hub, so no launch
        slips between the two)."""
        from peloton.core.states import TaskState

        def run_all() -> None:
            hosts = self.c.hosts
            hosts.auto_run = True
            for run, host in hosts.runs().items():
                if run not in self.seen:
                    hosts.emit(run, TaskState.RUNNING, host)

        run_all()


def in_flight(c: Cluster, jid: str, config: int) -> list[int]:
    """Instances asked to move to `config` that do not run it yet."""
    out = []
    for i, p in enumerate(pods(c, jid, summary_only=True)):
        s = p.status
        if s.desired_version.value == f"{config}-0-0" and not (
                s.state == RUNNING and s.version.value == f"{config}-0-0"):
            out.append(i)
    return out
