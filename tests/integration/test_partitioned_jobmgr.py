"""All-active job managers as separate processes: two members on a real ZooKeeper.

The cluster is test_multiprocess.py's (each daemon a `peloton ...` process), with two job
manager processes configured with `jobmgr.partitions` (peloton/cluster/daemons/members.py):
they split the job partitions between them, share one resource manager, host manager and
status stream, and each runs only its own partitions' jobs.  Any member answers any call:
a job created through either member, with an id in either member's partitions or with
none, must succeed, each of its runs launched exactly once; a Watch through one member
sees the other's jobs too, and a Watch of one job through a member that does not drive it
gets the job's changes from its owner, across a handover; a SIGTERM'd member must hand
its partitions over before it exits; and a member killed with SIGKILL mid-run loses only
its own partitions, once its session expires, and no run is launched twice.  Without
ZooKeeper a member holds every partition (solo epochs).  Every wait has a deadline.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from peloton.api.gen.peloton.api.v1alpha import peloton_pb2 as v1
from peloton.api.gen.peloton.api.v1alpha.pod import pod_pb2
from peloton.api.gen.peloton.api.v1alpha.watch import watch_pb2
from peloton.api.gen.peloton.api.v1alpha.watch.svc import watch_svc_pb2, watch_svc_pb2_grpc
from peloton.common.membership import PARTITIONS, role_path
from peloton.core.model.ids import is_uuid
from peloton.core.partitions import assign, partition_of
from peloton.core.states import TaskState
from peloton.storage import Store, StoreOptions, open_store
from tests.harness.multiproc import ROLES, Daemon, MultiCluster
from tests.harness.procs import PELOTON, stop, wait_for
from tests.integration.test_multiprocess import JOB, POOL, run_job

pytestmark = [pytest.mark.zookeeper, pytest.mark.e2e]

SESSION = 3.0
COUNT = 8
#: A graceful handover: the leaver releases each partition and the other acquires and
#: recovers it, well within the session timeout a kill -9 would have to wait for.
HANDOVER = SESSION * 2


@pytest.fixture(scope="module")
def cluster(zookeeper: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[MultiCluster]:
    base = tmp_path_factory.mktemp("partitioned")
    mc = MultiCluster(base, zookeeper, root=f"/pj-{uuid.uuid4().hex[:10]}",
                      session_timeout=SESSION)
    try:
        mc.ready(*[mc.spawn(role) for role in ("resmgr", "hostmgr", "placement")])
        mc.ready(*[mc.spawn("jobmgr", name, jobmgr={"partitions": COUNT, "member_id": name})
                   for name in ("m1", "m2")])
        mc.agent("pj-agent-1")
        (base / "pool.yaml").write_text(POOL)
        wait_for(lambda: settled(mc, "m1", "m2"), 20, "both members holding their partitions")
        mc.cli("respool", "create", "/DefaultResPool", str(base / "pool.yaml"))
        yield mc
    finally:
        mc.close()


@pytest.fixture(scope="module")
def store(cluster: MultiCluster) -> Iterator[Store]:
    s = open_store(cluster.store_url, StoreOptions())
    yield s
    s.close()


def owners(mc: MultiCluster) -> dict[int, str]:
    """Partition -> the member holding it, as ZooKeeper says."""
    zk = KazooClient(hosts=mc.zk)
    zk.start(10)
    try:
        path = role_path(mc.root, ROLES["jobmgr"], PARTITIONS)
        if zk.exists(path) is None:
            return {}
        held = {}
        for p in zk.get_children(path):
            try:
                held[int(p)] = zk.get(f"{path}/{p}")[0].decode()
            except NoNodeError:
                pass  # released between the listing and the read: between owners
        return held
    finally:
        zk.stop()
        zk.close()


def settled(mc: MultiCluster, *members: str) -> bool:
    """Every partition is held by the member the rendezvous assignment gives it (no
    handover between `members` still under way)."""
    want = assign(members, COUNT)
    return owners(mc) == {p: want.owner(p) for p in range(COUNT)}


def job_id_in(partitions: set[int]) -> str:
    """A fresh job id whose partition is one of `partitions`."""
    while partition_of(job_id := str(uuid.uuid4()), COUNT) not in partitions:
        pass
    return job_id


def member(mc: MultiCluster, name: str) -> Daemon:
    return next(d for d in mc.daemons if d.name == name)


def cli_via(mc: MultiCluster, via: Daemon, *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI talking to one member (and to the resource and host managers)."""
    peers = [f"--jobmgr={via.address}", f"--resmgr=127.0.0.1:{mc.ports['resmgr']}",
             f"--hostmgr=127.0.0.1:{mc.ports['hostmgr']}"]
    return subprocess.run([PELOTON, *peers, "-t", "20s", *args], cwd=mc.base,
                          capture_output=True, text=True, timeout=60)


