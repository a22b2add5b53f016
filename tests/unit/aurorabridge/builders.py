"""Aurora structs for tests, shaped like what the Aurora client sends."""

from __future__ import annotations

import json
from typing import Any

from aurorabridge.thrift_api import api


def thermos_data(*cmdlines: str, order: list[str] | None = None, final: tuple[str, ...] = ()) -> str:
    """Thermos executor JSON with one process per command line (named p0, p1, ...)."""
    processes = [
        {"name": f"p{i}", "cmdline": c, "final": f"p{i}" in final, "daemon": False, "max_failures": 1}
        for i, c in enumerate(cmdlines)
    ]
    task = {
        "name": "task",
        "processes": processes,
        "finalization_wait": 30,
        "constraints": [{"order": order}] if order else [],
        "resources": {"cpu": 1.0, "ram": 128 * 1024 * 1024, "disk": 256 * 1024 * 1024},
    }
    return json.dumps(
        {
            "environment": "devel",
            "role": "www",
            "name": "hello",
            "task": task,
            "health_check_config": {"initial_interval_secs": 15.0},
        }
    )


def task_config(
    role: str = "www",
    env: str = "devel",
    name: str = "hello",
    *,
    cpus: float = 0.5,
    ram: int = 128,
    disk: int = 256,
    ports: tuple[str, ...] = (),
    gpus: int | None = None,
    cmdlines: tuple[str, ...] = ("echo hello",),
    tier: str | None = None,
    constraints: list[Any] | None = None,
    metadata: dict[str, str] | None = None,
    is_service: bool = True,
    image: str | None = None,
) -> Any:
    """A TaskConfig running `cmdlines` as Thermos processes."""
    resources = [api.Resource(numCpus=cpus), api.Resource(ramMb=ram), api.Resource(diskMb=disk)]
    resources += [api.Resource(namedPort=p) for p in ports]
    if gpus is not None:
        resources.append(api.Resource(numGpus=gpus))
    container = api.Container(mesos=api.MesosContainer())
    if image:
        container = api.Container(docker=api.DockerContainer(image=image, parameters=[]))
    return api.TaskConfig(
        job=api.JobKey(role=role, environment=env, name=name),
        owner=api.Identity(user=role),
        isService=is_service,
        priority=0,
        maxTaskFailures=1,
        production=False,
        tier=tier,
        resources=resources,
        constraints=constraints or [],
        executorConfig=api.ExecutorConfig(name="AuroraExecutor", data=thermos_data(*cmdlines))
        if cmdlines
        else None,
        metadata=[api.Metadata(key=k, value=v) for k, v in (metadata or {}).items()],
        container=container,
    )


def settings(
    group: int = 1,
    pulse_ms: int | None = None,
    only: list[tuple[int, int]] | None = None,
    rollback: bool = False,
) -> Any:
    """JobUpdateSettings."""
    return api.JobUpdateSettings(
        updateGroupSize=group,
        maxPerInstanceFailures=0,
        maxFailedInstances=0,
        minWaitInInstanceRunningMs=1000,
        rollbackOnFailure=rollback,
        waitForBatchCompletion=False,
        blockIfNoPulsesAfterMs=pulse_ms,
        updateOnlyTheseInstances=[api.Range(first=a, last=b) for a, b in only or []],
    )


def update_request(task: Any = None, instances: int = 2, **kwargs: Any) -> Any:
    """A JobUpdateRequest."""
    return api.JobUpdateRequest(
        taskConfig=task or task_config(),
        instanceCount=instances,
        settings=settings(**kwargs),
        metadata=[api.Metadata(key="sha", value="abc")],
    )


def job_configuration(task: Any = None, instances: int = 1) -> Any:
    """A JobConfiguration for createJob."""
    task = task or task_config()
    return api.JobConfiguration(
        key=task.job,
        owner=task.owner,
        cronSchedule=None,
        cronCollisionPolicy=0,
        taskConfig=task,
        instanceCount=instances,
    )
