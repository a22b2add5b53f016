"""One cluster, one kind of job manager: a single leader and all-active members never both
drive jobs (peloton/cluster/daemons/members.py), on a real ZooKeeper and SQLite store.

With ZooKeeper a job manager is a member of 64 partitions by default; before, it led alone.
In a rolling upgrade both kinds run at once, so the first member fences the single leader
out of the store and records the partition count, after which a job manager configured to
lead alone refuses to.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from migrations import sql_runner
from peloton.cluster.daemons.members import (
    JOB_MANAGER_FENCE,
    fence_out_single_leader,
    refuse_to_lead_members,
)
from peloton.common.leader import JOB_MANAGER, new_client
from peloton.common.membership import PARTITIONS, role_path
from peloton.core.errors import FailedPrecondition
from peloton.storage import Store, open_store
from peloton.storage.leader_store import FencedOut
from tests.contract import factories as f
from tests.harness.multiproc import MultiCluster

pytestmark = pytest.mark.slow


@pytest.fixture
def root() -> str:
    return f"/guard-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def zk(zookeeper: str) -> Iterator[KazooClient]:
    client = new_client(zookeeper, session_timeout=10.0, use_gevent=False)
    client.start(10)
    yield client
    client.stop()
    client.close()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    sql_runner.upgrade(url)
    opened = open_store(url)
    yield opened
    opened.close()


def _leader_epoch(zk: KazooClient, root: str) -> int:
    """A zxid as a single leader's election gives one (its node's)."""
    return int(zk.create(f"{root}/leader-", b"", makepath=True, sequence=True,
                         ephemeral=True, include_data=True)[1].mzxid)


def test_the_first_member_fences_a_running_single_leader_out_of_the_store(
        zk: KazooClient, store: Store, root: str) -> None:
    led = _leader_epoch(zk, root)
    store.claim_leadership(JOB_MANAGER_FENCE, led, "old-leader")
    leader_view = store.with_fencing(JOB_MANAGER_FENCE, lambda: led)
    first = f.job_id()
    leader_view.create_job(first, f.job_spec(), f.job_runtime())  # it leads: writes land
    refuse_to_lead_members(zk, root)  # no member yet: a single leader may lead

    path = role_path(root, JOB_MANAGER, PARTITIONS)
    epoch = fence_out_single_leader(zk, store, path, 64, "m1")

    assert epoch > led and store.leader_epoch(JOB_MANAGER_FENCE) == epoch
    with pytest.raises(FencedOut):  # the old leader's next write is refused
        leader_view.create_job(f.job_id(), f.job_spec(), f.job_runtime())
    assert store.get_job_runtime(first) is not None  # nothing stored is lost
    assert zk.get(path)[0] == b"64"
    with pytest.raises(FailedPrecondition, match="64 job partitions") as refused:
        refuse_to_lead_members(zk, root)  # a single leader elected now will not lead
    assert refused.value.field == "jobmgr.partitions"
    # A second member (or a restarted one) claims again, newer still: members never write
    # through this fence, so it only keeps single leaders out.
    assert fence_out_single_leader(zk, store, path, 64, "m2") > epoch


def test_a_member_with_another_partition_count_claims_nothing(
        zk: KazooClient, store: Store, root: str) -> None:
    path = role_path(root, JOB_MANAGER, PARTITIONS)
    zk.create(path, b"16", makepath=True)
    led = _leader_epoch(zk, root)
    store.claim_leadership(JOB_MANAGER_FENCE, led, "old-leader")
    # The membership refuses to join, naming both counts (PartitionCountMismatch); the
    # fence is left to the members that agree with the cluster.
    assert fence_out_single_leader(zk, store, path, 64, "m1") == 0
    assert store.leader_epoch(JOB_MANAGER_FENCE) == led
    assert zk.get(path)[0] == b"16"


def test_a_job_manager_process_is_a_member_by_default_and_a_single_leader_then_refuses(
        zookeeper: str, tmp_path: Path, root: str) -> None:
    mc = MultiCluster(tmp_path, zookeeper, root=root)
    try:
        mc.ready(*[mc.spawn(role) for role in ("resmgr", "hostmgr", "placement")])
        # No partitions configured (null): the product's default with ZooKeeper.
        member = mc.spawn("jobmgr", "member", jobmgr={"partitions": None})
        mc.ready(member)
        member.tail.wait_for("single-leader fence", 30)
        member.tail.wait_for("acquired partition", 30)
        single = mc.spawn("jobmgr", "single", jobmgr={"partitions": 0})
        mc.ready(single)
        member.proc.terminate()  # the single leader's candidate now wins the election...
        member.proc.wait(30)
        single.tail.wait_for("will not lead it", 60)  # ...and refuses to lead
        assert not any("leader (epoch" in line for line in list(single.tail.lines))
    except Exception:
        print(mc.logs(40))
        raise
    finally:
        mc.close()
