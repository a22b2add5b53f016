"""A job manager leader paused past its session, then resumed, is refused by its peers.

The issue's run: a job manager leader SIGSTOPped for 25 s and then resumed killed, in the
45 ms before it stepped down, 2 runs of a job the new leader had just created, and took a
placement meant for the new leader.  Its store writes were refused; its calls to the
resource and host managers were not.  Now every call of a term carries its epoch and the
peers refuse an epoch older than one they have heard from (api/ports_grpc/term_fence.py).

Multi-process: resmgr, hostmgr, placement, two jobmgrs and an agent, each its own
process, leaders elected in a real ZooKeeper (3 s sessions).  Every wait has a deadline;
only processes this test started are signalled.
"""

from __future__ import annotations

import signal
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness.multiproc import Daemon, MultiCluster
from tests.harness.procs import wait_for
from tests.integration.test_multiprocess import FAILOVER, POOL, SESSION, leader_port, run_job

pytestmark = [pytest.mark.zookeeper, pytest.mark.e2e]


@pytest.fixture
def cluster(zookeeper: str, tmp_path: Path) -> Iterator[MultiCluster]:
    mc = MultiCluster(tmp_path, zookeeper, root=f"/pause-{uuid.uuid4().hex[:10]}",
                      session_timeout=SESSION)
    try:
        daemons = [mc.spawn(role) for role in ("resmgr", "hostmgr", "placement", "jobmgr")]
        mc.ready(*daemons)
        for role in ("resmgr", "hostmgr", "jobmgr"):
            wait_for(lambda r=role: mc.leader(r) is not None, 15, f"a {role} leader")  # type: ignore[misc]
        mc.agent("pause-agent")
        (tmp_path / "pool.yaml").write_text(POOL)
        mc.cli("respool", "create", "/DefaultResPool", str(tmp_path / "pool.yaml"))
        yield mc
    finally:
        for d in mc.daemons:
            if d.proc.poll() is None:
                d.proc.send_signal(signal.SIGCONT)  # a stopped process cannot stop cleanly
        mc.close()


def _named(cluster: MultiCluster, name: str) -> Daemon:
    return next(d for d in cluster.daemons if d.name == name)


def test_a_resumed_job_manager_leader_is_refused_by_the_resource_and_host_managers(
        cluster: MultiCluster) -> None:
    old = _named(cluster, "jobmgr")
    standby = cluster.spawn("jobmgr", "jobmgr-2")
    cluster.ready(standby)
    run_job(cluster, "before-pause", count=1)

    old.proc.send_signal(signal.SIGSTOP)
    wait_for(lambda: leader_port(cluster, "jobmgr") == standby.port, FAILOVER,
             "the standby job manager to lead while the leader is paused")
    run_job(cluster, "by-the-new-leader", count=2)  # its recovery and this job reach both peers

    old.proc.send_signal(signal.SIGCONT)
    peers = [_named(cluster, "resmgr"), _named(cluster, "hostmgr")]
    wait_for(lambda: any("is over: a newer leader" in p.log() for p in peers), 30,
             "a peer to refuse the resumed leader's calls")
    wait_for(lambda: "no longer leader" in old.log(), 30, "the resumed leader to step down")
    run_job(cluster, "after-the-resume", count=2)