def run_via(mc: MultiCluster, via: Daemon, name: str, job_id: str = "", count: int = 3) -> str:
    """Create a batch job through one member (with `job_id`, or letting it pick one), wait
    until it ends SUCCEEDED; returns its id."""
    path = mc.base / f"{name}.yaml"
    path.write_text(JOB.format(name=name, count=count))
    given = ["-i", job_id] if job_id else []
    result = cli_via(mc, via, "job", "create", *given, "/DefaultResPool", str(path), "--wait",
                     "--wait-timeout", "45s")
    assert result.returncode == 0 and "SUCCEEDED" in result.stdout, \
        result.stdout + result.stderr + mc.logs()
    return job_id or next(w for w in result.stdout.split() if is_uuid(w))


def states(store: Store, job_id: str) -> set[TaskState]:
    """The states of a job's tasks, as stored."""
    return {rt.state for rt in store.get_task_runtimes(job_id).values()}


def ran_once(store: Store, job_id: str, count: int = 3) -> None:
    """Every task of the job succeeded on its first run (none launched again)."""
    runtimes = store.get_task_runtimes(job_id)
    assert sorted(runtimes) == list(range(count))
    assert {(rt.state, rt.run_id) for rt in runtimes.values()} == {(TaskState.SUCCEEDED, 1)}


def test_jobs_created_through_either_member_all_run_once(
        cluster: MultiCluster, store: Store) -> None:
    held = owners(cluster)
    drivers: dict[str, str] = {}
    for via in ("m1", "m2"):
        for owner in ("m1", "m2"):  # an id of its own partitions, and of the other's
            job_id = job_id_in({p for p, m in held.items() if m == owner})
            run_via(cluster, member(cluster, via), f"{via}-{owner}", job_id)
            ran_once(store, job_id)
            drivers[job_id] = owner
        picked = run_via(cluster, member(cluster, via), f"{via}-any")  # no id given
        ran_once(store, picked)
        drivers[picked] = held[partition_of(picked, COUNT)]
    # Reads of any job through any member reach its owner, a streamed one (v1 ListPods) too.
    for job_id in drivers:
        for via in ("m1", "m2"):
            got = cli_via(cluster, member(cluster, via), "job", "get", job_id)
            assert got.returncode == 0 and "SUCCEEDED" in got.stdout, got.stdout + got.stderr
            pods = cli_via(cluster, member(cluster, via), "-j", "job", "stateless",
                           "list-pods", job_id)
            assert pods.returncode == 0, pods.stdout + pods.stderr
            assert len(json.loads(pods.stdout)["pods"]) == 3, pods.stdout
    assert set(drivers.values()) == {"m1", "m2"}


def test_a_watch_through_one_member_sees_the_other_members_jobs(
        cluster: MultiCluster, store: Store) -> None:
    # Each member publishes only the jobs it drives; the member a Watch reaches merges the
    # same Watch opened on every live member (servicers/watch_fanin.py).
    held = owners(cluster)
    channel = grpc.insecure_channel(member(cluster, "m1").address)
    try:
        stream = watch_svc_pb2_grpc.WatchServiceStub(channel).Watch(
            watch_svc_pb2.WatchRequest(pod_filter=watch_pb2.PodFilter()), timeout=90)
        first = next(stream)
        job_id = job_id_in({p for p, m in held.items() if m == "m2"})
        run_via(cluster, member(cluster, "m2"), "watched", job_id)
        seen: set[str] = set()
        for response in stream:
            assert response.watch_id == first.watch_id
            seen.update(p.pod_name.value for p in response.pods
                        if p.pod_name.value.startswith(job_id))
            if len(seen) == 3:
                break
        stream.cancel()
        assert seen == {f"{job_id}-{i}" for i in range(3)}
    finally:
        channel.close()


def watch_job(via: Daemon, job_id: str) -> tuple[grpc.Channel, Any]:
    """A Watch of one job's pods through one member: (its channel, the stream, past its
    first response)."""
    channel = grpc.insecure_channel(via.address)
    stream = watch_svc_pb2_grpc.WatchServiceStub(channel).Watch(
        watch_svc_pb2.WatchRequest(pod_filter=watch_pb2.PodFilter(job_id=v1.JobID(value=job_id))),
        timeout=90)
    next(stream)
    return channel, stream


def succeeded(stream: Any, job_id: str, count: int = 3, *, only: bool = True) -> None:
    """Read the stream until each of the job's `count` pods was reported SUCCEEDED (and,
    with `only`, nothing of another job was)."""
    done: set[str] = set()
    for response in stream:
        for pod in response.pods:
            ours = pod.pod_name.value.rsplit("-", 1)[0] == job_id
            assert ours or not only, pod.pod_name.value
            if ours and pod.status.state == pod_pb2.POD_STATE_SUCCEEDED:
                done.add(pod.pod_name.value)
        if len(done) == count:
            return


def test_a_watch_of_one_job_through_another_member_is_answered_by_its_owner(
        cluster: MultiCluster, store: Store) -> None:
    # m1 does not drive the job: its merge opens the Watch on the job's owner (m2) only,
    # besides its own stream (servicers/watch_fanin.py).
    held = owners(cluster)
    job_id = job_id_in({p for p, m in held.items() if m == "m2"})
    channel, stream = watch_job(member(cluster, "m1"), job_id)
    try:
        run_via(cluster, member(cluster, "m1"), "watched-one", job_id)
        succeeded(stream, job_id)
        stream.cancel()
    finally:
        channel.close()


