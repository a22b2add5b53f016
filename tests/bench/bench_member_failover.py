"""A job-manager member's failover, SIGTERM and kill -9 (issue 24's "done when").

`peloton up --jobmgrs 2` as processes (peloton/cluster/processes.py: a ZooKeeper it
starts, the resource and host managers - simulated hosts in the host manager - the
placement engine and two all-active job managers, `jobmgr-1` and `jobmgr-2`, members of
64 job partitions over one SQLite store).  `jobmgr-2` is the victim, `jobmgr-1` the
survivor, and every write goes through the survivor: a CreateJob of a one-task batch job
whose id is drawn so that the job falls in a chosen partition.  A create with a chosen id
is the cheapest write routed by job id (the client takes the id; no job has to exist
first; the id alone names the partition, so the survivor forwards a create of one of the
victim's partitions to the victim while it holds it).  Every write has a 2 s client
deadline; a failed one is counted and the writer goes on with a fresh id.

Two clients write from before the signal to a few seconds after the takeover, back to
back: one into the survivor's own partitions, one into the victim's, in turn.  At the
signal, one more writer per partition of the victim waits until ZooKeeper names the
survivor that partition's holder (a watch of the bench's own session: waiting writers
would load the survivor they wait for) and then writes until the survivor itself acknowledges a
write there.  Which member made a job is read from the members' logs ("created job
<id>"): a create the victim acknowledged after the signal, before it let go, is not a
resume.  Per scenario (`sigterm`: SIGTERM, the graceful leave; `kill9`: SIGKILL, the
partitions move when ZooKeeper expires the victim's session; each on a fresh cluster):

- `member_failover.<s>.resume_s` (SIGTERM <= 1, kill -9 <= 5): seconds from the signal to
  the first acknowledged write into one of the victim's partitions that the survivor made;
- `...all_resumed_s` (the same targets): until the last of the victim's partitions took
  one;
- `...client_resume_s`: the in-turn client's first write the survivor made (it waits for
  whichever partition it was on);
- `...others_max_gap_s`: the largest gap between acknowledged writes into the survivor's
  own partitions from the signal to the writers' end (the gap spanning the signal
  included), against the same before the signal in the note;
- `...others_failed` (0): failed writes into the survivor's own partitions over the whole
  run: with the gap, the proof that they never stopped;
- `...probe_jobs_succeeded` and `...probe_jobs_not_succeeded_once` (0): acknowledged probe
  jobs that did (not) end SUCCEEDED with their one task, no run but the task's own
  reported RUNNING and that one at most once (the store), and why not.  A run that never
  started (its launch died with the killed member before it reached a host) may be
  replaced, and one that ran and ended while its partition was between owners is known by
  its end alone (the takeover's reconcile reports the latest state): Peloton does both.

The session timeout in force is the job managers' default as `ProcessesConfig` runs them
(the victim's written config is loaded back, as the daemon loads it, to say which); the
benchmark sets none of its own.  Sizes: 5 s of writing before the signal and after the
takeover by default, 2 s smoke; 50 simulated four-cpu hosts, tasks of 1 s.  Without
ZooKeeper and Java it prints BENCH_SKIP.  Every process it starts is stopped by PID.
`BENCH_KEEP_DIR=DIR` keeps each cluster's data directory (configs, logs, store) under DIR.
"""

from __future__ import annotations

from peloton.common.geventsetup import setup

setup()

import itertools  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from collections import Counter  # noqa: E402
from collections.abc import Iterable  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from datetime import datetime  # noqa: E402
from pathlib import Path  # noqa: E402

import gevent  # noqa: E402
from kazoo.client import KazooClient  # noqa: E402
from kazoo.exceptions import NoNodeError  # noqa: E402

from peloton.api.client import PelotonClient  # noqa: E402
from peloton.cluster.daemons.config import JobmgrProcessConfig  # noqa: E402
from peloton.cluster.daemons.config import load as load_config  # noqa: E402
from peloton.cluster.processes import ProcessCluster, ProcessesConfig  # noqa: E402
from peloton.common.leader import JOB_MANAGER  # noqa: E402
from peloton.common.membership import MEMBERS, PARTITIONS, role_path  # noqa: E402
from peloton.core.errors import NotFound  # noqa: E402
from peloton.core.partitions import DEFAULT_PARTITIONS, assign  # noqa: E402
from peloton.core.states import JobState, TaskState  # noqa: E402
from peloton.storage import Store, StoreOptions, open_store  # noqa: E402
from tests.bench.bench_cluster import make_pool  # noqa: E402
from tests.bench.common import load, report, scaled, skipped_without_zookeeper, until  # noqa: E402
from tests.bench.member_probes import (  # noqa: E402
    PROBE_INTERVAL_S,
    PROBE_TIMEOUT_S,
    Creators,
    Probe,
    Prober,
    taken_over,
    write_when_held,
)

