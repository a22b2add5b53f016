"""All-active job managers as separate processes: two members on a real ZooKeeper.

The cluster is test_multiprocess.py's (each daemon a `peloton ...` process), with two job
manager processes configured with `jobmgr.partitions` (peloton/cluster/daemons/members.py):
they split the job partitions between them, share one resource manager, host manager and
status stream, and each runs only its own partitions' jobs.  Writes are not forwarded
between members yet, so each job is created through the member owning its partition (the
test picks the job id).  Every run must be launched exactly once, and a SIGTERM'd member
must hand its partitions over before it exits.  Every wait has a deadline.
"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from peloton.common.membership import PARTITIONS, role_path
from peloton.core.partitions import partition_of
from peloton.core.states import TaskState
from peloton.storage import Store, StoreOptions, open_store
from tests.harness.multiproc import ROLES, Daemon, MultiCluster
from tests.harness.procs import PELOTON, stop, wait_for
from tests.integration.test_multiprocess import JOB, POOL

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
        wait_for(lambda: set(owners(mc).values()) == {"m1", "m2"}
                 and len(owners(mc)) == COUNT, 20, "both members holding partitions")
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
        return {int(p): zk.get(f"{path}/{p}")[0].decode() for p in zk.get_children(path)}
    finally:
        zk.stop()
        zk.close()


def job_id_in(partitions: set[int]) -> str:
    """A fresh job id whose partition is one of `partitions`."""
    while partition_of(job_id := str(uuid.uuid4()), COUNT) not in partitions:
        pass
    return job_id


def member(mc: MultiCluster, name: str) -> Daemon:
    return next(d for d in mc.daemons if d.name == name)


def run_via(mc: MultiCluster, via: Daemon, name: str, job_id: str, count: int = 3) -> None:
    """Create a batch job through one member and wait until it ends SUCCEEDED."""
    path = mc.base / f"{name}.yaml"
    path.write_text(JOB.format(name=name, count=count))
    peers = [f"--jobmgr={via.address}", f"--resmgr=127.0.0.1:{mc.ports['resmgr']}",
             f"--hostmgr=127.0.0.1:{mc.ports['hostmgr']}"]
    result = subprocess.run([PELOTON, *peers, "-t", "20s", "job", "create", "-i", job_id,
                             "/DefaultResPool", str(path), "--wait", "--wait-timeout", "45s"],
                            cwd=mc.base, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "SUCCEEDED" in result.stdout, \
        result.stdout + result.stderr + mc.logs()


def ran_once(store: Store, job_id: str, count: int = 3) -> None:
    """Every task of the job succeeded on its first run (none launched again)."""
    runtimes = store.get_task_runtimes(job_id)
    assert sorted(runtimes) == list(range(count))
    assert {(rt.state, rt.run_id) for rt in runtimes.values()} == {(TaskState.SUCCEEDED, 1)}


def test_each_member_runs_the_jobs_of_its_partitions(cluster: MultiCluster, store: Store) -> None:
    held = owners(cluster)
    for name in ("m1", "m2"):
        job_id = job_id_in({p for p, m in held.items() if m == name})
        run_via(cluster, member(cluster, name), f"on-{name}", job_id)
        ran_once(store, job_id)


def test_a_sigtermed_member_hands_its_partitions_over_before_it_exits(
        cluster: MultiCluster, store: Store, tmp_path: Path) -> None:
    moving = {p for p, m in owners(cluster).items() if m == "m2"}
    assert moving
    leaver = member(cluster, "m2")
    stop(leaver.proc, timeout=10)  # SIGTERM
    assert all(f"releasing partition {p}: leaving" in leaver.log() for p in moving), \
        leaver.log()
    wait_for(lambda: set(owners(cluster).values()) == {"m1"} and len(owners(cluster)) == COUNT,
             HANDOVER, "m1 holding every partition")
    job_id = job_id_in(moving)
    run_via(cluster, member(cluster, "m1"), "after-handover", job_id)
    ran_once(store, job_id)