def test_a_sigtermed_member_hands_its_partitions_over_before_it_exits(
        cluster: MultiCluster, store: Store, tmp_path: Path) -> None:
    moving = {p for p, m in owners(cluster).items() if m == "m2"}
    assert moving
    leaver = member(cluster, "m2")
    # A job of one of m2's partitions is running when m2 stops: m1 takes its runs over and
    # they finish once, none launched again.
    running = job_id_in(moving)
    path = cluster.base / "running.yaml"
    path.write_text(JOB.format(name="running", count=3).replace("sleep 0.2", "sleep 4"))
    created = cli_via(cluster, leaver, "job", "create", "-i", running, "/DefaultResPool",
                      str(path))
    assert created.returncode == 0, created.stdout + created.stderr
    wait_for(lambda: states(store, running) == {TaskState.RUNNING}, 30, "its tasks running")
    # A Watch of the job through m1, opened while m2 drives it, goes on through the
    # handover: its runs' ends come from m1, their new owner.  So does a Watch of every
    # pod through m1 (fanned in): m2 ends its stream cleanly as it leaves, not as a
    # failure, which would end the watch.
    channel, stream = watch_job(member(cluster, "m1"), running)
    every = watch_svc_pb2_grpc.WatchServiceStub(channel).Watch(
        watch_svc_pb2.WatchRequest(pod_filter=watch_pb2.PodFilter()), timeout=90)
    next(every)
    stop(leaver.proc, timeout=10)  # SIGTERM
    assert all(f"releasing partition {p}: leaving" in leaver.log() for p in moving), \
        leaver.log()
    wait_for(lambda: set(owners(cluster).values()) == {"m1"} and len(owners(cluster)) == COUNT,
             HANDOVER, "m1 holding every partition")
    wait_for(lambda: states(store, running) == {TaskState.SUCCEEDED}, 30,
             "the running job's tasks finishing under m1")
    ran_once(store, running)
    try:
        succeeded(stream, running)
        stream.cancel()
        succeeded(every, running, only=False)
        every.cancel()
    finally:
        channel.close()
    job_id = job_id_in(moving)
    run_via(cluster, member(cluster, "m1"), "after-handover", job_id)
    ran_once(store, job_id)


def test_a_member_killed_mid_run_loses_only_its_partitions_and_no_run_is_doubled(
        cluster: MultiCluster, store: Store) -> None:
    joiner = cluster.spawn("jobmgr", "m3", jobmgr={"partitions": COUNT, "member_id": "m3"})
    cluster.ready(joiner)
    wait_for(lambda: settled(cluster, "m1", "m3"), 20, "the handover to m3 done")
    held = owners(cluster)
    theirs = {p for p, m in held.items() if m == "m3"}
    running = job_id_in(theirs)
    path = cluster.base / "killed.yaml"
    path.write_text(JOB.format(name="killed", count=3).replace("sleep 0.2", "sleep 4"))
    created = cli_via(cluster, member(cluster, "m1"), "job", "create", "-i", running,
                      "/DefaultResPool", str(path))  # forwarded to m3
    assert created.returncode == 0, created.stdout + created.stderr
    wait_for(lambda: states(store, running) == {TaskState.RUNNING}, 30, "its tasks running")
    survivor = member(cluster, "m1")
    seen = len(survivor.tail.lines)
    cluster.kill9(joiner)
    # m1's partitions never moved; m3's come to m1 once ZooKeeper expires m3's session.
    wait_for(lambda: set(owners(cluster).values()) == {"m1"} and len(owners(cluster)) == COUNT,
             SESSION * 3, "m1 holding every partition after m3's session expired")
    wait_for(lambda: states(store, running) == {TaskState.SUCCEEDED}, 30,
             "the killed member's job finishing under m1")
    ran_once(store, running)
    after = survivor.tail.lines[seen:]
    assert not any("releasing partition" in line for line in after), after  # m1's stayed
    assert all(any(f"acquired partition {p} " in line for line in after) for p in theirs)


def test_a_member_without_zookeeper_holds_every_partition(tmp_path: Path) -> None:
    mc = MultiCluster(tmp_path)
    try:
        mc.ready(*[mc.spawn(role) for role in ("resmgr", "hostmgr", "placement")])
        jobmgr = mc.spawn("jobmgr", jobmgr={"partitions": 4})
        mc.ready(jobmgr)
        mc.agent("solo-agent")
        (tmp_path / "pool.yaml").write_text(POOL)
        mc.cli("respool", "create", "/DefaultResPool", str(tmp_path / "pool.yaml"))
        run_job(mc, "solo-member")
        assert all(f"holds partition {p}" in jobmgr.log() for p in range(4)), jobmgr.log()
    finally:
        mc.close()