SURVIVOR, VICTIM = "jobmgr-1", "jobmgr-2"
MEMBER_IDS = (SURVIVOR, VICTIM)
ZK_ROOT = "/bench-member-failover"
HOSTS = 50
#: 50 simulated hosts of 4 cpus whose tasks run 1 s: every probe job ends soon.
BACKEND = f"sim:{HOSTS}:1:4"
#: Seconds of probing before the signal (the baseline) and after the takeover.
BEFORE_S = scaled(5.0, smoke=2.0)
AFTER_S = scaled(5.0, smoke=2.0)
SETTLE_TIMEOUT_S = 60.0
#: Beyond the session timeout, how long the survivor may take to hold the victim's partitions.
TAKEOVER_SLACK_S = 30.0
#: How long the acknowledged probe jobs may take to end once the probers stop.
FINISH_TIMEOUT_S = 90.0
VICTIM_EXIT_S = 30.0

STAMP = r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})"
ACQUIRED = re.compile(STAMP + r" .*membership (\S+): acquired partition (\d+) ")
RELEASING = re.compile(STAMP + r" .*membership (\S+): releasing partition (\d+): ")


@dataclass(frozen=True)
class Outcome:
    """One scenario's measurements (times in seconds from the signal unless said)."""

    scenario: str
    session_timeout: float
    resumed: dict[int, float]
    partitions: int
    prober_resume_s: float
    victim_acked_after: int
    victim_failed: int
    victim_max_gap_s: float
    released_s: tuple[float, float] | None
    acquired_s: tuple[float, float]
    victim_exit_s: float
    others_max_gap_s: float
    others_baseline_gap_s: float
    others_failed: int
    others_acked: int
    probe_window_s: float
    acked_jobs: int
    bad: dict[str, str]
    ambiguous: int
    errors: list[str]


def holders(zk: KazooClient) -> dict[int, str]:
    """Partition -> the member holding it, as ZooKeeper says."""
    base = role_path(ZK_ROOT, JOB_MANAGER, PARTITIONS)
    held: dict[int, str] = {}
    try:
        children = zk.get_children(base)
    except NoNodeError:
        return held
    for child in children:
        try:
            held[int(child)] = zk.get(f"{base}/{child}")[0].decode()
        except NoNodeError:
            pass
    return held


def settled(zk: KazooClient) -> bool:
    """Both members joined and every partition held by the member the assignment names."""
    want = assign(MEMBER_IDS, DEFAULT_PARTITIONS)
    try:
        joined = len(zk.get_children(role_path(ZK_ROOT, JOB_MANAGER, MEMBERS)))
    except NoNodeError:
        return False
    return joined == len(MEMBER_IDS) and holders(zk) == {
        p: want.owner(p) for p in range(want.count)}


def log_of(cluster: ProcessCluster, name: str) -> Path:
    return next(p.log for p in cluster.procs if p.name == name)


def membership_events(text: str, pattern: re.Pattern[str], member: str,
                      partitions: Iterable[int], since_wall: float) -> dict[int, float]:
    """Partition -> the wall-clock time (epoch seconds) of the first of `pattern`'s log lines
    of `member` about it at or after `since_wall` (log stamps have millisecond resolution)."""
    wanted = set(partitions)
    times: dict[int, float] = {}
    for stamp, who, partition in pattern.findall(text):
        if who != member or int(partition) not in wanted:
            continue
        at = datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()
        if at >= since_wall - 0.001:
            times.setdefault(int(partition), at)
    return times


def max_gap(acks: list[float], start: float, end: float) -> float:
    """The largest gap between consecutive acknowledgement times that ends in [start, end]
    (the gap spanning `start` included; an open gap at `end` counts up to `end`)."""
    times = sorted(acks)
    before = [t for t in times if t < start]
    inside = [t for t in times if start <= t <= end]
    points = ([before[-1]] if before else [start]) + inside + [end]
    return max((b - a for a, b in itertools.pairwise(points)), default=end - start)


def finished(store: Store, job_ids: list[str]) -> bool:
    """Every job in a terminal state (a job not stored yet is not)."""
    for job_id in job_ids:
        try:
            if not JobState(store.get_job_runtime(job_id).state).terminal:
                return False
        except NotFound:
            return False
    return True


