"""What binds a queued task now: every rule of `binding.RULES` reached by a snapshot built for
it, and the counterfactual changes as snapshot edits."""

from __future__ import annotations

from dataclasses import replace

import pytest

from peloton.core.forecast.binding import RULES, Facts, binding
from peloton.core.forecast.changes import (
    candidates,
    keep_instances,
    more_reservation,
    reservation_needed,
    resize,
    stop_job,
)
from peloton.core.forecast.model import (
    BindingKind,
    CounterfactualKind,
    LiveHost,
    PoolState,
    QueuedTask,
    RunningTask,
    Snapshot,
)
from peloton.core.model.constraints import Condition, Label, LabelConstraint, LabelKind
from peloton.core.model.resources import ResourceKind, Resources
from peloton.core.model.respool import ResourceConfig, ResourcePoolConfig
from peloton.core.words import number, size_mb

K = BindingKind
CPU = Resources(cpu=1)


def pool(path: str, *, reservation: float = 0, limit: float = 10, entitlement: float = 10,
         allocation: float = 0) -> PoolState:
    config = ResourcePoolConfig(name=path.rsplit("/", 1)[1], parent_id="root", resources=(
        ResourceConfig(ResourceKind.CPU, reservation=reservation, limit=limit, share=2),))
    return PoolState(path, config, Resources(cpu=entitlement), Resources(cpu=allocation))


def snap(*, a: PoolState | None = None, b: PoolState | None = None, hosts: int = 2,
         used: int = 0, task: QueuedTask | None = None, maintenance: bool = False,
         preemption: bool = True) -> Snapshot:
    """Pool /a holds the task; /b is the other pool; `used` cpu of h0 run /b's job."""
    target = task or QueuedTask("j", 0, "/a", CPU, 60.0)
    return Snapshot(
        now=0.0, pools=(a or pool("/a"), b or pool("/b")),
        hosts=tuple(LiveHost(f"h{i}", Resources(cpu=4), (Label("zone", "z1"),),
                              maintenance=maintenance and i == 0) for i in range(hosts)),
        running=tuple(RunningTask("other", i, "/b", CPU, f"h{i // 4}", 30.0)
                      for i in range(used)),
        queued=(QueuedTask("ahead", 0, "/a", CPU, 60.0), target), preemption=preemption)


def bind(s: Snapshot) -> tuple[BindingKind, str]:
    got = binding(s, s.queued[-1])
    return got.kind, got.summary


#: One snapshot per rule (and the kind and the start of the summary it must give).
CASES: list[tuple[str, Snapshot, BindingKind, str]] = [
    ("admitted, no host", snap(task=QueuedTask("j", 0, "/a", CPU, 60.0, admitted=True),
                               hosts=2, used=8),
     K.PLACEMENT, "admitted, waiting for a host: 0 of 2 hosts fit: 2 insufficient cpu"),
    ("over the limit", snap(a=pool("/a", limit=3, allocation=3)),
     K.POOL_LIMIT, "pool /a is at its limit: needs 1 cpu, 3 of 3 cpu in use"),
    ("gang bigger than the free cpu", snap(task=QueuedTask("j", 0, "/a", CPU, 60.0, gang=6),
                                           hosts=1),
     K.GANG, "its gang of 6 tasks must start together: needs 6 cpu, 0 of 4 cpu in use free"),
    ("owed its reservation", snap(a=pool("/a", reservation=4, entitlement=4, allocation=2),
                                  b=pool("/b", reservation=0, allocation=8), used=8),
     K.PREEMPTION, "pool /a is within its reservation but the cluster is full"),
    ("entitled to its reservation only", snap(a=pool("/a", reservation=2, entitlement=2,
                                                     allocation=2), preemption=False),
     K.RESERVATION, "pool /a is entitled to its reservation only: needs 1 cpu, 2 of 2 cpu in "
                    "use; 2nd of 2 queued in /a"),
    ("at its share", snap(a=pool("/a", reservation=1, entitlement=3, allocation=3)),
     K.ENTITLEMENT, "pool /a is at its entitlement (share 2): needs 1 cpu, 3 of 3 cpu in use; "
                    "2nd of 2 queued in /a"),
    ("no host matches", snap(task=QueuedTask("j", 0, "/a", CPU, 60.0, constraint=LabelConstraint(
        LabelKind.HOST, Condition.EQUAL, Label("zone", "z9"), 1)), maintenance=True),
     K.PLACEMENT, "no host has room: 0 of 2 hosts fit: 1 in maintenance, 1 lacks label zone=z9"),
    ("nothing", snap(), K.NONE, "nothing binds now: it should start at the next scheduling pass "
                                "(2nd of 2 queued in /a)"),
]


