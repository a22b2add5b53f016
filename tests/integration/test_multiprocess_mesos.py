"""Separate daemons with ZooKeeper election driving a Mesos cluster (the fake master).

The host manager is `peloton hostmgr` with `backend: mesos:<master>` (the leader) and
`--backend mesos:<master>` (the standby).  Jobs run as Mesos tasks on the fake master's
agents.  When the leading host manager is killed, the standby takes over: it subscribes with
the framework id the leader stored, so the master keeps the framework and its tasks, it
reconciles them, and a task that was running before the failover is still the job's
running task afterwards; new jobs complete on Mesos.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness.fake_mesos import FakeMesosMaster
from tests.harness.fake_mesos_agent import AgentSpec
from tests.harness.multiproc import MultiCluster
from tests.harness.procs import wait_for
from tests.integration.test_multiprocess import FAILOVER, POOL, SESSION, leader_port, run_job

pytestmark = [pytest.mark.zookeeper, pytest.mark.e2e]

#: Fast timings of the Mesos backend for a test (the `mesos:` section of the hostmgr config, a MesosConfig).
MESOS = {"tick_secs": 0.05, "agent_refresh_secs": 0.5, "resend_secs": 0.5}

SERVICE = """\
name: long-{suffix}
owningteam: test
description: "runs across the host manager failover"
instancecount: 1
sla: {{priority: 1, preemptible: true}}
defaultconfig:
  resource: {{cpulimit: 0.1, memlimitmb: 32, disklimitmb: 10}}
  command: {{shell: true, value: 'sleep 600'}}
"""


@pytest.fixture
def master(tmp_path: Path) -> Iterator[FakeMesosMaster]:
    fake = FakeMesosMaster(tmp_path / "mesos", (AgentSpec("mesos-a"), AgentSpec("mesos-b")),
                           heartbeat_secs=1.0).start()
    try:
        yield fake
    finally:
        fake.stop()


@pytest.fixture
def cluster(zookeeper: str, tmp_path: Path) -> Iterator[MultiCluster]:
    mc = MultiCluster(tmp_path, zookeeper, root=f"/mpm-{uuid.uuid4().hex[:10]}",
                      session_timeout=SESSION)
    try:
        yield mc
    finally:
        mc.close()


def test_multiprocess_cluster_runs_on_mesos_and_survives_a_host_manager_failover(
        cluster: MultiCluster, master: FakeMesosMaster) -> None:
    backend = f"mesos:{master.url}"
    leader = cluster.spawn("hostmgr", backend=backend, mesos=MESOS)
    daemons = [cluster.spawn(role) for role in ("resmgr", "placement", "jobmgr")]
    cluster.ready(leader, *daemons)
    for role in ("resmgr", "hostmgr", "jobmgr"):
        wait_for(lambda r=role: cluster.leader(r) is not None, 15, f"a {role} leader")  # type: ignore[misc]
    wait_for(lambda: "mesos-a" in cluster.cli("host", "query", check=False).stdout, 20,
             "the Mesos agents as hosts")
    (cluster.base / "pool.yaml").write_text(POOL)
    cluster.cli("respool", "create", "/DefaultResPool", str(cluster.base / "pool.yaml"))
    assert "SUCCEEDED" in run_job(cluster, "on-mesos")
    framework_id = master.framework().framework_id

    # A task that runs across the failover.
    (cluster.base / "long.yaml").write_text(SERVICE.format(suffix="1"))
    out = cluster.cli("job", "create", "/DefaultResPool", str(cluster.base / "long.yaml")).stdout
    job_id = next(w for w in out.split() if len(w) == 36 and w.count("-") == 4)
    try:
        wait_for(lambda: "RUNNING" in cluster.cli("task", "list", job_id, check=False).stdout,
                 45, "the long task running on Mesos")
    except AssertionError:
        raise AssertionError(cluster.cli("task", "list", job_id, check=False).stdout + out
                             + cluster.logs(60)) from None
    with master.lock:
        (task_id,) = list(master.framework().tasks)
    agent = next(a for a in master.agents.values() if task_id in a.tasks)
    proc = agent.tasks[task_id].proc
    assert proc is not None and proc.poll() is None

    standby = cluster.spawn("hostmgr", "hostmgr-2", args=("--backend", backend), mesos=MESOS)
    cluster.ready(standby)
    subscriptions = master.subscriptions
    cluster.kill9(leader)
    wait_for(lambda: leader_port(cluster, "hostmgr") == standby.port, FAILOVER,
             "the standby host manager to lead")
    wait_for(lambda: master.subscriptions > subscriptions, 20, "the standby to subscribe")
    # The same framework (the id from the store), its task untouched, and a reconciliation.
    assert list(master.frameworks) == [framework_id]
    assert task_id in master.framework().tasks and proc.poll() is None
    wait_for(lambda: any(c["type"] == "RECONCILE" and c["framework_id"]["value"] == framework_id
                         for c in master.calls[-200:]), 20, "a reconciliation after the failover")
    listing = cluster.cli("task", "list", job_id).stdout
    assert "RUNNING" in listing and agent.spec.hostname in listing, listing
    assert "SUCCEEDED" in run_job(cluster, "after-failover")
    cluster.cli("job", "stop", job_id)
    wait_for(lambda: proc.poll() is not None, 30, "the long task killed through the new leader")
