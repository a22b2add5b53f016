"""Peloton API messages -> the plain JSON the UI pages read.

Pure functions, no I/O: each takes response messages and returns dicts of
strings, numbers and lists.  States are their enum names without prefixes
(`RUNNING`, `UP`, `ROLLING_FORWARD`) so the pages can colour them with one
table; times stay RFC 3339 strings ("" when unset) and are formatted in
the browser, in the viewer's time zone.  Resource amounts are keyed by
Peloton's kinds (cpu, memory, disk, gpu; memory and disk in MB).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from peloton.api.gen.peloton.api.v0.host import host_pb2
from peloton.api.gen.peloton.api.v0.job import job_pb2
from peloton.api.gen.peloton.api.v0.respool import respool_pb2
from peloton.api.gen.peloton.api.v0.task import task_pb2
from peloton.api.gen.peloton.api.v1alpha.job.stateless import stateless_pb2

Json = dict[str, Any]

KINDS = ("cpu", "memory", "disk", "gpu")

#: Workflow states a workflow can still leave (its actions are offered).
ACTIVE_WORKFLOW_STATES = frozenset({"INITIALIZED", "ROLLING_FORWARD", "ROLLING_BACKWARD", "PAUSED"})


def job_state(value: int) -> str:
    """A v0 JobState number as its name."""
    return str(job_pb2.JobState.Name(value))


def task_state(value: int) -> str:
    """A v0 TaskState number as its name."""
    return str(task_pb2.TaskState.Name(value))


def host_state(value: int) -> str:
    """A v0 HostState number as its short name (`UP`, `DRAINING`, ...)."""
    return str(host_pb2.HostState.Name(value)).removeprefix("HOST_STATE_")


def _labels(labels: Iterable[Any]) -> list[Json]:
    return [{"key": lb.key, "value": lb.value} for lb in labels]


def job_summary(summary: job_pb2.JobSummary, pool_paths: Mapping[str, str]) -> Json:
    """One row of the jobs list."""
    runtime = summary.runtime
    pool_id = summary.respoolID.value
    return {
        "id": summary.id.value, "name": summary.name, "type": job_pb2.JobType.Name(summary.type),
        "owner": summary.owner, "team": summary.owningTeam,
        "pool": pool_paths.get(pool_id, pool_id), "instances": summary.instanceCount,
        "state": job_state(runtime.state), "goal_state": job_state(runtime.goalState),
        "task_states": dict(runtime.taskStats), "created": runtime.creationTime,
        "completed": runtime.completionTime, "labels": _labels(summary.labels),
    }


def job_config(config: job_pb2.JobConfig, pool_path: str) -> Json:
    """What a job asks for: identity, instances, SLA and its default task config."""
    task = config.defaultConfig
    res = task.resource
    return {
        "name": config.name, "type": job_pb2.JobType.Name(config.type), "owner": config.owner,
        "team": config.owningTeam, "description": config.description, "pool": pool_path,
        "instances": config.instanceCount, "labels": _labels(config.labels),
        "priority": config.sla.priority, "preemptible": config.sla.preemptible,
        "resources": {"cpu": res.cpuLimit, "memory": res.memLimitMb, "disk": res.diskLimitMb,
                      "gpu": res.gpuLimit},
        "command": task.command.value, "ports": [p.name for p in task.ports],
        "max_failures": task.restartPolicy.maxFailures,
        "health_check": task.healthCheck.enabled,
    }


def job_runtime(runtime: job_pb2.RuntimeInfo) -> Json:
    """A job's live status."""
    return {
        "state": job_state(runtime.state), "goal_state": job_state(runtime.goalState),
        "created": runtime.creationTime, "started": runtime.startTime,
        "completed": runtime.completionTime, "task_states": dict(runtime.taskStats),
        "config_version": runtime.configurationVersion, "update_id": runtime.updateID.value,
    }


def task(info: task_pb2.TaskInfo) -> Json:
    """One instance: where and how its current run is doing."""
    rt = info.runtime
    return {
        "instance": info.instanceId, "name": info.config.name, "state": task_state(rt.state),
        "goal_state": task_state(rt.goalState), "host": rt.host, "ports": dict(rt.ports),
        "message": rt.message, "reason": rt.reason, "started": rt.startTime,
        "completed": rt.completionTime, "failures": rt.failureCount,
        "run_id": rt.mesosTaskId.value, "healthy": task_pb2.HealthState.Name(rt.healthy),
        "config_version": rt.configVersion,
    }


