"""gorealis, the unchanged third-party Aurora client, runs a service whose pods are on Kubernetes.

`peloton up --backend k8s:...` with its Aurora bridge on kwok nodes of its own
(tests/harness/kube_cluster.py); tests/gorealis's `watchupdate` workflow creates a
service, updates it to a new command one instance at a time with a watch time, and
kills it, through gorealis's own calls and monitors.  Meanwhile this test watches the
cluster's pods from the API server, so what gorealis saw is checked against what ran:
the Aurora task ids are the pods' names, the new runs' pods carry the new command and
were started one watch time apart, and no pod of the job is left after the kill.

kwok pods never end on their own without the fake-exit annotations, so the service's
runs simply stay Running until they are killed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.harness import gorealis
from tests.harness.cluster import eventually
from tests.harness.kube import KubeControlPlane
from tests.harness.kube_cluster import KubeCluster

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

#: What the scenario updates the service from and to (tests/gorealis/main.go, watchUpdate).
OLD_COMMAND, NEW_COMMAND = "sleep 1000", "sleep 1004"
POLL_SECS = 0.2


@pytest.fixture
def k8s(kube: KubeControlPlane, kube_scheduler: Path, tmp_path: Path) -> Iterator[KubeCluster]:
    """`peloton up` (Aurora bridge included) on three 4-cpu kwok nodes of its own."""
    gorealis.driver()  # build first: a build failure should not cost a cluster start
    cluster = KubeCluster(kube, kube_scheduler, tmp_path).start()
    try:
        yield cluster
    finally:
        cluster.close()


@dataclass
class Seen:
    """One pod as the poller saw it over the run (times from time.monotonic())."""

    node: str
    command: str
    first_seen: float
    running_at: float | None = None
    last_seen: float = 0.0


class PodPoller:
    """Lists the cluster's pods every POLL_SECS in a thread until stopped."""

    def __init__(self, cluster: KubeCluster) -> None:
        self.cluster = cluster
        self.pods: dict[str, Seen] = {}
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pod-poller", daemon=True)

    def __enter__(self) -> PodPoller:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._look(self.cluster.pods())
            except Exception as exc:  # the API server answered badly: say so at the end
                self.errors.append(f"{type(exc).__name__}: {exc}")
            self._stop.wait(POLL_SECS)

    def _look(self, pods: list[dict[str, Any]]) -> None:
        now = time.monotonic()
        for pod in pods:
            name = pod["metadata"]["name"]
            seen = self.pods.get(name)
            if seen is None:
                container = pod["spec"]["containers"][0]
                seen = self.pods[name] = Seen(pod["spec"].get("nodeName", ""),
                                              " ".join(container.get("command") or ()), now)
            seen.last_seen = now
            if seen.running_at is None and pod.get("status", {}).get("phase") == "Running":
                seen.running_at = now


def test_gorealis_creates_updates_with_a_watch_time_and_kills_a_service_on_pods(
        k8s: KubeCluster) -> None:
    with PodPoller(k8s) as poller:
        outcome = gorealis.run(f"http://127.0.0.1:{k8s.up.aurora_port}/api", "json", "watchupdate",
                               name="k8s-watchupdate", timeout_s=90)
        assert outcome.code == 0, outcome.failure
        # After gorealis saw every instance gone, so is every pod of the job.
        eventually(lambda: not k8s.pods(), 60, "no pod of the killed service left")
    assert not poller.errors, poller.errors[:3]
    seen = outcome.observed
    assert seen["update_status"] == "ROLLED_FORWARD" and seen["watch_ms"] == 4000, seen

    # The Aurora task ids gorealis saw are the pods' names: runs 1, then runs 2 after the update.
    before, after = seen["before"], seen["after"]
    assert sorted(before) == sorted(after) == ["0", "1"], seen
    job_id = before["0"].rsplit("-", 2)[0]
    assert before == {i: f"{job_id}-{i}-1" for i in ("0", "1")}, seen
    assert after == {i: f"{job_id}-{i}-2" for i in ("0", "1")}, seen
    pods = poller.pods
    assert set(pods) == {*before.values(), *after.values()}, sorted(pods)

    for name, pod in pods.items():
        # Every run was a pod on one of this cluster's kwok nodes, and ran there.
        assert pod.node in k8s.nodes, (name, pod.node, k8s.nodes)
        assert pod.running_at is not None, f"pod {name} was never seen Running"
    # The update's new config is what the new runs' pods run.
    for i in ("0", "1"):
        assert OLD_COMMAND in pods[before[i]].command, pods[before[i]]
        assert NEW_COMMAND in pods[after[i]].command and OLD_COMMAND not in pods[after[i]].command, \
            pods[after[i]]

    # Groups of one with a 4 s watch: the second instance's new pod was created only after the
    # first one's had been Running for the watch time (less the poller's own resolution), and
    # each old pod stayed until its instance's turn.
    first, second = sorted(after.values(), key=lambda n: pods[n].first_seen)
    first_running = pods[first].running_at
    assert first_running is not None
    waited = pods[second].first_seen - first_running
    assert waited >= 4.0 - 2 * POLL_SECS - 0.5, f"second group started {waited:.1f} s after the first ran"
    old_of_second = before[second.rsplit("-", 2)[1]]
    assert pods[old_of_second].last_seen >= first_running + 3.0, (
        "the second instance's old pod went before the first group's watch time ended")
    assert seen["update_ms"] >= 8000, seen
