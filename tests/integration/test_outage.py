"""Every acknowledged job finishes after an outage, and no run executes twice (issue 23 item 7).

Separate daemons, two of each (resmgr, hostmgr, placement, jobmgr), leaders elected in a
ZooKeeper and state in a PostgreSQL this test owns and may kill, two agents.  Each test
creates a bounded number of 2-instance one-second batch jobs, injects one fault while
creating (PostgreSQL killed -9, ZooKeeper killed -9, or an agent killed -9; each for
OUTAGE seconds, then started again on the same port and data), creates more, and then
wants every job whose create was acknowledged SUCCEEDED within DEADLINE — what each
reaches with no fault.  A create that failed during the outage was not acknowledged and
is not counted.

Each task writes a record when it starts and when it ends, into a directory every task
uid may write; a run id that started twice, or an instance that ran to its end twice,
is a failure.  Everything binds 127.0.0.1; only processes this test started are
signalled, by PID; every wait polls with a deadline.
"""

from __future__ import annotations

import shutil
import signal
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from peloton.api.client import PelotonClient
from peloton.api.gen.peloton.api.v0.job import job_pb2
from peloton.api.yaml_load import load_job_config
from peloton.core.errors import PelotonError
from tests.harness.multiproc import MultiCluster
from tests.harness.postgres import PostgresServer
from tests.harness.procs import stop, wait_for
from tests.harness.zookeeper import ZooKeeperServer
from tests.integration.test_multiprocess import POOL

pytestmark = [pytest.mark.zookeeper, pytest.mark.e2e]

SESSION = 3.0
#: Jobs created before the fault, and after it is repaired (more may be acknowledged during it).
BEFORE, AFTER = 10, 10
#: How long each fault lasts.
OUTAGE = 12.0
#: From the end of the create loop until every acknowledged job must have ended.
DEADLINE = 120.0
#: One call's timeout: a call into an outage gives up quickly and the loop goes on.
CALL = 4.0

JOB = """\
name: {name}
owningteam: test
description: "outage test job"
instancecount: 2
sla: {{priority: 1, preemptible: true}}
defaultconfig:
  resource: {{cpulimit: 0.1, memlimitmb: 32, disklimitmb: 10}}
  command:
    shell: true
    value: >-
      echo "$PELOTON_JOB_ID $PELOTON_INSTANCE_ID $PELOTON_TASK_ID" > "$(mktemp {runs}/start.XXXXXXXX)";
      sleep 1;
      echo "$PELOTON_JOB_ID $PELOTON_INSTANCE_ID $PELOTON_TASK_ID" > "$(mktemp {runs}/end.XXXXXXXX)"
"""


@dataclass
class Outage:
    """One cluster under test and what its fault does."""

    cluster: MultiCluster
    zk: ZooKeeperServer
    pg: PostgresServer
    runs: Path
    respool_id: str
    acknowledged: list[str] = field(default_factory=list)
    refused: int = 0

    def _leader_call(self, call: Callable[[PelotonClient], object]) -> object:
        """`call` on whichever job manager leads (found by trying each: a standby refuses)."""
        last: Exception | None = None
        for d in self.cluster.daemons:
            if d.role != "jobmgr" or d.proc.poll() is not None:
                continue
            try:
                with PelotonClient(jobmgr=d.address, resmgr=d.address, hostmgr=d.address,
                                   timeout=CALL) as client:
                    return call(client)
            except PelotonError as exc:
                last = exc
        raise last or AssertionError("no job manager runs")

    def create(self, name: str) -> bool:
        """Try to create one job; True (and its id recorded) when the create was acknowledged."""
        config = load_job_config(JOB.format(name=name, runs=self.runs)).message
        config.respoolID.value = self.respool_id
        try:
            reply = self._leader_call(lambda c: c.create_job(config))
        except PelotonError:
            self.refused += 1
            return False
        assert isinstance(reply, job_pb2.CreateResponse)
        self.acknowledged.append(reply.jobId.value)
        return True

    def state(self, job_id: str) -> str:
        """The job's state, or 'UNKNOWN' while no leader answers."""
        try:
            reply = self._leader_call(lambda c: c.get_job(job_id))
        except PelotonError:
            return "UNKNOWN"
        assert isinstance(reply, job_pb2.GetResponse)
        return job_pb2.JobState.Name(reply.jobInfo.runtime.state)

    def records(self, kind: str) -> list[tuple[str, str, str]]:
        """(job id, instance, run id) of every task record of `kind` (start or end)."""
        out = []
        for path in self.runs.glob(f"{kind}.*"):
            parts = path.read_text().split()
            if len(parts) == 3:
                out.append((parts[0], parts[1], parts[2]))
        return out