def pod_event(event: task_pb2.PodEvent) -> Json:
    """One state change of one run."""
    return {
        "run_id": event.taskId.value, "state": event.actualState, "goal_state": event.goalState,
        "time": event.timestamp, "host": event.hostname, "message": event.message,
        "reason": event.reason, "healthy": event.healthy,
    }


def workflow(info: stateless_pb2.WorkflowInfo) -> Json:
    """One workflow (update or restart) with its progress."""
    st = info.status
    state = str(stateless_pb2.WorkflowState.Name(st.state)).removeprefix("WORKFLOW_STATE_")
    kind = str(stateless_pb2.WorkflowType.Name(st.type)).removeprefix("WORKFLOW_TYPE_")
    done, failed, left = st.num_instances_completed, st.num_instances_failed, st.num_instances_remaining
    batch = info.update_spec.batch_size if kind == "UPDATE" else info.restart_spec.batch_size
    return {
        "type": kind, "state": state, "active": state in ACTIVE_WORKFLOW_STATES,
        "completed": done, "failed": failed, "remaining": left, "total": done + failed + left,
        "current": list(st.instances_current), "batch_size": batch,
        "version": st.version.value, "prev_version": st.prev_version.value,
        "created": st.creation_time, "updated": st.update_time, "finished": st.completion_time,
    }


def resources_by_kind(usages: Iterable[Any], field: str) -> Json:
    """`{kind: amount}` from ResourceConfig or ResourceUsage entries."""
    out: Json = dict.fromkeys(KINDS, 0.0)
    for usage in usages:
        out[usage.kind] = round(float(getattr(usage, field)), 6)  # float sums: 0.30000000000000004
    return out


def pool(info: respool_pb2.ResourcePoolInfo) -> Json:
    """A resource pool: place in the tree, what it is guaranteed and may use, what it uses."""
    config = info.config
    path = info.path.value
    return {
        "id": info.id.value, "path": path, "name": config.name,
        "depth": 0 if path == "/" else path.count("/"),
        "parent": info.parent.value, "children": [c.value for c in info.children],
        "team": config.owningTeam, "description": config.description,
        "reservation": resources_by_kind(config.resources, "reservation"),
        "limit": resources_by_kind(config.resources, "limit"),
        "share": resources_by_kind(config.resources, "share"),
        "allocation": resources_by_kind(info.usage, "allocation"),
        "slack": resources_by_kind(info.usage, "slack"),
    }


def host(info: host_pb2.HostInfo) -> Json:
    """One host and where it is in maintenance."""
    return {
        "hostname": info.hostname, "ip": info.ip, "state": host_state(info.state),
        "goal_state": host_state(info.goal_state), "pool": info.current_pool,
        "labels": _labels(info.labels),
    }


def amounts(message: Any) -> Json:
    """Our capacity extension's Amounts as `{kind: amount}` (memory and disk in MB)."""
    return {"cpu": round(message.cpu, 6), "memory": round(message.mem_mb, 3),
            "disk": round(message.disk_mb, 3), "gpu": round(message.gpu, 6)}


def host_capacity(cap: Any) -> Json:
    """What one host has in all, what its runs hold, and how many runs it has."""
    total, used = amounts(cap.total), amounts(cap.allocated)
    return {"total": total, "allocated": used,
            "free": {k: round(max(0.0, total[k] - used[k]), 6) for k in KINDS},
            "tasks": cap.tasks, "connected": cap.connected}


def pool_status(status: Any) -> Json:
    """A pool's live view from the resource manager: entitled now, queued demand and tasks."""
    return {"entitlement": amounts(status.entitlement), "demand": amounts(status.demand),
            "queued_gangs": status.queued_gangs, "queued_tasks": status.queued_tasks,
            "limit_above_capacity": list(status.limit_above_capacity),
            "reserved_for": status.reserved_for}


def count_by(values: Iterable[str]) -> dict[str, int]:
    """How many times each value occurs, in first-seen order."""
    out: dict[str, int] = {}
    for value in values:
        out[value] = out.get(value, 0) + 1
    return out


def add_counts(into: dict[str, int], counts: Mapping[str, int]) -> None:
    """Add `counts` into `into`, key by key."""
    for key, value in counts.items():
        into[key] = into.get(key, 0) + value
