"""The announcer against a real ZooKeeper, fed by an in-memory Peloton (its API calls only).

Checks the ZooKeeper side as Aurora's executor and Finagle see it: ephemeral sequential
`member_` nodes with ServerSet JSON, a new node for a new run, none for a pod being killed,
members made again after the session expires, exactly one writer among several announcers,
and nothing left once stopped.  Every wait polls with a deadline.
"""

from __future__ import annotations

import queue
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from announcer.app import Announcer
from announcer.config import AnnouncerConfig
from peloton.api.client_transport import DeadlineExceeded
from peloton.api.gen.peloton.api.v0.host import host_pb2
from peloton.api.gen.peloton.api.v0.host.svc import host_svc_pb2
from peloton.api.gen.peloton.api.v1alpha.job.stateless import stateless_pb2
from peloton.api.gen.peloton.api.v1alpha.job.stateless.svc import stateless_svc_pb2 as svc
from peloton.api.gen.peloton.api.v1alpha.pod import pod_pb2
from peloton.api.gen.peloton.api.v1alpha.watch.svc import watch_svc_pb2
from peloton.common.leader import new_client
from peloton.common.serverset import MEMBER_PREFIX
from peloton.core.errors import NotFound, Unavailable
from tests.harness.zookeeper import expire_session, running_zookeeper, serverset_members

pytestmark = pytest.mark.zookeeper

JOB = str(uuid.UUID(int=1))
PLAIN = str(uuid.UUID(int=2))
WAIT = 15.0


class FakePeloton:
    """Jobs (one spec version each) and pod statuses; a pod change goes to every open watch."""

    def __init__(self) -> None:
        self.specs: dict[str, stateless_pb2.JobSpec] = {}
        self.pods: dict[str, pod_pb2.PodStatus] = {}
        self.watches: dict[str, queue.Queue[pod_pb2.PodStatus | None]] = {}
        self.job_reads = 0

    def add_job(self, job_id: str, name: str, labels: dict[str, str]) -> None:
        spec = stateless_pb2.JobSpec(name=name)
        for key, value in labels.items():
            spec.default_spec.labels.add(key=key, value=value)
        self.specs[job_id] = spec

    def set_pod(self, job_id: str, instance: int, run: int, state: pod_pb2.PodState, *,
                host: str = "h1", ports: dict[str, int] | None = None,
                desired: pod_pb2.PodState = pod_pb2.POD_STATE_RUNNING) -> None:
        name = f"{job_id}-{instance}"
        old = self.pods.get(name)
        status = pod_pb2.PodStatus(state=state, desired_state=desired, host=host)
        status.pod_id.value = f"{name}-{run}"
        status.version.value = "1-0-0"
        status.revision.version = (old.revision.version if old is not None else 0) + 1
        box = status.containers_status.add()
        for port_name, number in (ports or {}).items():
            box.ports[port_name] = number
        self.pods[name] = status
        for watch in list(self.watches.values()):
            watch.put(status)

    # -- the calls the announcer makes -------------------------------------------------------
    def list_stateless_jobs(self) -> Iterator[Any]:
        out = svc.ListJobsResponse()
        for job_id in self.specs:
            summary = out.jobs.add()
            summary.job_id.value = job_id
            running = sum(1 for n, p in self.pods.items()
                          if n.startswith(job_id) and p.state == pod_pb2.POD_STATE_RUNNING)
            summary.status.pod_stats["POD_STATE_RUNNING"] = running
        yield out

    def query_pods(self, job_id: str, spec: Any, *, pagination: Any = None,
                   summary_only: bool = False) -> Any:
        out = svc.QueryPodsResponse()
        for name, status in self.pods.items():
            if name.rpartition("-")[0] == job_id and status.state in spec.pod_states:
                info = out.pods.add(status=status)
                info.spec.pod_name.value = name
        return out

    def get_stateless_job(self, job_id: str, *, version: str = "", summary_only: bool = False) -> Any:
        self.job_reads += 1
        if job_id not in self.specs:
            raise NotFound(f"no job {job_id}")
        out = svc.GetJobResponse()
        out.job_info.spec.CopyFrom(self.specs[job_id])
        return out

    def query_hosts(self, states: Any = ()) -> Any:
        return host_svc_pb2.QueryHostsResponse(host_infos=[host_pb2.HostInfo(hostname="h1", ip="10.0.0.1")])

    def watch_pods(self, job_id: str = "", pod_names: Any = (), labels: Any = (), *,
                   timeout: float | None = None) -> Iterator[Any]:
        watch_id = f"task_{uuid.uuid4()}"
        events: queue.Queue[pod_pb2.PodStatus | None] = queue.Queue()
        self.watches[watch_id] = events
        deadline = time.monotonic() + (timeout or 3600)
        try:
            yield watch_svc_pb2.WatchResponse(watch_id=watch_id)
            while True:
                try:
                    status = events.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    raise DeadlineExceeded("watch deadline") from None
                if status is None:
                    raise Unavailable("watch cancelled")
                out = watch_svc_pb2.WatchResponse(watch_id=watch_id)
                pod = out.pods.add(status=status)
                pod.pod_name.value = status.pod_id.value.rpartition("-")[0]
                yield out
        finally:
            self.watches.pop(watch_id, None)

    def cancel_watch(self, watch_id: str) -> Any:
        if watch_id in self.watches:
            self.watches[watch_id].put(None)
        return None


