"""The Service of an announced job on the Kubernetes backend (k8s_services.py), against a fake API:
its manifest (selector, named target ports, name), creation while a run is live, deletion after
the linger, adoption after a restart, and a name another Service holds."""

from __future__ import annotations

from typing import Any, cast

import pytest

from peloton.core.model.constraints import Label
from peloton.core.model.sched import LaunchSpec
from peloton.core.model.task import PortSpec, TaskSpec
from peloton.core.states import TaskState
from peloton.hostmgr.backends.k8s_api import Conflict, KubeApi, KubeNotFound
from peloton.hostmgr.backends.k8s_config import KubeConfig
from peloton.hostmgr.backends.k8s_services import (
    ANNOUNCE_ANNOTATION,
    ServiceKeeper,
    live_jobs,
    service_name,
    service_want,
)
from peloton.hostmgr.backends.k8s_view import Run
from peloton.hostmgr.backends.k8s_wire import CLUSTER_LABEL, JOB_LABEL, pod_manifest

JOB = "6d1b7c0e-0000-4000-8000-000000000001"
OTHER = "6d1b7c0e-0000-4000-8000-000000000002"
CONFIG = KubeConfig(source="in-cluster", cluster_name="c1", service_linger_secs=5.0)
Json = dict[str, Any]


def launch(job: str = JOB, labels: tuple[Label, ...] | None = None, run: int = 1) -> LaunchSpec:
    if labels is None:
        labels = (Label("peloton/announce", "www/prod/hello"),)
    spec = TaskSpec(ports=(PortSpec("http"), PortSpec("admin"), PortSpec("metrics", 9100)),
                    labels=labels)
    return LaunchSpec(f"{job}-0-{run}", spec, ports=(("http", 28001), ("admin", 28002)))


def test_names_follow_the_path_last_part_first() -> None:
    assert service_name("www/prod/hello", JOB) == "hello-prod-www"
    assert service_name("/services/Web_API", JOB) == "web-api-services"
    assert service_name("", JOB) == "peloton-6d1b7c0e"
    assert service_name("/9lives", JOB) == "s-9lives"
    long = service_name("/" + "x" * 100, JOB)
    assert len(long) <= 63 and long[0].isalpha()


def test_the_manifest_selects_the_jobs_pods_and_targets_their_named_ports() -> None:
    want = service_want(launch(), "pelotonpy", CONFIG)
    assert want is not None and want.name == "hello-prod-www"
    meta, spec = want.manifest["metadata"], want.manifest["spec"]
    assert spec["selector"] == {CLUSTER_LABEL: "c1", JOB_LABEL: JOB} == meta["labels"]
    assert meta["annotations"] == {ANNOUNCE_ANNOTATION: "www/prod/hello"}
    ports = {p["name"]: (p["port"], p["targetPort"]) for p in spec["ports"]}
    # http is 80, a static port keeps its number, others from 10000; the alias `aurora` too.
    assert ports == {"http": (80, "http"), "admin": (10000, "admin"), "metrics": (9100, "metrics"),
                     "aurora": (10001, "http")}
    # The target names are the pod's own port names.
    pod = pod_manifest(launch(), _node(), "pelotonpy", CONFIG)
    assert {p["name"] for p in pod["spec"]["containers"][0]["ports"]} == {"http", "admin", "metrics"}


def test_not_announced_or_no_ports() -> None:
    assert service_want(launch(labels=(Label("x", "y"),)), "ns", CONFIG) is None
    bare = LaunchSpec(f"{JOB}-0-1", TaskSpec(labels=(Label("peloton/announce", "/a"),)))
    want = service_want(bare, "ns", CONFIG)
    assert want is not None and want.manifest["spec"]["clusterIP"] == "None"
    assert "ports" not in want.manifest["spec"]


