"""Admission stops walking a queue once the rest would only be passed over (admission.py).

The early stop must change nothing a walk to the end would do: which gangs are admitted,
in what order, the order of every queue, the dates of first refusal, the reservation.
The differential test runs random scripts (enqueues of shared shapes, kills, requeues,
passes as time goes by, hosts that cannot hold some tasks, every backfill policy) twice,
with the early stop and with it turned off, and compares everything after each step.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from peloton.core.model.resources import Resources, to_units
from peloton.core.respool import admission
from peloton.core.respool.admission import BackfillPolicy
from peloton.core.respool.queues import ADMISSION_ORDER, GangQueue, QueueKind
from peloton.core.respool.records import Gang
from peloton.core.respool.tracker import TaskTracker
from peloton.core.respool.tree import PoolTree
from peloton.core.states import TaskState
from tests.unit.core.factories import pool_config, rm_task

S = TaskState


def _world(rnd: random.Random) -> tuple[TaskTracker, Any]:
    tree = PoolTree()
    node = tree.create("p", pool_config("p", cpu=(rnd.choice([0, 3, 5]), 1000, 1),
                                        controller_pct=rnd.choice([None, 50.0])))
    entitled = to_units(rnd.choice([3, 5, 10]))
    node.entitlement = [entitled, 0, 0, 0]
    node.non_slack_entitlement = [entitled, 0, 0, 0]
    node.slack_entitlement = [to_units(2), 0, 0, 0]
    tracker = TaskTracker(tree, preemption_enabled=rnd.random() < 0.5, backfill=BackfillPolicy(
        depth=rnd.choice([0, 1, 2, 1000]),
        reserve_after=rnd.choice([0.0, 1.0, 2.5, 5.0, float("inf")])))
    if rnd.random() < 0.4:
        tracker.host_room = (Resources(cpu=rnd.choice([0.5, 1, 2]), mem_mb=1000),)
    return tracker, node


def _script(seed: int) -> list[tuple[Any, ...]]:
    """Everything observable after each step of a random script."""
    rnd = random.Random(seed)
    tracker, node = _world(rnd)
    trace: list[tuple[Any, ...]] = []
    inst, now = 0, 0.0
    cpus = rnd.sample([0.5, 1, 1.5, 2, 4], rnd.randint(1, 3))  # few shapes: long runs of one
    for _ in range(rnd.randint(20, 120)):
        op = rnd.choice(["enq"] * 4 + ["admit"] * 3 + ["kill", "done", "requeue", "placed",
                                                       "tick"])
        records = sorted(tracker.records(), key=lambda r: r.task_id.instance)
        if op == "enq":
            n = rnd.choice([1, 1, 1, 2, 3])
            revocable = rnd.random() < 0.15
            preemptible = rnd.random() < 0.8
            controller = not revocable and rnd.random() < 0.15
            priority = rnd.choice([0, 0, 1])
            c = rnd.choice(cpus)
            tracker.enqueue("p", [rm_task(c, inst=inst + j, priority=priority,
                                          preemptible=preemptible, revocable=revocable,
                                          controller=controller) for j in range(n)])
            inst += n
        elif op == "admit":
            got = tracker.admit(limit_per_pool=rnd.choice([1, 3, 1000]), now=now)
            trace.append(("admit", [[t.task_id.instance for t in g.tasks] for g in got]))
        elif op == "tick":
            now += rnd.choice([0.5, 1.0, 3.0])
        elif records:
            rec = rnd.choice(records)
            if op == "kill":
                tracker.finish(rec.task_id)
            elif op == "done" and rec.state is S.READY:
                tracker.transition(rec.task_id, S.PLACING)
                tracker.finish(rec.task_id, S.SUCCEEDED)
            elif op == "requeue" and rec.state in (S.READY, S.PLACING):
                tracker.transition(rec.task_id, S.PENDING)
            elif op == "placed" and rec.state is S.PENDING:
                tracker.transition(rec.task_id, S.PLACED)
        queues = node.queues
        if queues is not None:
            trace.append(tuple(
                (kind.value, [([t.task_id.instance for t in g.tasks], g.refused_since)
                              for g in queues[kind]]) for kind in ADMISSION_ORDER))
            trace.append(tuple((kind.value, [t.task_id.instance for t in g.tasks])
                               for kind, g in queues.reserved.items()))
    trace.append(tuple(sorted((r.task_id.instance, r.state.value) for r in tracker.records())))
    return trace


@pytest.mark.parametrize("block", range(4))
def test_stopping_early_changes_nothing_a_full_walk_does(
        block: int, monkeypatch: pytest.MonkeyPatch) -> None:
    stops = 0
    real = admission._rest_passed_over

    def counted(*args: Any, **kwargs: Any) -> bool:
        nonlocal stops
        stopped = real(*args, **kwargs)
        stops += stopped
        return stopped

    seeds = range(block * 150, (block + 1) * 150)
    with monkeypatch.context() as m:
        m.setattr(admission, "_rest_passed_over", counted)
        early = [_script(seed) for seed in seeds]
    with monkeypatch.context() as m:
        m.setattr(admission, "_rest_passed_over", lambda *a, **k: False)
        walked = [_script(seed) for seed in seeds]
    for seed, a, b in zip(seeds, early, walked, strict=True):
        assert a == b, f"seed {seed}"
    assert stops > 0  # the scripts do exercise the early stop


def test_a_full_pool_passes_over_its_queue_in_a_few_steps(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """10,000 queued copies of a task the pool has no room for: each later pass checks the
    head only, and the queue keeps its order and the first refusal's date."""
    tree = PoolTree()
    node = tree.create("p", pool_config("p", cpu=(0, 1000, 1)))
    node.entitlement = node.non_slack_entitlement = [to_units(2), 0, 0, 0]
    tracker = TaskTracker(tree, backfill=BackfillPolicy(reserve_after=float("inf")))
    for i in range(10_002):
        tracker.enqueue("p", [rm_task(1, inst=i)])
    assert len(tracker.admit(now=0.0)) == 2
    pops = 0
    real_pop = GangQueue.pop

    def pop(self: GangQueue) -> Gang:
        nonlocal pops
        pops += 1
        return real_pop(self)

    monkeypatch.setattr(GangQueue, "pop", pop)
    for now in (1.0, 2.0, 3.0):
        assert tracker.admit(now=now) == []
    assert pops == 3  # the head, checked and put back, once per pass
    assert node.queues is not None
    queued = list(node.queues[QueueKind.PENDING])
    assert [g.tasks[0].task_id.instance for g in queued] == list(range(2, 10_002))
    assert {g.refused_since for g in queued} == {0.0}
    # A kill in the middle of the run: the next pass walks to it (and drops it), no further.
    tracker.finish(queued[5000].tasks[0].task_id)
    pops = 0
    assert tracker.admit(now=4.0) == []
    assert pops == 5001  # the head, the 4,999 gangs before the killed one, and that one
    assert len(node.queues[QueueKind.PENDING]) == 9_999
