"""Pool checks made at the same time share one resource manager call (feasibility.PoolChecks).

A check rides only a call sent after it arrived: its answer is as fresh as its own call
would have been.  A burst of creates after a member's handover made one call each to a
resource manager busy with the takeover's recovery.
"""

from __future__ import annotations

import gevent
import gevent.event
import pytest

from peloton.core.errors import InvalidArgument, NotFound
from peloton.core.model.resources import Resources
from peloton.jobmgr.feasibility import PoolChecks


class GatedPools:
    """A resource manager whose pool checks wait for the test's `go` and answer `answer`."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Resources | None]] = []
        self.go = gevent.event.Event()
        self.answer: Exception | None = None

    def validate_pool(self, pool_id: str, need: Resources | None = None) -> None:
        self.calls.append((pool_id, need))
        self.go.wait(30)
        self.go.clear()
        if self.answer is not None:
            raise self.answer


def land(rm: GatedPools, flights: int) -> None:
    """Let `flights` calls land, one after another."""
    for _ in range(flights):
        gevent.sleep(0)  # the next call is sent (a spawned greenlet)
        rm.go.set()
        gevent.sleep(0)


def out_and_boarding() -> tuple[GatedPools, gevent.Greenlet, gevent.Greenlet]:
    """A check of "pool" whose call is out, and one that arrived meanwhile."""
    rm = GatedPools()
    checks = PoolChecks(rm)
    first = gevent.spawn(checks.validate_pool, "pool")
    gevent.sleep(0)
    rider = gevent.spawn(checks.validate_pool, "pool")
    gevent.sleep(0)
    return rm, first, rider


def test_checks_arriving_while_one_is_out_share_the_next_call() -> None:
    rm = GatedPools()
    checks = PoolChecks(rm)
    first = gevent.spawn(checks.validate_pool, "pool", Resources(cpu=1))
    gevent.sleep(0)
    riders = [gevent.spawn(checks.validate_pool, "pool", Resources(cpu=1)) for _ in range(5)]
    gevent.sleep(0)
    assert len(rm.calls) == 1  # the riders wait for the next call, not a call each
    land(rm, 2)
    gevent.joinall([first, *riders], timeout=30, raise_error=True)
    assert rm.calls == [("pool", Resources(cpu=1))] * 2
    assert checks._slots == {}  # nothing kept once every flight landed


def test_a_rider_gets_the_answer_of_a_call_sent_after_it_arrived() -> None:
    rm, first, rider = out_and_boarding()
    rm.go.set()  # the first call answers: the pool exists
    first.get(timeout=30)
    rm.answer = NotFound("pool pool not found", field="respoolID")  # deleted meanwhile
    land(rm, 1)
    with pytest.raises(NotFound, match="pool pool not found"):
        rider.get(timeout=30)


def test_checks_of_other_pools_or_needs_do_not_share() -> None:
    rm = GatedPools()
    checks = PoolChecks(rm)
    rm.go.set()
    greenlets = [gevent.spawn(checks.validate_pool, pool, need) for pool, need in (
        ("a", None), ("b", None), ("a", Resources(cpu=2)))]
    for _ in range(10):
        rm.go.set()
        gevent.sleep(0)
    gevent.joinall(greenlets, timeout=30, raise_error=True)
    assert sorted(rm.calls, key=repr) == sorted(
        [("a", None), ("b", None), ("a", Resources(cpu=2))], key=repr)


def test_a_refusal_is_every_riders_answer() -> None:
    rm = GatedPools()
    rm.answer = InvalidArgument("the pool is not a leaf", field="respoolID")
    checks = PoolChecks(rm)
    first = gevent.spawn(checks.validate_pool, "root")
    gevent.sleep(0)
    riders = [gevent.spawn(checks.validate_pool, "root") for _ in range(3)]
    land(rm, 2)
    for greenlet in [first, *riders]:
        with pytest.raises(InvalidArgument, match="not a leaf"):
            greenlet.get(timeout=30)


def test_a_check_killed_while_out_does_not_strand_the_checks_after_it() -> None:
    rm, first, rider = out_and_boarding()
    first.kill()  # its call never answers; the rider's call is sent all the same
    land(rm, 1)
    rider.get(timeout=30)
    assert len(rm.calls) == 2