def eventually(check: Callable[[], Any], what: str, timeout: float = WAIT) -> Any:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}; last: {last!r}")


@pytest.fixture
def reader(zookeeper: str) -> Iterator[Any]:
    client = new_client(zookeeper, use_gevent=False)
    client.start(10)
    yield client
    client.stop()
    client.close()


@pytest.fixture
def root() -> str:
    return f"/t-{uuid.uuid4().hex[:10]}"


def finagle_view(zk: Any, path: str) -> dict[int, dict[str, Any]]:
    """shard -> member JSON under the announcer's member prefix."""
    return serverset_members(zk, path, MEMBER_PREFIX)


def make(zookeeper: str, root: str, peloton: FakePeloton, **kwargs: Any) -> Announcer:
    config = AnnouncerConfig(ensemble=zookeeper, root=f"{root}/aurora", election_root=root,
                             session_timeout=3.0, **kwargs)
    announcer = Announcer(config, peloton)
    announcer.start()
    return announcer


def test_members_follow_runs_and_leave_when_killed(zookeeper: str, root: str, reader: Any) -> None:
    peloton = FakePeloton()
    peloton.add_job(JOB, "www/prod/hello", {"peloton/announce": "www/prod/hello"})
    peloton.add_job(PLAIN, "www/prod/plain", {})
    peloton.set_pod(JOB, 0, 1, pod_pb2.POD_STATE_RUNNING, ports={"http": 31000})
    peloton.set_pod(PLAIN, 0, 1, pod_pb2.POD_STATE_RUNNING, ports={"http": 31005})
    path = f"{root}/aurora/www/prod/hello"
    announcer = make(zookeeper, root, peloton)
    try:
        first = eventually(lambda: finagle_view(reader, path).get(0), "instance 0's member")
        assert {k: v for k, v in first.items() if k != "node"} == {
            "serviceEndpoint": {"host": "h1", "port": 31000},
            "additionalEndpoints": {"aurora": {"host": "h1", "port": 31000},
                                    "http": {"host": "h1", "port": 31000}},
            "status": "ALIVE", "shard": 0}
        assert reader.exists(f"{path}/{first['node']}").ephemeralOwner == announcer.zk.client_id[0]
        assert not reader.exists(f"{root}/aurora/www/prod/plain")

        # A second instance starts; then instance 0 runs again elsewhere (a new run).
        peloton.set_pod(JOB, 1, 1, pod_pb2.POD_STATE_STARTING, ports={"http": 31001})
        peloton.set_pod(JOB, 1, 1, pod_pb2.POD_STATE_RUNNING, ports={"http": 31001})
        eventually(lambda: 1 in finagle_view(reader, path), "instance 1's member")
        peloton.set_pod(JOB, 0, 1, pod_pb2.POD_STATE_KILLING, desired=pod_pb2.POD_STATE_KILLED)
        eventually(lambda: 0 not in finagle_view(reader, path), "the old run to leave")
        peloton.set_pod(JOB, 0, 2, pod_pb2.POD_STATE_RUNNING, host="h2", ports={"http": 31002})
        second = eventually(lambda: finagle_view(reader, path).get(0), "the new run's member")
        assert second["node"] != first["node"]
        assert second["serviceEndpoint"] == {"host": "h2", "port": 31002}

        # A run that is RUNNING but being killed has no member (Aurora leaves at the kill).
        peloton.set_pod(JOB, 1, 1, pod_pb2.POD_STATE_RUNNING, desired=pod_pb2.POD_STATE_KILLED,
                        ports={"http": 31001})
        eventually(lambda: sorted(finagle_view(reader, path)) == [0], "instance 1 to leave")
        # Its host lost: the run is LOST and its member goes.
        peloton.set_pod(JOB, 0, 2, pod_pb2.POD_STATE_LOST, host="h2", ports={"http": 31002})
        eventually(lambda: not finagle_view(reader, path), "the lost run to leave")
        # Specs are read once per job version.
        assert peloton.job_reads == 2
    finally:
        announcer.stop()
    assert finagle_view(reader, path) == {}, "stopping removes every member"