def wrong(store: Store, job_id: str) -> str:
    """What is wrong with a probe job ("" if it SUCCEEDED with its one task and no run but
    the task's own reported RUNNING, that one at most once), read from the store."""
    why = []
    state = store.get_job_runtime(job_id).state
    if state != JobState.SUCCEEDED:
        why.append(f"job {state}")
    runtimes = store.get_task_runtimes(job_id)
    if sorted(runtimes) != [0]:
        return ", ".join([*why, f"tasks {sorted(runtimes)}"])
    task = runtimes[0]
    if task.state != TaskState.SUCCEEDED:
        why.append(f"task {task.state} ({task.message})")
    # No run but the task's own ran, and it at most once.  A run that never started (its
    # launch died with a killed member before it reached a host) is replaced, as Peloton
    # does: not a second run.  A run that ran and ended while its partition was between
    # owners is learnt from the takeover's reconcile by its end alone: its RUNNING is not
    # in the history, as on Peloton.
    running = [e.run_id for e in store.get_pod_events(job_id, 0) if e.state == TaskState.RUNNING]
    if set(running) - {task.run_id} or len(running) > 1:
        why.append(f"task on run {task.run_id}, runs reported RUNNING {running}")
    return ", ".join(why)


def stored(store: Store, job_id: str) -> bool:
    try:
        store.get_job_runtime(job_id)
        return True
    except NotFound:
        return False


def session_in_force(cluster: ProcessCluster) -> float:
    """The ZooKeeper session timeout the victim runs with, from its written config loaded
    as the daemon loads it: a member's own (`jobmgr.member_session_timeout`) where the
    config has one, else election.session_timeout."""
    cfg = load_config(JobmgrProcessConfig, [log_of(cluster, VICTIM).with_suffix(".yaml")])
    return float(getattr(cfg, "session_timeout", cfg.election.session_timeout))


