"""Multi-process mode: every daemon its own process, leaders elected in a real ZooKeeper.

One cluster (resmgr, hostmgr, placement, jobmgr and one agent, each a
`peloton ...` process on free ports) serves the whole module; the CLI finds
the leaders with `-z`.  The failover tests add a standby, `kill -9` the
leader and check that the standby takes over within the session timeout
(3 s) and that a new job still completes.  Every wait has a deadline.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from peloton.api.client import PelotonClient
from peloton.core.errors import Unavailable
from tests.harness.multiproc import Daemon, MultiCluster
from tests.harness.procs import wait_for

pytestmark = [pytest.mark.zookeeper, pytest.mark.e2e]

SESSION = 3.0
#: Session expiry, re-election and the new leader's recovery, with slack for a slow machine.
FAILOVER = SESSION * 2 + 6

POOL = """\
name: DefaultResPool
owningteam: test
description: "multi-process test pool"
resources:
- {kind: cpu, reservation: 1, limit: 4, share: 1}
- {kind: memory, reservation: 256, limit: 4096, share: 1}
- {kind: disk, reservation: 0, limit: 100000, share: 1}
- {kind: gpu, reservation: 0, limit: 0, share: 1}
policy: 1
"""

JOB = """\
name: {name}
owningteam: test
description: "multi-process test job"
instancecount: {count}
sla: {{priority: 1, preemptible: true}}
defaultconfig:
  resource: {{cpulimit: 0.1, memlimitmb: 32, disklimitmb: 10}}
  restartpolicy: {{maxfailures: 2}}
  command: {{shell: true, value: 'echo hello $PELOTON_INSTANCE_ID; sleep 0.2'}}
"""


@pytest.fixture(scope="module")
def cluster(zookeeper: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[MultiCluster]:
    base = tmp_path_factory.mktemp("multiprocess")
    mc = MultiCluster(base, zookeeper, root=f"/mp-{uuid.uuid4().hex[:10]}", session_timeout=SESSION)
    try:
        daemons = [mc.spawn(role) for role in ("resmgr", "hostmgr", "placement", "jobmgr")]
        mc.ready(*daemons)
        for role in ("resmgr", "hostmgr", "jobmgr"):
            wait_for(lambda r=role: mc.leader(r) is not None, 15, f"a {role} leader")  # type: ignore[misc]
        mc.agent("mp-agent-1")
        (base / "pool.yaml").write_text(POOL)
        mc.cli("respool", "create", "/DefaultResPool", str(base / "pool.yaml"))
        yield mc
    finally:
        mc.close()


def daemon(cluster: MultiCluster, name: str) -> Daemon:
    return next(d for d in cluster.daemons if d.name == name)


def leader_port(cluster: MultiCluster, role: str) -> int | None:
    """The gRPC port the role's leader published (None while there is no leader)."""
    leader = cluster.leader(role)
    return leader.grpc if leader is not None else None


class _NonLeader:
    """Calls a standby directly and expects UNAVAILABLE "call to non-leader node"."""

    def __init__(self, standby: Daemon) -> None:
        self.address = standby.address

    def __getattr__(self, method: str) -> Callable[..., None]:
        def call(*args: object) -> None:
            with PelotonClient(jobmgr=self.address, resmgr=self.address, hostmgr=self.address,
                               timeout=5.0) as client, \
                    pytest.raises(Unavailable, match="call to non-leader node"):
                getattr(client, method)(*args)
        return call


def non_leader(standby: Daemon) -> _NonLeader:
    """See _NonLeader."""
    return _NonLeader(standby)


def run_job(cluster: MultiCluster, name: str, count: int = 3) -> str:
    """Create a batch job with the CLI and wait until it ends; returns the CLI output."""
    path = cluster.base / f"{name}.yaml"
    path.write_text(JOB.format(name=name, count=count))
    result = cluster.cli("job", "create", "/DefaultResPool", str(path), "--wait",
                         "--wait-timeout", "45s", timeout=60)
    assert "SUCCEEDED" in result.stdout, result.stdout + cluster.logs()
    return result.stdout


def test_each_daemon_leads_its_role_and_a_batch_job_completes(cluster: MultiCluster) -> None:
    for role in ("resmgr", "hostmgr", "jobmgr"):
        leader = cluster.leader(role)
        assert leader is not None
        assert (leader.ip, leader.grpc) == ("127.0.0.1", daemon(cluster, role).port)
    run_job(cluster, "hello")
    hosts = cluster.cli("host", "query").stdout
    assert "mp-agent-1" in hosts and "UP" in hosts