def _node() -> Any:
    from peloton.core.model.resources import Resources
    from peloton.hostmgr.backends.k8s_wire import NodeFacts

    return NodeFacts("n1", "u", True, True, Resources(4, 1024, 1024), "", (), (), "10.0.0.1")


class FakeApi:
    """Services by (namespace, name)."""

    def __init__(self) -> None:
        self.services: dict[tuple[str, str], Json] = {}
        self.calls: list[tuple[str, str]] = []

    def list(self, path: str, query: Any = ()) -> tuple[list[Json], str]:
        namespace = path.split("/")[4]
        return [s for (ns, _), s in self.services.items() if ns == namespace], "1"

    def call(self, method: str, path: str, query: Any = (), body: Json | None = None) -> Json:
        self.calls.append((method, path))
        parts = path.split("/")
        namespace = parts[4]
        if method == "POST":
            assert body is not None
            key = (namespace, body["metadata"]["name"])
            if key in self.services:
                raise Conflict(409, "exists")
            self.services[key] = body
            return body
        key = (namespace, parts[6])
        if key not in self.services:
            raise KubeNotFound(404, "no")
        return self.services.pop(key) if method == "DELETE" else self.services[key]


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def keeper() -> tuple[ServiceKeeper, FakeApi, Clock, set[tuple[str, str]]]:
    live: set[tuple[str, str]] = set()
    api, clock = FakeApi(), Clock()
    return ServiceKeeper(CONFIG, cast(KubeApi, api), lambda: live, clock), api, clock, live


def test_created_while_live_deleted_after_the_linger(keeper: Any) -> None:
    svc, api, clock, live = keeper
    svc.note_launch(launch(), "pelotonpy")
    svc.tick()
    assert not api.services, "no run is live yet"
    live.add(("pelotonpy", JOB))
    svc.tick()
    assert ("pelotonpy", "hello-prod-www") in api.services
    live.clear()
    svc.tick()
    clock.now += 4.0
    svc.tick()
    assert api.services, "within the linger (a rolling update's gap)"
    live.add(("pelotonpy", JOB))  # the next run started: the linger starts over
    svc.tick()
    live.clear()
    svc.tick()
    clock.now += 5.0
    svc.tick()
    assert not api.services


def test_restarted_keeper_adopts_and_cleans_up(keeper: Any) -> None:
    svc, api, clock, _ = keeper
    want = service_want(launch(), "pelotonpy", CONFIG)
    assert want is not None
    api.services[("pelotonpy", want.name)] = want.manifest
    api.services[("pelotonpy", "foreign")] = {"metadata": {"name": "foreign", "labels": {}}}
    svc._adopt()
    svc.tick()
    clock.now += 5.0
    svc.tick()
    assert list(api.services) == [("pelotonpy", "foreign")]


def test_a_name_taken_by_another_jobs_service_waits_for_it(keeper: Any) -> None:
    svc, api, clock, live = keeper
    theirs = service_want(launch(job=OTHER), "pelotonpy", CONFIG)
    assert theirs is not None
    api.services[("pelotonpy", theirs.name)] = theirs.manifest
    svc.note_launch(launch(), "pelotonpy")
    live.add(("pelotonpy", JOB))
    svc.tick()
    assert api.services[("pelotonpy", theirs.name)]["metadata"]["labels"][JOB_LABEL] == OTHER
    del api.services[("pelotonpy", theirs.name)]
    clock.now += 5.0
    svc.tick()
    assert api.services[("pelotonpy", theirs.name)]["metadata"]["labels"][JOB_LABEL] == JOB


def test_live_jobs_are_jobs_with_a_run_not_ended() -> None:
    runs = {f"{JOB}-0-1": Run("n1", "ns", "p", state=TaskState.KILLED),
            f"{JOB}-0-2": Run("n1", "ns", "p", state=TaskState.RUNNING),
            f"{OTHER}-3-1": Run("n1", "ns", "p", state=TaskState.SUCCEEDED)}
    assert live_jobs(runs) == {("ns", JOB)}