def test_members_come_back_after_the_session_expires(zookeeper: str, root: str, reader: Any) -> None:
    peloton = FakePeloton()
    peloton.add_job(JOB, "svc", {"peloton/announce": "/" + root.strip("/") + "/custom/svc"})
    peloton.set_pod(JOB, 0, 1, pod_pb2.POD_STATE_RUNNING, ports={"http": 31000})
    path = f"{root}/custom/svc"
    announcer = make(zookeeper, root, peloton, use_ip=True)
    try:
        before = eventually(lambda: finagle_view(reader, path).get(0), "the member")
        assert before["serviceEndpoint"] == {"host": "10.0.0.1", "port": 31000}
        expire_session(announcer.zk, zookeeper)
        after = eventually(lambda: (m := finagle_view(reader, path).get(0)) and
                           m["node"] != before["node"] and m, "the member made again", timeout=30)
        assert after["serviceEndpoint"] == before["serviceEndpoint"]
        assert len(finagle_view(reader, path)) == 1
    finally:
        announcer.stop()


def test_one_announcer_writes_and_the_other_takes_over(zookeeper: str, root: str, reader: Any) -> None:
    peloton = FakePeloton()
    peloton.add_job(JOB, "www/prod/hello", {"peloton/announce": ""})
    peloton.set_pod(JOB, 0, 1, pod_pb2.POD_STATE_RUNNING, ports={"http": 31000})
    path = f"{root}/aurora/www/prod/hello"
    first = make(zookeeper, root, peloton)
    second = make(zookeeper, root, peloton)
    try:
        eventually(lambda: 0 in finagle_view(reader, path), "the member")
        eventually(lambda: first.leading != second.leading, "one leader")
        leader, standby = (first, second) if first.leading else (second, first)
        eventually(lambda: leader.synced.is_set(), "the leader's full read")
        assert len(reader.get_children(path)) == 1, "the standby writes nothing"
        leader.stop()
        eventually(lambda: standby.leading and standby.synced.is_set(), "the standby to lead")
        member = eventually(lambda: finagle_view(reader, path).get(0), "the member, once")
        assert reader.exists(f"{path}/{member['node']}").ephemeralOwner == standby.zk.client_id[0]
        assert len(reader.get_children(path)) == 1
    finally:
        first.stop()
        second.stop()


def test_members_survive_a_zookeeper_restart(tmp_path: Any) -> None:
    """The connection drops (the announcer stops leading) and comes back: the member is there
    again, once, with the same data, whether the session survived (its node reused) or not."""
    with running_zookeeper(tmp_path) as server:
        peloton = FakePeloton()
        peloton.add_job(JOB, "www/prod/hello", {"peloton/announce": ""})
        peloton.set_pod(JOB, 0, 1, pod_pb2.POD_STATE_RUNNING, ports={"http": 31000})
        announcer = make(server.hosts, "/r", peloton)
        reader = new_client(server.hosts, use_gevent=False)
        try:
            before = eventually(lambda: finagle_view(announcer.zk, "/r/aurora/www/prod/hello").get(0),
                                "the member")
            server.stop()
            eventually(lambda: not announcer.leading, "leadership lost with the connection")
            server.start()
            reader.start(10)
            after = eventually(lambda: announcer.leading and announcer.synced.is_set() and
                               finagle_view(reader, "/r/aurora/www/prod/hello").get(0), "the member again",
                               timeout=30)
            assert {k: v for k, v in after.items() if k != "node"} == \
                {k: v for k, v in before.items() if k != "node"}
            assert len(reader.get_children("/r/aurora/www/prod/hello")) == 1
        finally:
            announcer.stop()
            reader.stop()
            reader.close()