@pytest.fixture
def outage(tmp_path: Path) -> Iterator[Outage]:
    zk = ZooKeeperServer(tmp_path / "zookeeper")
    # Durable, as a production store is: without fsync and synchronous commit a killed
    # server forgets its last acknowledged commits, and a job with them.
    pg = PostgresServer(durable=True)
    # Tasks run as unprivileged uids, who cannot enter pytest's tmp_path (mode 0700).
    runs = Path(tempfile.mkdtemp(prefix="peloton-outage-runs-", dir="/tmp"))
    runs.chmod(0o1777)
    cluster: MultiCluster | None = None
    try:
        zk.start()
        pg.start()
        url = pg.create_database(f"outage_{uuid.uuid4().hex[:10]}")
        cluster = MultiCluster(tmp_path, zk.hosts, root="/outage", session_timeout=SESSION,
                               store_url=url)
        daemons = [cluster.spawn(role, f"{role}-{i}")
                   for i in (1, 2) for role in ("resmgr", "hostmgr", "placement", "jobmgr")]
        cluster.ready(*daemons)
        for role in ("resmgr", "hostmgr", "jobmgr"):
            wait_for(lambda r=role: cluster.leader(r) is not None, 20,  # type: ignore[misc]
                     f"a {role} leader")
        cluster.agent("outage-agent-1")
        cluster.agent("outage-agent-2")
        (tmp_path / "pool.yaml").write_text(POOL)
        cluster.cli("respool", "create", "/DefaultResPool", str(tmp_path / "pool.yaml"))
        with PelotonClient(zk_servers=[zk.hosts], zk_root="/outage", timeout=10) as client:
            respool_id = client.lookup_respool_id("/DefaultResPool").id.value
        yield Outage(cluster, zk, pg, runs, respool_id)
    finally:
        if cluster is not None:
            cluster.close()
        zk.stop()
        pg.stop(signal.SIGKILL)
        shutil.rmtree(runs, ignore_errors=True)


def _kill_store(o: Outage) -> Callable[[], None]:
    o.pg.kill(signal.SIGKILL)
    return o.pg.restart


def _kill_zookeeper(o: Outage) -> Callable[[], None]:
    o.zk.kill()
    return o.zk.start


def _kill_agent(o: Outage) -> Callable[[], None]:
    # Jobs go to both agents, so the first has running work when it dies; it comes back
    # with the same name and work directory, as a restarted agent would.
    victim = o.cluster.agents[0]
    stop(victim, signal.SIGKILL)
    o.cluster.agents.remove(victim)

    def restart() -> None:
        o.cluster.agent("outage-agent-1")
    return restart


def _no_fault(o: Outage) -> Callable[[], None]:
    return lambda: None


#: "none" is the control: what every job reaches without a fault.
FAULTS: dict[str, Callable[[Outage], Callable[[], None]]] = {
    "none": _no_fault, "store": _kill_store, "zookeeper": _kill_zookeeper, "agent": _kill_agent,
}


@pytest.mark.parametrize("fault", ["none", "store", "zookeeper", "agent"])
def test_every_acknowledged_job_succeeds_and_no_run_executes_twice(
        outage: Outage, fault: str) -> None:
    started = time.monotonic()
    for i in range(BEFORE):
        wait_for(lambda i=i: outage.create(f"before-{i}"), 30,  # type: ignore[misc]
                 f"job before-{i} to be created")

    repair = FAULTS[fault](outage)
    faulted = time.monotonic()
    attempt = 0
    while time.monotonic() - faulted < OUTAGE:  # keep creating through the outage
        outage.create(f"during-{attempt}")
        attempt += 1
        time.sleep(1.0)  # pacing the loop, not waiting for a state
    repair()
    repaired = time.monotonic()

    for i in range(AFTER):
        wait_for(lambda i=i: outage.create(f"after-{i}"), 60,  # type: ignore[misc]
                 f"job after-{i} to be created after the {fault} outage")
    loop_ended = time.monotonic()

    terminal = {"SUCCEEDED", "FAILED", "KILLED", "DELETED"}
    states: dict[str, str] = {}

    def all_ended() -> bool:
        for job_id in outage.acknowledged:
            if states.get(job_id) not in terminal:
                states[job_id] = outage.state(job_id)
        return all(states[j] in terminal for j in outage.acknowledged)

    try:
        wait_for(all_ended, DEADLINE, "every acknowledged job to end", interval=1.0)
    except AssertionError:
        pass  # the assertion below names the jobs that did not end
    ended = time.monotonic()
    print(f"\n{fault}: {len(outage.acknowledged)} acknowledged, {outage.refused} refused; "
          f"{BEFORE} created in {faulted - started:.1f}s, outage {repaired - faulted:.1f}s, "
          f"{AFTER} more in {loop_ended - repaired:.1f}s, all ended "
          f"{ended - loop_ended:.1f}s after the loop")
    for d in outage.cluster.daemons:  # kept for reading after a failure
        (outage.cluster.base / f"{d.name}.log").write_text(d.log())
    by_state = Counter(states.get(j, "UNKNOWN") for j in outage.acknowledged)
    stuck = [j for j in outage.acknowledged if states.get(j) != "SUCCEEDED"]
    ended_runs = Counter(job for job, _, _ in outage.records("end"))
    why = "" if not stuck else ", ".join(
        f"{j[:8]} {states.get(j)} ({ended_runs[j]} ended)" for j in stuck) + "\n" + "\n".join(
        outage.cluster.cli("job", verb, stuck[0], check=False).stdout
        for verb in ("status", "explain")) + outage.cluster.cli(
            "-j", "task", "list", stuck[0], check=False).stdout
    assert by_state == Counter({"SUCCEEDED": len(outage.acknowledged)}), (
        f"after the {fault} outage: {dict(by_state)}; not succeeded: "
        f"{stuck[:10]}\n{why}\n" + outage.cluster.logs(40))

    starts = Counter(run for _, _, run in outage.records("start"))
    assert [r for r, n in starts.items() if n > 1] == [], "a run id executed twice"
    ends = Counter((job, inst) for job, inst, _ in outage.records("end"))
    twice = [k for k, n in ends.items() if n > 1]
    assert twice == [], f"instances that ran to their end twice: {twice[:10]}"
    acked = set(outage.acknowledged)
    assert {(j, i) for j, i in ends if j in acked} == {(j, str(i)) for j in acked for i in (0, 1)}
