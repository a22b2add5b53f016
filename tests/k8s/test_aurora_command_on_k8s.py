"""The `aurora` command and an `.aurora` file against `peloton up --backend k8s:...`.

The same commands as tests/e2e/test_aurora_command.py, but the tasks are pods on kwok nodes
(the least-privilege scheduler account of docs/deploy/kubernetes/rbac.yaml): a Service from
an `.aurora` file is created, rolled to a new `--bind` value and killed, and each step shows
in the pods the API server holds.  kwok runs no process, so what the test reads is the pods'
commands (the Thermos processes with their bindings), not the processes' output.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_aurora_command import Aurora, running
from tests.harness.cluster import eventually
from tests.harness.kube import KubeControlPlane
from tests.harness.kube_cluster import KubeCluster

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]
KEY = "devcluster/www/devel/hello"
CONFIG = """\
hello = Process(name = 'hello', cmdline = 'echo {{greeting}} from {{mesos.instance}}; sleep 600')
task = Task(processes = [hello], resources = Resources(cpu = 0.1, ram = 32*MB, disk = 16*MB))
jobs = [Service(cluster = 'devcluster', role = 'www', environment = 'devel', name = 'hello',
                instances = 2, task = task, update_config = UpdateConfig(watch_secs = 1))]
"""


@pytest.fixture
def k8s(kube: KubeControlPlane, kube_scheduler: Path, tmp_path: Path) -> Iterator[KubeCluster]:
    """`peloton up` (Aurora bridge included) on three kwok nodes of its own."""
    cluster = KubeCluster(kube, kube_scheduler, tmp_path).start()
    try:
        yield cluster
    finally:
        cluster.close()


def live_commands(k8s: KubeCluster) -> list[str]:
    """The commands of the cluster's pods that are not ending, one string per pod."""
    out = []
    for pod in k8s.pods():
        if pod["metadata"].get("deletionTimestamp") or pod["status"].get("phase") != "Running":
            continue
        container = pod["spec"]["containers"][0]
        out.append(" ".join([*container.get("command", []), *container.get("args", [])]))
    return out


def greeted(k8s: KubeCluster, word: str) -> bool:
    commands = live_commands(k8s)
    return len(commands) == 2 and all(f"echo {word} from" in c for c in commands)


def test_an_aurora_file_creates_updates_and_kills_pods(k8s: KubeCluster, tmp_path: Path) -> None:
    aurora = Aurora(tmp_path / "aurora", k8s.up.aurora_port)
    config = aurora.write("hello.aurora", CONFIG)
    aurora("job", "create", KEY, config, "--bind", "greeting=hello", "--wait-until", "RUNNING")
    eventually(lambda: len(running(aurora, KEY)) == 2, 90, "two RUNNING instances")
    eventually(lambda: greeted(k8s, "hello"), 60, "two running pods greeting hello")
    nodes: set[Any] = {p["spec"].get("nodeName") for p in k8s.pods()}
    assert nodes <= set(k8s.nodes), nodes  # placed on this cluster's kwok nodes only

    aurora("update", "start", KEY, config, "--bind", "greeting=hi", "--wait")
    eventually(lambda: greeted(k8s, "hi"), 90, "both pods replaced by ones greeting hi")

    aurora("job", "killall", KEY)
    eventually(lambda: not live_commands(k8s), 90, "every pod of the job gone")
    eventually(lambda: not running(aurora, KEY), 60, "no RUNNING instance left")
