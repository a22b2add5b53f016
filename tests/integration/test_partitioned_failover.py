"""All-active job managers as separate processes: exactly-once through a member's death
mid-update and through a member that still believes it owns partitions another holds.

The cluster is test_partitioned_jobmgr.py's: two job manager processes, members `m1` and
`m2` of `COUNT` partitions, on a real ZooKeeper (3 s sessions), sharing one resource
manager, host manager, placement engine and agent.  Each test starts its own cluster, as
each takes one member down:

* `m2`, driving a rolling update of a service job (batch size 1), is killed with SIGKILL
  mid-update; once ZooKeeper expires its session `m1` takes its partitions and the update
  ends SUCCEEDED with every instance on the new config;
* `m2`, driving a running batch job, is paused with SIGSTOP; `m1` takes its partitions once
  its session expires and finishes the job; then `m2` is resumed: believing for a moment
  that it still owns them, whatever it tries is refused (its in-process term, the store's
  fence or a peer's, docs/design/all-active-jobmgr.md, "Fence per partition": which one
  catches it depends on what it tries first, so the test requires none in particular but
  that nothing it did landed), lets them go, and rejoins.

"Exactly once" is counted on both sides: in the store (runtimes, and the pod events of each
run) and on the host (each run the agent started has its own sandbox, and every task prints
its config's marker there when it starts), so a run launched twice, or an instance started
twice on one config, shows.  Every wait has a deadline; only processes these tests started
are signalled.
"""

from __future__ import annotations

import re
import signal
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from peloton.core.model.update import UpdateInfo
from peloton.core.states import TaskState, WorkflowState, WorkflowType
from peloton.storage import Store, StoreOptions, open_store
from tests.harness.multiproc import MultiCluster
from tests.harness.procs import wait_for
from tests.integration.test_multiprocess import JOB, POOL
from tests.integration.test_partitioned_jobmgr import (
    COUNT,
    SESSION,
    cli_via,
    job_id_in,
    member,
    owners,
    ran_once,
    run_via,
    settled,
    states,
)

pytestmark = [pytest.mark.zookeeper, pytest.mark.e2e]

AGENT = "pf-agent"
#: Session expiry, the survivor's claim and its recovery of the partitions, with slack.
TAKEOVER = SESSION * 3
#: A rolling update or a batch job finishing under its new owner (generous: a slow machine).
FINISH = 90.0

SERVICE = """\
name: {name}
owner: test
owningteam: test
description: "partitioned failover service, {marker}"
instancecount: {count}
sla:
  priority: 1
  preemptible: true  # the pool reserves no disk: only preemptible tasks fit
defaultspec:
  containers:
  - resource:
      cpulimit: 0.1
      memlimitmb: 32
      disklimitmb: 10
    entrypoint:
      value: 'trap "sleep 1; exit 0" TERM; echo started {marker}; while :; do sleep 1; done'
"""


@pytest.fixture
def cluster(zookeeper: str, tmp_path: Path) -> Iterator[MultiCluster]:
    mc = MultiCluster(tmp_path, zookeeper, root=f"/pf-{uuid.uuid4().hex[:10]}",
                      session_timeout=SESSION)
    try:
        mc.ready(*[mc.spawn(role) for role in ("resmgr", "hostmgr", "placement")])
        mc.ready(*[mc.spawn("jobmgr", name, jobmgr={"partitions": COUNT, "member_id": name})
                   for name in ("m1", "m2")])
        mc.agent(AGENT)
        (tmp_path / "pool.yaml").write_text(POOL)
        wait_for(lambda: settled(mc, "m1", "m2"), 20, "both members holding their partitions")
        mc.cli("respool", "create", "/DefaultResPool", str(tmp_path / "pool.yaml"))
        yield mc
    finally:
        for d in mc.daemons:
            if d.proc.poll() is None:
                d.proc.send_signal(signal.SIGCONT)  # a stopped process cannot stop cleanly
        mc.close()


@pytest.fixture
def store(cluster: MultiCluster) -> Iterator[Store]:
    s = open_store(cluster.store_url, StoreOptions())
    yield s
    s.close()


def wait_or_show(mc: MultiCluster, predicate: Callable[[], bool], timeout: float, what: str,
                 show: Callable[[], object] = lambda: "") -> None:
    """`wait_for`, failing with what `show` returns and the daemons' last lines."""
    try:
        wait_for(predicate, timeout, what, interval=0.02)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{show()}\n{mc.logs(40)}") from None


