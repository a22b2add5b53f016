"""The Kubernetes backend's list + watch loop against an in-process API (no server).

A real API server answers 410 only when a watch it ended on its own is re-opened from a
resourceVersion its watch cache no longer holds, which a test cannot bring about on demand.  So
the expired watch is played here: the pod watch stream carries the API server's ERROR event with
code 410 (read by the real `KubeWatch`), and the backend must list again and compare, so a pod
that vanished meanwhile is LOST and one that ended meanwhile is SUCCEEDED.
"""

from __future__ import annotations

import copy
import queue
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Any, cast

import orjson
import pytest

from peloton.core.errors import NotFound
from peloton.core.states import TaskState
from peloton.hostmgr.backends.base import BackendHost, StatusUpdate
from peloton.hostmgr.backends.k8s import KubeBackend
from peloton.hostmgr.backends.k8s_api import KubeApi, KubeNotFound, KubeWatch
from peloton.hostmgr.backends.k8s_config import KubeConfig
from peloton.hostmgr.backends.k8s_view import ClusterView, Outbox, Run
from peloton.hostmgr.backends.k8s_wire import CLUSTER_LABEL, RUN_ID_ANNOTATION

Json = dict[str, Any]
JOB = "6d1b7c0e-0000-4000-8000-000000000001"
NODES, PODS = "/api/v1/nodes", "/api/v1/pods"
#: Ends a fake stream (what `close()` or the server ending the watch does).
_END = b""


class FakeStream:
    """The raw reply of a watch: chunks from a queue until closed."""

    def __init__(self) -> None:
        self.chunks: queue.Queue[bytes] = queue.Queue()

    def stream(self, amt: int, decode_content: bool = True) -> Iterator[bytes]:
        while True:
            chunk = self.chunks.get()
            if chunk == _END:
                return
            yield chunk

    def shutdown(self) -> None:
        self.chunks.put(_END)

    def close(self) -> None:
        self.chunks.put(_END)


class FakeApi:
    """Lists and watches of nodes and pods from dicts the test changes; every watch is a real
    `KubeWatch` over a `FakeStream` the test writes events into."""

    def __init__(self, nodes: list[Json], pods: list[Json]) -> None:
        self.nodes = nodes
        self.pods = pods
        self.version = 100
        self.lists: Counter[str] = Counter()
        self.streams: dict[str, list[FakeStream]] = {NODES: [], PODS: []}
        self.deleted: list[str] = []
        self.log_calls: list[tuple[str, tuple[tuple[str, str], ...]]] = []
        self._lock = threading.Lock()

    def list(self, path: str, query: Sequence[tuple[str, str]] = ()) -> tuple[list[Json], str]:
        with self._lock:
            self.lists[path] += 1
            items = self.nodes if path == NODES else self.pods
            return copy.deepcopy(items), str(self.version)

    def watch(self, path: str, resource_version: str, query: Sequence[tuple[str, str]] = (),
              timeout_secs: int = 300) -> KubeWatch:
        stream = FakeStream()
        with self._lock:
            self.streams[path].append(stream)
        return KubeWatch(path, stream)

    def call(self, method: str, path: str, query: Sequence[tuple[str, str]] = (),
             body: Json | None = None) -> Json:
        if method == "DELETE":
            with self._lock:
                self.deleted.append(path)
            raise KubeNotFound(404, f"{path} not found")
        raise AssertionError(f"unexpected call {method} {path}")

    def raw(self, method: str, path: str, query: Sequence[tuple[str, str]] = (),
            body: Json | None = None) -> bytes:
        """Pod logs: what a kubelet would send through the API server's pods/log."""
        if method == "GET" and path.endswith("/log"):
            with self._lock:
                self.log_calls.append((path, tuple(query)))
            if f"{JOB}-0-1" in path:
                return b"hello from 0\nbye\n"
            raise KubeNotFound(404, f"{path} not found")
        raise AssertionError(f"unexpected call {method} {path}")

    def send(self, path: str, event: Json) -> None:
        """Write one event into the newest watch of `path`."""
        with self._lock:
            stream = self.streams[path][-1]
        stream.chunks.put(orjson.dumps(event) + b"\n")


class Listener:
    """Collects what the backend reports; acknowledges every update at once."""

    def __init__(self) -> None:
        self.hosts: list[BackendHost] = []
        self.gone: list[tuple[str, str]] = []
        self.updates: list[StatusUpdate] = []
        self.backend: KubeBackend | None = None

    def host_up(self, host: BackendHost) -> None:
        self.hosts.append(host)

    def host_gone(self, hostname: str, reason: str) -> None:
        self.gone.append((hostname, reason))

    def host_seen(self, hostname: str) -> None:
        pass

    def status_update(self, update: StatusUpdate) -> None:
        self.status_updates([update])

    def status_updates(self, updates: Sequence[StatusUpdate]) -> None:
        self.updates.extend(updates)
        if self.backend is not None:
            self.backend.acknowledge(updates)

    def states(self, run_id: str) -> list[TaskState]:
        return [u.state for u in self.updates if u.run_id == run_id]