def scenario(base: Path, name: str, sig: signal.Signals) -> Outcome:
    """One fresh cluster: probe, signal the victim, probe on, measure; stop it all."""
    cluster = ProcessCluster(ProcessesConfig(
        jobmgrs=2, data_dir=base, agents=0, backend=BACKEND, jobmgr_port=0, resmgr_port=0,
        hostmgr_port=0, zk_root=ZK_ROOT))
    clients: list[PelotonClient] = []
    zk: KazooClient | None = None
    stop = threading.Event()
    workers: list[gevent.Greenlet] = []
    store: Store | None = None
    try:
        cluster.start()
        zk = KazooClient(hosts=cluster.zk)
        zk.start(timeout=15)
        until(lambda: settled(zk), SETTLE_TIMEOUT_S, "both members holding their partitions",
              interval=0.2)
        session = session_in_force(cluster)
        want = assign(MEMBER_IDS, DEFAULT_PARTITIONS)
        theirs = tuple(p for p in range(want.count) if want.owner(p) == VICTIM)
        ours = tuple(p for p in range(want.count) if want.owner(p) == SURVIVOR)
        where = cluster.addresses

        def client(timeout: float) -> PelotonClient:
            clients.append(PelotonClient(jobmgr=where[SURVIVOR], resmgr=where["resmgr"],
                                         hostmgr=where["hostmgr"], timeout=timeout))
            return clients[-1]

        pool = make_pool(client(30), HOSTS * 4.0)
        probers = {"ours": Prober(client(PROBE_TIMEOUT_S), pool, ours, stop),
                   "theirs": Prober(client(PROBE_TIMEOUT_S), pool, theirs, stop)}
        creators = Creators({m: log_of(cluster, m) for m in MEMBER_IDS})
        started = time.monotonic()
        workers = [gevent.spawn(p.run) for p in probers.values()]
        time.sleep(BEFORE_S)  # the baseline: a fixed span of probing, not a wait for a state
        victim = next(p for p in cluster.procs if p.name == VICTIM)
        exited: list[float] = []
        swept: list[Probe] = []
        writer = client(PROBE_TIMEOUT_S)
        held = taken_over(zk, ZK_ROOT, theirs, SURVIVOR)
        t_wall, t_sig = time.time(), time.monotonic()
        victim.proc.send_signal(sig)

        def wait_exit() -> None:
            victim.proc.wait()
            exited.append(time.monotonic())

        waiter = gevent.spawn(wait_exit)
        deadline = t_sig + session + TAKEOVER_SLACK_S
        sweeps = {p: gevent.spawn(write_when_held, writer, pool, p, held[p], creators,
                                  SURVIVOR, deadline, swept) for p in theirs}
        workers += [waiter, *sweeps.values()]
        gevent.joinall(list(sweeps.values()), timeout=deadline - time.monotonic() + 5)
        waiter.join(VICTIM_EXIT_S)
        time.sleep(AFTER_S)  # probing on past the takeover, again a fixed span
        stop.set()
        gevent.joinall(workers, timeout=PROBE_TIMEOUT_S * 2)
        t_end = time.monotonic()

        store = open_store(f"sqlite:///{(base / 'state.db').resolve()}", StoreOptions())
        every = [p for pr in probers.values() for p in pr.probes] + swept
        acked = [p.job_id for p in every if p.ok]
        try:
            until(lambda: finished(store, acked), FINISH_TIMEOUT_S,
                  f"{len(acked)} probe jobs ending", interval=1.0)
        except RuntimeError as exc:
            print(f"member_failover.{name}: {exc}", file=sys.stderr, flush=True)
        bad = {j: why for j in acked if (why := wrong(store, j))}
        ambiguous = sum(1 for p in every if not p.ok and stored(store, p.job_id))

        survivor_text = log_of(cluster, SURVIVOR).read_text(errors="replace")
        victim_text = log_of(cluster, VICTIM).read_text(errors="replace")
        got = membership_events(survivor_text, ACQUIRED, SURVIVOR, theirs, t_wall).values()
        let_go = membership_events(victim_text, RELEASING, VICTIM, theirs, t_wall).values()
        them, us = probers["theirs"], probers["ours"]
        by_survivor = [p.done for p in them.acked()
                       if p.done > t_sig and creators.of(p.job_id) == SURVIVOR]
        resumed = {p: g.value - t_sig for p, g in sweeps.items() if g.value is not None}
        return Outcome(
            scenario=name, session_timeout=session, resumed=resumed, partitions=len(theirs),
            prober_resume_s=min(by_survivor, default=t_end) - t_sig,
            victim_acked_after=sum(1 for p in them.acked() + [p for p in swept if p.ok]
                                   if p.done > t_sig and creators.of(p.job_id) == VICTIM),
            victim_failed=sum(1 for p in them.failed() + swept if not p.ok),
            victim_max_gap_s=max_gap([p.done for p in them.acked()], t_sig, t_end),
            released_s=(min(let_go) - t_wall, max(let_go) - t_wall) if let_go else None,
            acquired_s=((min(got) - t_wall, max(got) - t_wall) if got else (-1.0, -1.0)),
            victim_exit_s=exited[0] - t_sig if exited else -1.0,
            others_max_gap_s=max_gap([p.done for p in us.acked()], t_sig, t_end),
            others_baseline_gap_s=max_gap([p.done for p in us.acked() if p.done < t_sig],
                                          started + 1.0, t_sig),
            others_failed=len(us.failed()), others_acked=len(us.acked()),
            probe_window_s=t_end - t_sig, acked_jobs=len(acked), bad=bad,
            ambiguous=ambiguous,
            errors=sorted({p.error.split(":")[0] for p in every if not p.ok}))
    except Exception:
        for p in cluster.procs:
            if p.name.startswith("jobmgr-"):
                tail = p.log.read_text(errors="replace").splitlines()[-30:]
                print(f"--- {p.name}\n" + "\n".join(tail), file=sys.stderr, flush=True)
        raise
    finally:
        stop.set()
        gevent.killall(workers, timeout=5)
        if store is not None:
            store.close()
        for c in clients:
            c.close()
        if zk is not None:
            zk.stop()
            zk.close()
        cluster.stop()


