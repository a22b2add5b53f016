"""Small builders of model values for the contract suite (realistic, fully populated)."""

from __future__ import annotations

import uuid

from peloton.core.cron.model import CollisionPolicy, CronJob
from peloton.core.model.constraints import (
    AndConstraint,
    Condition,
    Label,
    LabelConstraint,
    LabelKind,
)
from peloton.core.model.events import PodEvent
from peloton.core.model.host import HostInfo
from peloton.core.model.job import JobRuntime, JobSpec, SlaSpec
from peloton.core.model.resources import ResourceKind, Resources
from peloton.core.model.respool import ResourceConfig, ResourcePool, ResourcePoolConfig
from peloton.core.model.storage_records import FrameworkInfo, SecretInfo, VolumeInfo
from peloton.core.model.task import CommandSpec, PortSpec, TaskRuntime, TaskSpec
from peloton.core.model.update import UpdateInfo, UpdateSpec, WorkflowEvent
from peloton.core.states import (
    HostState,
    JobState,
    JobType,
    TaskState,
    WorkflowState,
    WorkflowType,
)


def job_id() -> str:
    """A fresh job id."""
    return str(uuid.uuid4())


def task_spec(name: str = "task", cpu: float = 1.0) -> TaskSpec:
    """A task spec with a constraint tree, ports and bytes, to exercise the codec."""
    return TaskSpec(
        name=name, resources=Resources(cpu=cpu, mem_mb=128, disk_mb=10),
        ports=(PortSpec("http"), PortSpec("admin", 8080, "ADMIN_PORT")),
        command=CommandSpec("echo hi", environment=(("A", "1"),)),
        executor_data=b"\x00\xffdata",
        constraint=AndConstraint((
            LabelConstraint(LabelKind.HOST, Condition.EQUAL, Label("zone", "a"), 1),
            LabelConstraint(LabelKind.TASK, Condition.LESS_THAN, Label("job", name), 1))),
        labels=(Label("team", "infra"),))


def job_spec(name: str = "job", *, owner: str = "alice", respool: str = "pool-1",
             labels: tuple[Label, ...] = (), version: int = 1, instances: int = 3,
             team: str = "", job_type: JobType = JobType.BATCH) -> JobSpec:
    """A job config."""
    return JobSpec(name=name, type=job_type, instance_count=instances,
                   default_task=task_spec(name), respool_id=respool, owner=owner,
                   owning_team=team, labels=labels, version=version,
                   sla=SlaSpec(priority=3, preemptible=False),
                   instance_tasks={1: task_spec(name, cpu=2.0)}, created_at=100.0 + version,
                   document_kind="v0.JobConfig", document=b"\x08\x01")


def job_runtime(state: JobState = JobState.PENDING, created: float = 1000.0,
                completed: float = 0.0) -> JobRuntime:
    """A job runtime."""
    return JobRuntime(state=state, creation_time=created, completion_time=completed,
                      task_stats={TaskState.PENDING: 2, TaskState.RUNNING: 1})


def task_runtime(state: TaskState = TaskState.PENDING, host: str = "") -> TaskRuntime:
    """A task runtime."""
    return TaskRuntime(state=state, host=host, ports=(("http", 31000),), message="m")


def pod_event(job: str, instance: int, run: int, t: float,
              state: TaskState = TaskState.RUNNING) -> PodEvent:
    """A pod event."""
    return PodEvent(job, instance, run, state, TaskState.SUCCEEDED, t, host="h1",
                    prev_run_id=run - 1, desired_run_id=run)


def update_info(job: str, created: float = 10.0, update_id: str | None = None) -> UpdateInfo:
    """A workflow."""
    return UpdateInfo(update_id or str(uuid.uuid4()), job, WorkflowType.UPDATE,
                      WorkflowState.ROLLING_FORWARD, UpdateSpec(batch_size=2),
                      config_version=2, prev_config_version=1, instances_total=3,
                      instances_updated=(0, 1), creation_time=created)


def workflow_event(update_id: str, instance: int | None, t: float,
                   state: WorkflowState = WorkflowState.ROLLING_FORWARD) -> WorkflowEvent:
    """A workflow event."""
    return WorkflowEvent(update_id, instance, WorkflowType.UPDATE, state, t)


def pool(pool_id: str = "pool-1", parent: str = "root") -> ResourcePool:
    """A resource pool."""
    return ResourcePool(pool_id, ResourcePoolConfig(
        pool_id, parent, (ResourceConfig(ResourceKind.CPU, 10, 20, 1),),
        controller_limit_percent=10.0))


def host(name: str, state: HostState = HostState.UP) -> HostInfo:
    """A host record."""
    return HostInfo(name, "10.0.0.1", state, HostState.UP, (Label("rack", "r1"),), "p1", "p2")


def secret(secret_id: str, job: str) -> SecretInfo:
    """A secret."""
    return SecretInfo(secret_id, job, "/etc/secret", "c2VjcmV0", 1, True, 5.0)


def volume(volume_id: str, job: str) -> VolumeInfo:
    """A volume record."""
    return VolumeInfo(volume_id, job, 0, "host-1", container_path="/data", size_mb=512)


def framework(name: str = "peloton") -> FrameworkInfo:
    """A framework registration."""
    return FrameworkInfo(name, "fw-1", "stream-1", 7.0, "hostmgr-1")


def cron_job(name: str) -> CronJob:
    """A cron job running `job_spec(name)` hourly."""
    return CronJob(name=name, schedule="0 * * * *", policy=CollisionPolicy.KILL_EXISTING,
                   template=job_spec(name), created_ms=1_900_000_000_000, last_due_ms=1_900_000_000_000)