@pytest.mark.parametrize(("name", "snapshot", "kind", "summary"), CASES, ids=[c[0] for c in CASES])
def test_each_rule(name: str, snapshot: Snapshot, kind: BindingKind, summary: str) -> None:
    got_kind, got_summary = bind(snapshot)
    assert got_kind is kind, got_summary
    assert got_summary.startswith(summary), got_summary


def test_the_cases_reach_every_rule_of_the_table() -> None:
    """A rule no case reaches would be untested: each case must stop at a distinct rule."""
    reached = set()
    for _, s, _, _ in CASES:
        facts = Facts.of(s, s.queued[-1])
        reached.add(next(i for i, (_, holds, _) in enumerate(RULES) if holds(facts)))
    assert reached == set(range(len(RULES)))


def test_the_queue_position_counts_only_tasks_waiting_for_admission_in_the_pool() -> None:
    s = snap(a=pool("/a", entitlement=0))
    s = replace(s, queued=(QueuedTask("x", 0, "/b", CPU, 1.0),
                           QueuedTask("y", 0, "/a", CPU, 1.0, admitted=True), *s.queued))
    got = binding(s, s.queued[-1])
    assert (got.queue_position, got.queue_length) == (2, 2)


def test_more_reservation_raises_the_pool_and_its_ancestors_and_their_limits() -> None:
    parent = pool("/p", reservation=2, limit=2)
    child = pool("/p/c", reservation=1, limit=2, allocation=2)
    s = Snapshot(0.0, (parent, child), (), queued=(QueuedTask("j", 0, "/p/c", CPU, 1.0),))
    extra = reservation_needed(s, "/p/c", CPU)
    assert extra == Resources(cpu=2)  # uses 2, needs 1 more: 3, it reserves 1
    got = more_reservation(s, "/p/c", extra)
    cfg = {p.path: p.config.resource(ResourceKind.CPU) for p in got.pools}
    assert (cfg["/p/c"].reservation, cfg["/p/c"].limit) == (3, 3)
    assert (cfg["/p"].reservation, cfg["/p"].limit) == (4, 4)


def test_the_other_changes_edit_only_what_they_name() -> None:
    s = snap(used=4)
    assert stop_job(s, "other").running == () and len(stop_job(s, "other").queued) == 2
    assert resize(s, "j", 0.5).queued[-1].resources == Resources(cpu=0.5)
    assert resize(s, "j", 0.5).queued[0].resources == CPU
    assert [q.job_id for q in keep_instances(s, "ahead", frozenset()).queued] == ["j"]


def test_candidates_pick_a_change_of_each_kind_that_applies() -> None:
    s = snap(used=4, task=QueuedTask("j", 0, "/a", Resources(cpu=3), 60.0, priority=9))
    s = replace(s, queued=(*s.queued, QueuedTask("j", 1, "/a", Resources(cpu=3), 60.0,
                                                 priority=9)))
    changes = {c.kind: c for c in candidates(s, frozenset({("j", 0), ("j", 1)}))}
    assert set(changes) == set(CounterfactualKind)
    assert changes[CounterfactualKind.STOP_JOB].description.startswith("job other (priority 0")
    # Two tasks of 3 cpu on 4-cpu hosts: one per host, two hosts.
    assert changes[CounterfactualKind.ADD_HOSTS].description.startswith("2 hosts like h1")
    fewer = changes[CounterfactualKind.FEWER_INSTANCES]
    assert fewer.targets == frozenset({("j", 0)})
    assert candidates(s, frozenset({("nope", 0)})) == []


def test_whole_numbers_keep_their_zeros() -> None:
    """1000 MiB was shown as "1 MiB": a fraction's trailing zeros went, and an integer's too."""
    assert size_mb(1000) == "1000 MiB"
    assert number(100, 0) == "100" and number(2.50) == "2.5" and number(-0.0001) == "0"


def test_durations_trust_a_given_estimate_then_history_then_a_default() -> None:
    from peloton.core.forecast.durations import DEFAULT_DURATION, expected, median, remaining
    from peloton.core.forecast.model import DurationSource as D

    assert expected(service=True, given=30.0) == (None, D.UNBOUNDED)
    assert expected(service=False, given=30.0, history=[5.0]) == (30.0, D.GIVEN)
    assert expected(service=False, history=[50.0, 10.0, 30.0, 0.0]) == (30.0, D.HISTORY)
    assert expected(service=False, history=[]) == (DEFAULT_DURATION, D.DEFAULT)
    assert median([4.0, 1.0, 3.0, 2.0]) == 2.0 and median([]) is None
    # 100 s expected, 40 run: 60 left; overdue: a tenth of the estimate; a service: never.
    assert (remaining(100.0, 40.0), remaining(100.0, 250.0), remaining(None, 5.0)) == \
        (60.0, 10.0, None)