def pool_cpu_allocation(cluster: MultiCluster) -> float:
    """What the resource manager's leader counts as allocated cpu in /DefaultResPool."""
    pools = json.loads(cluster.cli("respool", "dump", "--format", "json").stdout)
    pool = next(p for p in pools if p["path"]["value"] == "/DefaultResPool")
    return float(next(u["allocation"] for u in pool["usage"] if u["kind"] == "cpu"))


def task_states(cluster: MultiCluster, job_id: str) -> dict[str, str]:
    """run id -> state of a job's tasks (the current run of each)."""
    tasks = json.loads(cluster.cli("-j", "task", "list", job_id).stdout)
    return {t["runtime"]["mesosTaskId"]["value"]: t["runtime"]["state"]
            for t in tasks.get("result", {}).get("value", {}).values()}


def test_resmgr_standby_answers_unavailable_then_takes_over_from_a_killed_leader(
        cluster: MultiCluster) -> None:
    leader = daemon(cluster, "resmgr")
    (cluster.base / "long.yaml").write_text(
        JOB.format(name="long", count=1).replace("sleep 0.2", "sleep 30"))
    out = cluster.cli("job", "create", "/DefaultResPool", str(cluster.base / "long.yaml")).stdout
    long_job = out.split()[1]
    wait_for(lambda: list(task_states(cluster, long_job).values()) == ["RUNNING"], 20,
             "the long task to run")
    running = task_states(cluster, long_job)
    standby = cluster.spawn("resmgr", "resmgr-2")
    cluster.ready(standby)
    non_leader(standby).lookup_respool_id("/DefaultResPool")
    killed_at = time.monotonic()
    cluster.kill9(leader)
    wait_for(lambda: leader_port(cluster, "resmgr") == standby.port, FAILOVER,
             "the standby resource manager to lead")
    took = time.monotonic() - killed_at
    print(f"resource manager failover: {took:.1f}s")
    assert took <= FAILOVER
    # The new leader loaded the pools from storage; the job manager handed it the running
    # task back (its allocation counts again), and the task kept running undisturbed.
    wait_for(lambda: pool_cpu_allocation(cluster) >= 0.1 - 1e-6, 15,
             "the running task's allocation in the new resource manager")
    assert task_states(cluster, long_job) == running
    run_job(cluster, "after-resmgr-failover")
    cluster.cli("job", "stop", long_job)


def test_hostmgr_failover_agents_follow_and_a_new_job_completes(cluster: MultiCluster) -> None:
    leader = daemon(cluster, "hostmgr")
    standby = cluster.spawn("hostmgr", "hostmgr-2")
    cluster.ready(standby)
    non_leader(standby).query_hosts()
    cluster.kill9(leader)
    wait_for(lambda: leader_port(cluster, "hostmgr") == standby.port, FAILOVER,
             "the standby host manager to lead")
    # The agent found the new leader in ZooKeeper and registered with it.
    wait_for(lambda: "mp-agent-1" in cluster.cli("host", "query", check=False).stdout,
             FAILOVER, "the agent to register with the new host manager")
    run_job(cluster, "after-hostmgr-failover")


def test_jobmgr_failover_the_standby_recovers_jobs_and_runs_new_ones(cluster: MultiCluster) -> None:
    leader = daemon(cluster, "jobmgr")
    standby = cluster.spawn("jobmgr", "jobmgr-2")
    cluster.ready(standby)
    done = run_job(cluster, "before-jobmgr-failover", count=1)
    job_id = done.split()[1]
    non_leader(standby).get_job(job_id)
    cluster.kill9(leader)
    wait_for(lambda: leader_port(cluster, "jobmgr") == standby.port, FAILOVER,
             "the standby job manager to lead")
    assert "SUCCEEDED" in cluster.cli("job", "get", job_id).stdout  # read back from storage
    run_job(cluster, "after-jobmgr-failover")


def test_without_zookeeper_each_daemon_runs_alone_and_finds_the_others_by_address(
        tmp_path: Path) -> None:
    mc = MultiCluster(tmp_path)
    try:
        mc.ready(*[mc.spawn(role) for role in ("resmgr", "hostmgr", "placement", "jobmgr")])
        mc.agent("solo-agent")
        (tmp_path / "pool.yaml").write_text(POOL)
        mc.cli("respool", "create", "/DefaultResPool", str(tmp_path / "pool.yaml"))
        run_job(mc, "solo")
    finally:
        mc.close()