def report_outcome(o: Outcome) -> None:
    name = f"member_failover.{o.scenario}"
    sigterm = o.scenario == "sigterm"
    target = "<=1" if sigterm else "<=5"
    how = ("SIGTERM (the graceful leave: the victim deletes its member node, releases its "
           "partitions and deletes their nodes)" if sigterm else
           "kill -9 (nothing released: its partitions move when ZooKeeper expires its session)")
    shape = (f"`peloton up --jobmgrs 2` (processes, SQLite, {DEFAULT_PARTITIONS} partitions, "
             f"{BACKEND}), {VICTIM} ({o.partitions} partitions) stopped by {how}; ZooKeeper "
             f"session timeout {o.session_timeout:g} s (the job managers' default as "
             f"ProcessesConfig runs them, read back from {VICTIM}'s config)")
    times = sorted(o.resumed.values())
    missing = o.partitions - len(times)
    unresumed = f" ({missing} partitions did not resume in time)" if missing else ""
    released = ("" if o.released_s is None else
                f"the victim logged releasing them {o.released_s[0]:.2f}-{o.released_s[1]:.2f} s, ")
    timeline = (f"{released}{SURVIVOR} logged acquiring them {o.acquired_s[0]:.2f}-"
                f"{o.acquired_s[1]:.2f} s (one by one, each claimed in the store and "
                f"recovered), the victim exited at {o.victim_exit_s:.2f} s")
    first = times[0] if times else o.probe_window_s
    last = times[-1] if times and not missing else o.probe_window_s
    report(f"{name}.resume_s", first, "s", target,
           f"{shape}. Seconds from the signal until the first acknowledged CreateJob into one "
           f"of {VICTIM}'s partitions that {SURVIVOR} made itself (its log names the creator "
           f"of each job): one writer per such partition, through {SURVIVOR} (2 s deadline), "
           f"sends as soon as ZooKeeper names {SURVIVOR} the partition's holder (a watch of "
           f"the bench's own) until such a write is acknowledged{unresumed}. {timeline}; "
           f"{load()}")
    report(f"{name}.all_resumed_s", last, "s", target,
           f"the same writers: seconds from the signal until the last of {VICTIM}'s "
           f"{o.partitions} partitions took a write from {SURVIVOR} (median "
           f"{times[len(times) // 2] if times else float('nan'):.2f} s){unresumed}; {load()}")
    report(f"{name}.client_resume_s", o.prober_resume_s, "s", "",
           f"one client writing to {VICTIM}'s partitions in turn through {SURVIVOR} from "
           f"before the signal (CreateJob back to back every {PROBE_INTERVAL_S * 1000:.0f} ms, "
           f"2 s deadline, the next partition's id after a failure): seconds from the signal "
           f"to its first write {SURVIVOR} made, which waits for whichever partition the "
           f"client was on; its largest gap between acknowledged writes "
           f"{o.victim_max_gap_s:.2f} s; writes the victim still made after the signal: "
           f"{o.victim_acked_after}; failed writes to its partitions (this client and the "
           f"writers above): {o.victim_failed}; {load()}")
    report(f"{name}.others_max_gap_s", o.others_max_gap_s, "s", "",
           f"the largest gap between acknowledged CreateJobs into {SURVIVOR}'s own "
           f"partitions (one client, through {SURVIVOR}, back to back every "
           f"{PROBE_INTERVAL_S * 1000:.0f} ms) over the {o.probe_window_s:.1f} s from the "
           f"signal to the probers' end, the gap spanning the signal included "
           f"({o.others_acked} acknowledged over the run); before the signal "
           f"{o.others_baseline_gap_s:.2f} s; {load()}")
    report(f"{name}.others_failed", o.others_failed, "writes", "<=0",
           f"failed CreateJobs into {SURVIVOR}'s own partitions over the whole probing run "
           f"(failures seen anywhere: {', '.join(o.errors) or 'none'})")
    report(f"{name}.probe_jobs_succeeded", o.acked_jobs - len(o.bad), "jobs", "",
           f"of the {o.acked_jobs} acknowledged probe jobs, those that ended SUCCEEDED with "
           f"their one task SUCCEEDED, no run but its own reported RUNNING, that at most once "
           f"(the store); "
           f"failed creates that were stored all the same: {o.ambiguous}")
    kinds = Counter(o.bad.values())
    report(f"{name}.probe_jobs_not_succeeded_once", len(o.bad), "jobs", "<=0",
           "acknowledged probe jobs that did not"
           + (": " + "; ".join(f"{n} x {why}" for why, n in kinds.most_common()) if kinds else ""))


def main() -> None:
    if skipped_without_zookeeper("member_failover"):
        return
    keep = os.environ.get("BENCH_KEEP_DIR", "")
    for name, sig in (("sigterm", signal.SIGTERM), ("kill9", signal.SIGKILL)):
        if keep:  # the cluster's configs, logs and store are kept there, for a post-mortem
            report_outcome(scenario(Path(tempfile.mkdtemp(prefix=f"failover-{name}-", dir=keep)),
                                    name, sig))
            continue
        with tempfile.TemporaryDirectory() as tmp:
            report_outcome(scenario(Path(tmp), name, sig))


if __name__ == "__main__":
    main()