def node(name: str) -> Json:
    return {"metadata": {"name": name, "uid": f"uid-{name}", "labels": {}},
            "spec": {},
            "status": {"allocatable": {"cpu": "4", "memory": "16Gi"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def pod(instance: int, phase: str, *, exit_code: int | None = None) -> Json:
    run_id = f"{JOB}-{instance}-1"
    if phase == "Running":
        state: Json = {"running": {"startedAt": "2026-01-01T00:00:00Z"}}
    else:
        state = {"terminated": {"exitCode": exit_code, "reason": "Completed"}}
    return {"metadata": {"name": run_id, "namespace": "pelotonpy", "uid": f"uid-{instance}",
                         "labels": {CLUSTER_LABEL: "pelotonpy"},
                         "annotations": {RUN_ID_ANNOTATION: run_id}},
            "spec": {"nodeName": "n1", "containers": [{"name": "task"}]},
            "status": {"phase": phase, "containerStatuses": [{"name": "task", "state": state}]}}


def wait(check: Callable[[], Any], what: str, timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def api() -> FakeApi:
    return FakeApi([node("n1")], [pod(0, "Running"), pod(1, "Running")])


@pytest.fixture
def started(api: FakeApi) -> Iterator[tuple[KubeBackend, Listener]]:
    config = KubeConfig(source="in-cluster", resend_secs=60.0, max_backoff_secs=0.1)
    backend = KubeBackend(config, api=cast(KubeApi, api))
    listener = Listener()
    listener.backend = backend
    backend.start(listener)
    try:
        yield backend, listener
    finally:
        backend.stop()


def test_an_expired_pod_watch_lists_again_and_reports_what_changed_meanwhile(
        api: FakeApi, started: tuple[KubeBackend, Listener]) -> None:
    backend, listener = started
    assert backend.wait_synced(10)
    run0, run1 = f"{JOB}-0-1", f"{JOB}-1-1"
    # Both pods are adopted as running, and both watches are open.
    wait(lambda: listener.states(run0) == [TaskState.RUNNING]
         and listener.states(run1) == [TaskState.RUNNING], "both runs RUNNING")
    wait(lambda: api.streams[PODS] and api.streams[NODES], "both watches open")
    assert api.lists[PODS] == 1

    # Meanwhile (the watch did not tell): pod 0 vanished, pod 1 ended.  Then the watch expires:
    # the API server's ERROR event with code 410.
    with api._lock:
        api.pods = [pod(1, "Succeeded", exit_code=0)]
        api.version = 200
    api.send(PODS, {"type": "ERROR", "object": {
        "kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 410,
        "reason": "Expired", "message": "too old resource version: 100 (150)"}})

    wait(lambda: api.lists[PODS] == 2 and len(api.streams[PODS]) == 2, "pods listed again")
    lost = wait(lambda: [u for u in listener.updates
                         if u.run_id == run0 and u.state is TaskState.LOST], "run 0 LOST")
    assert lost[0].reason == "REASON_TASK_UNKNOWN" and lost[0].hostname == "n1"
    done = wait(lambda: [u for u in listener.updates
                         if u.run_id == run1 and u.state is TaskState.SUCCEEDED], "run 1 SUCCEEDED")
    assert done[0].exit_code == 0
    assert listener.states(run0) == [TaskState.RUNNING, TaskState.LOST]
    assert listener.states(run1) == [TaskState.RUNNING, TaskState.SUCCEEDED]
    # Only the pod watch expired: the nodes were not listed again, nor the host reported gone.
    assert api.lists[NODES] == 1 and listener.gone == []

    # The relisted state is followed on: a later event on the new watch is seen.
    api.send(PODS, {"type": "ADDED", "object": pod(2, "Running")})
    wait(lambda: listener.states(f"{JOB}-2-1") == [TaskState.RUNNING], "run 2 adopted")


def test_task_logs_are_the_pods_log_read_through_pods_log(
        api: FakeApi, started: tuple[KubeBackend, Listener]) -> None:
    backend, listener = started
    assert backend.wait_synced(10)
    run0 = f"{JOB}-0-1"
    wait(lambda: listener.states(run0) == [TaskState.RUNNING], "run 0 adopted")
    assert backend.list_sandbox("n1", run0) == [("stderr", 0), ("stdout", 17)]
    assert backend.read_sandbox("n1", run0, "stdout", offset=6, length=4) == b"from"
    assert backend.read_sandbox("n1", run0, "stderr") == b""  # merged into the one log
    assert api.log_calls[-1] == (f"/api/v1/namespaces/pelotonpy/pods/{run0}/log",
                                 (("container", "task"),))
    with pytest.raises(NotFound):
        backend.read_sandbox("n1", f"{JOB}-1-1", "stdout")


def test_a_pod_created_while_a_relist_was_in_flight_is_not_lost() -> None:
    """The list was asked for before the pod's create answered: the pod may be missing from
    it without being gone (CI saw STARTING, LOST, STARTING, RUNNING, SUCCEEDED for one run
    under load).  A list asked for after the create still finds a vanished pod LOST, and a
    run whose end is reported never reports again."""
    view = ClusterView(KubeConfig(source="in-cluster"), lambda _run_id: None, time.monotonic)
    run_id = f"{JOB}-0-1"
    view.runs[run_id] = Run("n1", "pelotonpy", run_id)
    mark = view.list_mark()  # the relist is asked for ...
    out = Outbox()
    view.our_pod(out, "ADDED", pod(0, "Running"))  # ... the create answers meanwhile
    view.pods_listed(out, [], mark)  # ... the list, from before the pod, comes back
    assert [u.state for u in out.updates] == [TaskState.RUNNING]
    assert not view.runs[run_id].gone

    out = Outbox()
    view.pods_listed(out, [], view.list_mark())  # asked for after: the pod is gone
    assert [u.state for u in out.updates] == [TaskState.LOST]
    view.our_pod(out, "MODIFIED", pod(0, "Running"))  # a late event of the same pod
    assert [u.state for u in out.updates] == [TaskState.LOST]
