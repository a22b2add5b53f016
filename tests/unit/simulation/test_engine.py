"""The simulation engine end to end: the real daemons on a simulated clock, against hand-computed
cases, the timeline actions, and byte-for-byte determinism across processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import pytest

from peloton.core.model.resources import Resources
from peloton.simulation.cluster import load_cluster
from peloton.simulation.driver import PelotonSimulator
from peloton.simulation.engine import load_simulator, run_scenario
from peloton.simulation.pools import load_pools
from peloton.simulation.recorder import ResultRecorder
from peloton.simulation.report import build_report
from peloton.simulation.result import TaskEventKind as K
from peloton.simulation.scenario import Scenario
from peloton.simulation.trace_io import load_trace
from peloton.simulation.whatif import PlanOptions, load_whatif, plan
from tests.unit.simulation.cases import C1_REASON_BASE, SCRIPTS
from tests.unit.simulation.scripted import Call, Cluster, Finish, Pool, Tasks

DATA = Path(__file__).parent / "data"
REPO = Path(__file__).resolve().parents[3]
Row = tuple[object, ...]


class Calls(ResultRecorder):
    """A checking recorder that also keeps every call (cpu only: the hand cases count cores)."""

    def __init__(self, scenario: Scenario) -> None:
        super().__init__(scenario)
        self.calls: list[Row] = []

    def pool_sample(self, t: float, pool: str, *, demand: Resources, entitlement: Resources,
                    allocation: Resources, pending: int) -> None:
        self.calls.append(("pool", t, pool, demand.cpu, entitlement.cpu, allocation.cpu, pending))
        super().pool_sample(t, pool, demand=demand, entitlement=entitlement,
                            allocation=allocation, pending=pending)

    def cluster_sample(self, t: float, *, capacity: Resources, used: Resources,
                       hosts: int) -> None:
        self.calls.append(("cluster", t, capacity.cpu, used.cpu, hosts))
        super().cluster_sample(t, capacity=capacity, used=used, hosts=hosts)

    def task_event(self, t: float, kind: K, job: str, instance: int, *, reason: str = "") -> None:
        self.calls.append(("task", t, kind.value, job, instance, reason))
        super().task_event(t, kind, job, instance, reason=reason)

    def finish(self, end: float) -> None:
        self.calls.append(("finish", end))
        super().finish(end)

    def events(self, *kinds: K) -> list[tuple[float, str, str, int]]:
        """(t, kind, job, instance) of the task events of `kinds` (all when none given)."""
        wanted = {k.value for k in kinds}
        return [cast(tuple[float, str, str, int], c[1:5]) for c in self.calls
                if c[0] == "task" and (not wanted or c[2] in wanted)]


def expected_calls(script: list[Call]) -> list[Row]:
    """The hand-written script as the rows `Calls` keeps."""
    out: list[Row] = []
    for call in script:
        if isinstance(call, Tasks):
            out += [("task", call.t, call.kind.value, call.job, i, call.reason)
                    for i in call.instances]
        elif isinstance(call, Pool):
            out.append(("pool", call.t, call.pool, call.demand, call.entitlement,
                        call.allocation, call.pending))
        elif isinstance(call, Cluster):
            out.append(("cluster", call.t, call.capacity, call.used, call.hosts))
        elif isinstance(call, Finish):
            out.append(("finish", call.t))
    return out


def _key(row: Row) -> tuple[str, ...]:
    return tuple(map(str, row))


def two_pool_scenarios() -> tuple[Scenario, Scenario]:
    base, other = plan(load_trace(DATA / "two-pools.jsonl"),
                       load_cluster(DATA / "two-pools-cluster.yaml"),
                       load_pools(DATA / "two-pools-pools.yaml"),
                       load_whatif(DATA / "two-pools-more-hosts.yaml"), PlanOptions(horizon=180))
    assert other is not None
    return base, other


def replay(scenario: Scenario) -> Calls:
    rec = Calls(scenario)
    PelotonSimulator().run(scenario, rec)
    return rec


# -- the hand-computed two-pool case (cases.py) ------------------------------------------------
def test_the_real_engine_makes_the_hand_computed_calls() -> None:
    """Every recorder call of the real scheduler equals the hand computation, times exactly.

    No tolerance is needed, and none is allowed: the simulated hosts start a run when it is
    launched and end it exactly its duration later, and every reaction in this case is
    signalled, not polled (a run's end frees its pool's allocation and wakes admission,
    admission wakes placement, a placement wakes the job manager's launch), so the daemons
    react within the same simulated instant.  The one periodic pass the case depends on,
    the entitlement refresh that sees the hosts the what-if adds at t=0, runs at whole
    multiples of its period, t=0 included, after the timeline's hosts have registered.  A
    scheduling latency would show here as a failure (the timeline test below shows one).
    """
    for scenario in two_pool_scenarios():
        got = replay(scenario).calls
        want = expected_calls(SCRIPTS[scenario.label])
        assert sorted(got, key=_key) == sorted(want, key=_key), scenario.label


def test_the_real_engines_report_shows_the_hand_computed_numbers() -> None:
    base, other = two_pool_scenarios()
    report = build_report(replay(base).result(), buckets=3)
    a, b = report.pool("/a"), report.pool("/b")
    # a2's four tasks wait from t=10 until a1 ends at t=100; everything else starts on arrival.
    assert (a.wait.count, a.wait.p50, a.wait.p90, a.wait.max, a.wait.mean) == (8, 0, 90, 90, 45)
    assert (b.wait.count, b.wait.max, b.never_ran, b.finished) == (6, 0, 1, 6)
    assert (a.demand.cpu, a.entitlement.cpu, a.allocation.cpu) == pytest.approx((4 / 3, 4, 4))
    assert report.cluster.utilisation.cpu == pytest.approx(1320 / 1440)
    assert [(n.job, n.reason) for n in report.never_ran] == [("c1", C1_REASON_BASE)]
    whatif = build_report(replay(other).result(), buckets=3)
    assert whatif.pool("/a").wait.max == 0 and whatif.pool("/a").entitlement.cpu == 8


def test_the_engine_is_the_registered_peloton_engine_and_times_its_runs() -> None:
    base, _ = two_pool_scenarios()
    result, stats = run_scenario(load_simulator("peloton"), base)
    assert result.end == stats.simulated_secs == 180
    assert 0 < stats.wall_secs < 120 and stats.speedup > 1


# -- timeline actions, services, constraints ----------------------------------------------------
POOLS = """\
version: 1
pools:
  - name: a
    resources:
      - {kind: cpu, reservation: 4, limit: 8, share: 1}
      - {kind: memory, reservation: 8192, limit: 16384, share: 1}
  - name: b
    resources:
      - {kind: cpu, reservation: 4, limit: 8, share: 1}
      - {kind: memory, reservation: 8192, limit: 16384, share: 1}
"""
CLUSTER = """\
version: 1
hosts:
  - group: node
    count: 2
    resources: {cpu: 4, mem_mb: 8192, disk_mb: 100000}
"""


@dataclass
class Case:
    """A scenario written as files, the way users write them."""

    tmp: Path
    jobs: list[dict[str, object]]
    changes: str = ""
    cluster: str = CLUSTER
    pools: str = POOLS
    preemption: bool | None = None
    horizon: float = 600

    def scenarios(self) -> tuple[Scenario, Scenario | None]:
        trace = self.tmp / "t.jsonl"
        lines = [{"format": "peloton-sim-trace", "version": 1, "name": "case"}, *self.jobs]
        trace.write_text("".join(json.dumps(x) + "\n" for x in lines))
        (self.tmp / "c.yaml").write_text(self.cluster + (
            "" if self.preemption is None else f"preemption: {str(self.preemption).lower()}\n"))
        (self.tmp / "p.yaml").write_text(self.pools)
        whatif = None
        if self.changes:
            (self.tmp / "w.yaml").write_text("version: 1\nname: change\nchanges:\n"
                                             + textwrap.indent(textwrap.dedent(self.changes), "  "))
            whatif = load_whatif(self.tmp / "w.yaml")
        return plan(load_trace(trace), load_cluster(self.tmp / "c.yaml"),
                    load_pools(self.tmp / "p.yaml"), whatif, PlanOptions(horizon=self.horizon))

    def run(self) -> Calls:
        base, other = self.scenarios()
        return replay(other if other is not None else base)


def job(name: str, submit: float, pool: str, n: int, cpu: float, secs: float | None,
        **extra: object) -> dict[str, object]:
    out: dict[str, object] = {"job": name, "submit": submit, "pool": pool, "instances": n,
                              "resources": {"cpu": cpu, "mem_mb": 1024 * cpu}}
    if secs is not None:
        out["duration"] = secs
    out.update(extra)
    return out


def starts(rec: Calls, name: str) -> list[float]:
    return [t for t, _, j, _ in rec.events(K.STARTED) if j == name]


def test_removed_hosts_lose_their_tasks_which_run_again_elsewhere(tmp_path: Path) -> None:
    rec = Case(tmp_path, [job("big", 0, "/a", 8, 1, 100)],
               changes="- remove: {group: node, count: 1}\n  at: 30\n").run()
    lost = rec.events(K.LOST)
    assert [t for t, *_ in lost] == [30.0] * 4
    # Four start at once within /a's entitlement at t=0 (4 of 8 cpu: computed before the
    # job came); the other four once the entitlement is recomputed for the new demand, at
    # most every 0.2 s (entitlement_min_interval).  The four lost at t=30 (the removed host
    # reports them LOST as a removed Mesos agent does, a system failure the job manager
    # retries) wait for room: the other host's four end at t=100.2.
    assert sorted(starts(rec, "big")) == [0.0] * 4 + [0.2] * 4 + [100.2] * 4
    assert all(reason == "its host went away" for *_, reason in
               (c for c in rec.calls if c[0] == "task" and c[2] == "LOST"))
    assert rec.result().end == 200.2  # they finish then and the run stops early
    assert [c[4] for c in rec.calls if c[0] == "cluster"][-1] == 1  # one host up


def test_drained_hosts_move_their_tasks_and_go_down(tmp_path: Path) -> None:
    three = CLUSTER.replace("count: 2", "count: 3")
    rec = Case(tmp_path, [job("big", 0, "/a", 8, 1, 100)], cluster=three,
               changes="- drain: {group: node, count: 1}\n  at: 30\n").run()
    moved = [c for c in rec.calls if c[0] == "task" and c[2] == "LOST"]
    assert moved and all("drained for maintenance" in str(c[5]) for c in moved)
    # Moved by the evictor's pass at t=30, started at once on the host with room.
    assert {c[1] for c in moved} == {30.0}
    assert [t for t in starts(rec, "big") if t >= 30] == [30.0] * len(moved)
    cluster = [c for c in rec.calls if c[0] == "cluster"]
    assert cluster[-1][2] == 8 and cluster[-1][4] == 2  # capacity and count of the hosts up


def test_hosts_added_are_used_once_the_resource_manager_sees_them(tmp_path: Path) -> None:
    """/a may borrow up to 16 cpu, and "first" holds the whole cluster (8).  Hosts join at
    t=50.5; the entitlement refresh that counts them passes at t=51 (every second): /a is
    entitled to 12 then, and "later" starts, half a second after the host came."""
    pools = POOLS.replace("reservation: 4, limit: 8", "reservation: 4, limit: 16", 1)
    rec = Case(tmp_path, [job("first", 0, "/a", 8, 1, 300), job("later", 10, "/a", 4, 1, 60)],
               pools=pools, changes="- add: {group: extra, count: 1, resources: "
                                    "{cpu: 4, mem_mb: 8192}}\n  at: 50.5\n").run()
    assert starts(rec, "later") == [51.0] * 4


def test_a_pool_edit_takes_effect_at_once(tmp_path: Path) -> None:
    """/a may use 4 cpu; a2 waits for a1 to end, unless /a's limit is raised at t=60.25: a
    pool change is applied and re-entitled at once (no periodic pass waited for)."""
    pools = POOLS.replace("reservation: 4, limit: 8", "reservation: 4, limit: 4", 1)
    jobs = [job("a1", 0, "/a", 4, 1, 500), job("a2", 10, "/a", 2, 1, 100)]
    base, other = Case(tmp_path, jobs, pools=pools, changes="""\
        - pool: /a
          at: 60.25
          resources: [{kind: cpu, limit: 8}]
        """).scenarios()
    assert other is not None
    assert starts(replay(base), "a2") == [500.0, 500.0]
    assert starts(replay(other), "a2") == [60.25, 60.25]


def test_preemption_takes_back_what_a_pool_borrowed(tmp_path: Path) -> None:
    jobs = [job("greedy", 0, "/a", 8, 1, 1000), job("owner", 10, "/b", 4, 1, 100)]
    on = Case(tmp_path, jobs, preemption=True, horizon=1500).run()
    preempted = on.events(K.PREEMPTED)
    assert len(preempted) == 4
    # Over for 3 cycles of 2 s (from the first after t=10), then the evictor's next 1 s pass.
    assert all(14 <= t <= 20 for t, *_ in preempted)
    # Admitted at once, "owner" waits for placement's next retry (at most retry_delay_max,
    # 2 s, after its last failed attempt) once the victims' runs have ended.
    assert all(preempted[0][0] <= t <= preempted[0][0] + 2 for t in starts(on, "owner"))
    off = Case(tmp_path, jobs, preemption=False, horizon=1500).run()
    assert off.events(K.PREEMPTED) == []
    # Without preemption it waits for greedy's runs to end (t=1000 and 1000.2).
    assert all(1000 <= t <= 1002.2 for t in starts(off, "owner"))


def test_preemption_can_be_turned_on_by_the_what_if(tmp_path: Path) -> None:
    jobs = [job("greedy", 0, "/a", 8, 1, 1000), job("owner", 10, "/b", 4, 1, 100)]
    rec = Case(tmp_path, jobs, preemption=False, horizon=1500,
               changes="- preemption: true\n  at: 100\n").run()
    assert len(rec.events(K.PREEMPTED)) == 4
    assert all(100 <= t <= 110 for t, *_ in rec.events(K.PREEMPTED))


def test_services_run_to_the_horizon_and_one_per_host_spreads(tmp_path: Path) -> None:
    rec = Case(tmp_path, [job("svc", 0, "/a", 3, 1, None, type="SERVICE", one_per_host=True)],
               horizon=120).run()
    result = rec.result()
    assert result.end == 120  # a service never ends, so the run goes to the horizon
    assert starts(rec, "svc") == [0.0, 0.0]  # two hosts, at most one task of the job on each
    (pending,) = [c for c in rec.calls if c[0] == "task" and c[2] == "PENDING_AT_END"]
    assert pending[5] == ("admitted, waiting for placement; last placement attempt: 0 of 2 hosts "
                          "fit: 2 already run a task labelled peloton.sim/job=svc")
    assert rec.events(K.FINISHED) == []


def test_a_run_stops_once_every_batch_task_finished(tmp_path: Path) -> None:
    rec = Case(tmp_path, [job("x", 5, "/a", 2, 1, 42.5)], horizon=3600).run()
    assert rec.calls[-1] == ("finish", 47.5)
    assert [c[1] for c in rec.calls if c[0] == "cluster"] == [0.0, 47.5]


# -- determinism ---------------------------------------------------------------------------------
_RUN = """
import hashlib, sys
from pathlib import Path
from peloton.simulation.cluster import load_cluster
from peloton.simulation.pools import load_pools
from peloton.simulation.report_files import render_report
from peloton.simulation.trace_io import load_trace
from peloton.simulation.whatif import PlanOptions, load_whatif, plan
from peloton.simulation.driver import PelotonSimulator
from tests.unit.simulation.test_engine import Calls
d = Path("docs/examples/simulation")
scenarios = plan(load_trace(d / "sample-trace.jsonl"), load_cluster(d / "cluster.yaml"),
                 load_pools(d / "pools.yaml"), load_whatif(d / "research-reservation.yaml"),
                 PlanOptions(horizon=1500, seed=7))
results = []
for sc in scenarios:
    rec = Calls(sc)
    PelotonSimulator().run(sc, rec)
    preempted = sum(1 for c in rec.calls if c[0] == "task" and c[2] == "PREEMPTED")
    print(sc.label, hashlib.sha256(repr(rec.calls).encode()).hexdigest(), len(rec.calls),
          preempted)
    results.append(rec.result())
r = render_report(results, plots=False)
print("report", hashlib.sha256((r.text + r.json + r.html).encode()).hexdigest())
"""


@pytest.mark.slow
def test_same_scenario_same_calls_and_same_report_in_fresh_processes() -> None:
    """The README's example (preemption included) twice, in processes with different hash
    seeds: the same recorder calls in the same order, and the same report bytes."""
    outs = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        proc = subprocess.run([sys.executable, "-c", _RUN], cwd=REPO, env=env, capture_output=True,
                              text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-2000:]
        outs.append(proc.stdout)
    assert outs[0] == outs[1]
    label, _, calls, preempted = outs[0].split("\n")[0].split()
    # A real run, with the ties preemption must break alike in both processes.
    assert label == "baseline" and int(calls) > 500 and int(preempted) > 0, outs[0]