def held_by(mc: MultiCluster, name: str) -> set[int]:
    return {p for p, m in owners(mc).items() if m == name}


def all_held_by(mc: MultiCluster, name: str) -> bool:
    held = owners(mc)
    return len(held) == COUNT and set(held.values()) == {name}


def host_starts(mc: MultiCluster, job_id: str, printed: str = r"started (\S+)"
                ) -> dict[int, list[str]]:
    """Instance -> what each of its runs printed when it started (the `printed` group), by
    run id: one sandbox per run the agent started (a run id is started at most once there),
    one line per start of the task in it."""
    sandboxes = mc.base / "agents" / AGENT / "sandboxes"
    runs: dict[int, dict[int, str]] = {}
    for box in sandboxes.glob(f"{job_id}-*-*"):
        instance, run = (int(n) for n in box.name[len(job_id) + 1:].split("-"))
        out = (box / "stdout").read_text() if (box / "stdout").exists() else ""
        runs.setdefault(instance, {})[run] = " ".join(re.findall(printed, out))
    return {i: [r[run] for run in sorted(r)] for i, r in runs.items()}


def stored_runs(store: Store, job_id: str, instance: int) -> dict[int, int]:
    """Run id -> config version of every run of an instance that reached RUNNING, from the
    pod events its owners stored."""
    return {e.run_id: e.config_version for e in store.get_pod_events(job_id, instance)
            if e.state == TaskState.RUNNING}


def latest_update(store: Store, job_id: str) -> UpdateInfo | None:
    """The job's newest UPDATE workflow, as stored."""
    return next((u for u in store.get_updates_for_job(job_id)
                 if u.type == WorkflowType.UPDATE), None)


def create_service(mc: MultiCluster, via: str, job_id: str, count: int) -> None:
    path = mc.base / "service-v1.yaml"
    path.write_text(SERVICE.format(name="rolling", marker="v1", count=count))
    created = cli_via(mc, member(mc, via), "job", "stateless", "create", "-i", job_id,
                      "/DefaultResPool", str(path), "0")
    assert created.returncode == 0, created.stdout + created.stderr + mc.logs()


def test_a_member_killed_mid_update_its_successor_finishes_it_each_run_once(
        cluster: MultiCluster, store: Store) -> None:
    count = 6
    theirs = held_by(cluster, "m2")
    job_id = job_id_in(theirs)
    create_service(cluster, "m1", job_id, count)  # forwarded to m2, its owner
    wait_or_show(cluster, lambda: {(rt.state, rt.run_id)
                                   for rt in store.get_task_runtimes(job_id).values()}
                 == {(TaskState.RUNNING, 1)} and len(store.get_task_runtimes(job_id)) == count,
                 60, "every instance of the service running",
                 lambda: store.get_task_runtimes(job_id))
    old = {rt.config_version for rt in store.get_task_runtimes(job_id).values()}
    assert len(old) == 1

    spec = cluster.base / "service-v2.yaml"
    spec.write_text(SERVICE.format(name="rolling", marker="v2", count=count))
    replaced = cli_via(cluster, member(cluster, "m1"), "job", "stateless", "replace", job_id,
                       str(spec), "1", "/DefaultResPool")
    assert replaced.returncode == 0, replaced.stdout + replaced.stderr + cluster.logs()

    def midway() -> bool:
        update = latest_update(store, job_id)
        return update is not None and update.state == WorkflowState.ROLLING_FORWARD and \
            2 <= len(update.instances_done) <= count - 2
    wait_or_show(cluster, midway, 60, "the rolling update part way through",
                 lambda: (store.get_updates_for_job(job_id), store.get_task_runtimes(job_id)))
    survivor = member(cluster, "m1")
    seen = len(survivor.tail.lines)
    cluster.kill9(member(cluster, "m2"))
    at_kill = latest_update(store, job_id)

    wait_for(lambda: all_held_by(cluster, "m1"), TAKEOVER,
             "m1 holding every partition after m2's session expired")
    wait_or_show(cluster, lambda: (u := latest_update(store, job_id)) is not None and
                 u.state.terminal, FINISH, "the update ending under m1",
                 lambda: (latest_update(store, job_id), store.get_task_runtimes(job_id)))
    update = latest_update(store, job_id)
    assert update is not None and update.state == WorkflowState.SUCCEEDED, update
    # It really was mid-update when m2 died.
    assert at_kill is not None and len(at_kill.instances_done) < count, at_kill
    assert sorted(update.instances_done) == list(range(count)) and not update.instances_failed
    new = update.config_version
    assert new not in old
    wait_for(lambda: {(rt.state, rt.config_version)
                      for rt in store.get_task_runtimes(job_id).values()}
             == {(TaskState.RUNNING, new)}, 30, "every instance running the new config")

    # Exactly once, in the store: per instance one run reached RUNNING on each config ...
    for instance in range(count):
        runs = stored_runs(store, job_id, instance)
        assert sorted(runs.values()) == sorted([*old, new]), (instance, runs)
    # ... and on the host: each instance started once on v1 and once on v2, nothing more.
    assert host_starts(cluster, job_id) == {i: ["v1", "v2"] for i in range(count)}
    after = survivor.tail.lines[seen:]
    assert not any("releasing partition" in line for line in after), after  # m1's stayed
    assert all(any(f"acquired partition {p} " in line for line in after) for p in theirs)


