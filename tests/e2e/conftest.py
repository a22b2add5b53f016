"""Fixtures for end-to-end tests: a real `peloton up` with real agents running real processes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness.cluster import UpCluster

POOL_YAML = """\
name: {name}
owningteam: e2e
description: "an end-to-end test pool"
resources:
- kind: cpu
  reservation: {cpu_res}
  limit: {cpu_limit}
  share: 1
- kind: memory
  reservation: {mem_res}
  limit: 100000
  share: 1
- kind: disk
  reservation: {disk_res}
  limit: 1000000
  share: 1
- kind: gpu
  reservation: 0
  limit: {gpu_limit}
  share: 1
policy: 1
"""

JOB_YAML = """\
name: {name}
owningteam: e2e
description: "an end-to-end test job"
instancecount: {count}
sla:
  priority: {priority}
  preemptible: {preemptible}
defaultconfig:
  resource:
    cpulimit: {cpu}
    memlimitmb: {mem}
    disklimitmb: 10
    gpulimit: {gpu}
  restartpolicy:
    maxfailures: {max_failures}
  command:
    shell: true
    value: '{command}'
{task_labels}{extra}"""


def write_pool(base: Path, name: str, *, cpu_res: float = 0, cpu_limit: float = 100,
               mem_res: float = 0, disk_res: float = 0, gpu_limit: float = 0) -> Path:
    """A respool YAML file in Peloton's format."""
    path = base / f"{name}.pool.yaml"
    path.write_text(POOL_YAML.format(name=name, cpu_res=cpu_res, cpu_limit=cpu_limit,
                                     mem_res=mem_res, disk_res=disk_res, gpu_limit=gpu_limit))
    return path


def write_job(base: Path, name: str, command: str, *, count: int = 1, cpu: float = 0.1,
              mem: float = 32, gpu: float = 0, priority: int = 0, preemptible: bool = True,
              max_failures: int = 0, extra: str = "", task_labels: str = "") -> Path:
    """A batch job YAML file in Peloton's format; `task_labels` is a YAML list of
    `- key: .../value: ...` items indented by two (tests/harness/kube_cluster.fake_labels)."""
    path = base / f"{name}.job.yaml"
    path.write_text(JOB_YAML.format(name=name, count=count, cpu=cpu, mem=mem, gpu=gpu,
                                    priority=priority,
                                    preemptible="true" if preemptible else "false",
                                    max_failures=max_failures,
                                    command=command.replace("'", "''"), extra=extra,
                                    task_labels=f"  labels:\n{task_labels}\n" if task_labels else ""))
    return path


def host_label(key: str, value: str) -> str:
    """`extra` for write_job: a defaultconfig constraint that the host carries label
    `key=value` (LABEL, HOST kind, EQUAL, requirement 1)."""
    return f"""  constraint:
    type: 1
    labelconstraint:
      kind: 2
      condition: 2
      requirement: 1
      label:
        key: {key}
        value: "{value}"
"""


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[UpCluster]:
    """A one-agent cluster with 2 cpus, 4 GB memory."""
    up = UpCluster(tmp_path, agents=1, extra=["--agent-cpus", "2", "--agent-mem-mb", "4096",
                                               "--agent-disk-mb", "100000"]).start()
    try:
        yield up
    finally:
        up.close()