def test_a_paused_member_is_refused_after_its_successor_took_over_and_lets_go(
        cluster: MultiCluster, store: Store) -> None:
    paused, survivor = member(cluster, "m2"), member(cluster, "m1")
    theirs = held_by(cluster, "m2")
    epochs_before = acquired_epochs(paused.log())
    running = job_id_in(theirs)
    path = cluster.base / "paused.yaml"
    path.write_text(JOB.format(name="paused", count=3).replace("sleep 0.2", "sleep 8"))
    created = cli_via(cluster, paused, "job", "create", "-i", running, "/DefaultResPool",
                      str(path))
    assert created.returncode == 0, created.stdout + created.stderr
    wait_for(lambda: states(store, running) == {TaskState.RUNNING}, 30, "its tasks running")

    paused.proc.send_signal(signal.SIGSTOP)
    seen = len(paused.tail.lines)
    wait_for(lambda: all_held_by(cluster, "m1"), TAKEOVER,
             "m1 holding every partition once m2's session expired")
    # m1 continues: the job m2 was driving finishes under it, every run once, and a new
    # job of m2's partitions runs while m2 is still paused.
    wait_or_show(cluster, lambda: states(store, running) == {TaskState.SUCCEEDED}, FINISH,
                 "the paused member's job finishing under m1",
                 lambda: (sorted((i, rt.state.name, rt.run_id, rt.revision) for i, rt in
                                 store.get_task_runtimes(running).items()),
                          [line for line in survivor.tail.lines if "WARNING" in line
                           or "ERROR" in line or "recover" in line or "partition" in line]))
    ran_once(store, running)
    during = run_via(cluster, survivor, "during-pause", job_id_in(theirs))
    ran_once(store, during)

    paused.proc.send_signal(signal.SIGCONT)
    # m2 still believes it owns its partitions for a moment: the events of its job's runs
    # that ended while it was paused reach it, its long polls and calls resume; then it
    # notices its session is gone and releases every partition it held.
    wait_for(lambda: all(any(f"releasing partition {p}: ZooKeeper connection" in line
                             for line in paused.tail.lines[seen:]) for p in theirs),
             30, "m2 letting its partitions go")
    # It rejoins as a new session and takes its share back from m1 (a join).
    wait_for(lambda: settled(cluster, "m1", "m2"), 30, "m2 holding its share again")
    resumed = paused.tail.lines[seen:]
    refusals = [line for line in resumed if "jobmgr/partition/" in line]
    # What it tried after the pause was refused: by its term ended in process, by the
    # store's fence (a newer epoch claimed) or by a peer that heard the newer epoch.
    assert all(any(why in line for why in ("leadership term is over",
                                           "is no longer the leader's",
                                           "is over: a newer leader")) for line in refusals), \
        refusals
    # Nothing it wrote landed: the jobs are as m1 left them (each run once, nothing lost).
    for job in (running, during):
        ran_once(store, job)
    # Its partitions came back with new claims, newer than the ones it was paused with.
    epochs_after = acquired_epochs("\n".join(resumed))
    assert set(epochs_after) == theirs
    assert all(epochs_after[p] > epochs_before[p] for p in theirs), (epochs_before, epochs_after)
    for job in (running, during):  # each task started once on the host
        assert host_starts(cluster, job, r"hello (\d+)") == {i: [str(i)] for i in range(3)}

    again = run_via(cluster, paused, "after-resume", job_id_in(theirs))
    ran_once(store, again)


def acquired_epochs(log: str) -> dict[int, int]:
    """Partition -> the epoch of its latest claim, from a member's log."""
    return {int(p): int(e) for p, e in
            re.findall(r"acquired partition (\d+) \(epoch (\d+)\)", log)}
