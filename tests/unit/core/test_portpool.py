"""Dynamic ports: which free ports of a host a run gets (peloton/core/placement/portpool.py)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from peloton.core.errors import InvalidArgument
from peloton.core.model.ids import TaskId
from peloton.core.model.resources import PortRange
from peloton.core.placement.portpool import PortPool, port_draw
from peloton.core.placement.stack import Placer
from tests.unit.core.factories import gang, host, needs, task

JOB = "5a0d9c1e-0000-4000-8000-00000000beef"
RANGE = PortRange(31000, 32000)


def _ports(task_id: TaskId, run: int, count: int = 3,
           ranges: tuple[PortRange, ...] = (RANGE,)) -> tuple[int, ...]:
    """The ports run `run` of `task_id` gets on a host with `ranges` free."""
    return PortPool(ranges).take(count, port_draw(task_id, run))


def _check(pool: PortPool) -> None:
    """The pool's ranges are sorted, disjoint, not adjacent, and hold `free` ports."""
    for b, e in pool.ranges:
        assert b <= e
    for (_, e1), (b2, _) in zip(pool.ranges, pool.ranges[1:], strict=False):
        assert e1 + 1 < b2
    assert pool.free == sum(e - b + 1 for b, e in pool.ranges)


def _members(pool: PortPool) -> set[int]:
    return {p for b, e in pool.ranges for p in range(b, e + 1)}


def test_the_same_run_gets_the_same_ports() -> None:
    tid = TaskId(JOB, 7)
    assert _ports(tid, 3) == _ports(tid, 3)
    assert port_draw(tid, 3) == port_draw(TaskId(JOB, 7), 3)


def test_retries_of_a_task_get_other_ports() -> None:
    tid = TaskId(JOB, 0)
    firsts = {_ports(tid, run)[0] for run in range(1, 51)}
    assert len(firsts) > 40   # spread over the host, not the lowest port every time


def test_a_retry_never_reuses_the_previous_runs_ports_while_the_host_is_unchanged() -> None:
    # The failure this guards against: a port busy outside the scheduler made run r exit
    # "Address already in use"; run r + 1, placed on the same host, must not get it again.
    for inst in range(100):
        tid = TaskId(JOB, inst)
        for run in range(1, 20):
            assert not set(_ports(tid, run)) & set(_ports(tid, run + 1)), (inst, run)


def test_tasks_of_one_job_start_at_different_places() -> None:
    starts = {_ports(TaskId(JOB, inst), 1, 1)[0] for inst in range(200)}
    assert len(starts) > 100


def test_draw_zero_takes_the_lowest_and_a_draw_near_the_top_wraps_round() -> None:
    pool = PortPool([PortRange(5, 7), PortRange(9, 10)])
    assert pool.take(2, 0) == (5, 6)
    pool = PortPool([PortRange(5, 7), PortRange(9, 10)])
    # Position 4 of 5 is port 10; the next ones wrap round to the lowest.
    assert pool.take(3, (1 << 32) - 1) == (10, 5, 6)
    assert pool.ranges == [[7, 7], [9, 9]] and pool.free == 2


def test_ports_come_from_the_free_ranges_without_duplicates() -> None:
    ranges = (PortRange(31000, 31004), PortRange(31010, 31010), PortRange(31020, 31030))
    pool = PortPool(ranges)
    allowed = _members(pool)
    taken: list[int] = []
    for inst in range(8):
        taken.extend(pool.take(2, port_draw(TaskId(JOB, inst), 1)))
        _check(pool)
    assert len(set(taken)) == 16 and set(taken) <= allowed
    assert pool.free == 17 - 16 and _members(pool) == allowed - set(taken)
    with pytest.raises(InvalidArgument):
        pool.take(2, 0)


def test_give_takes_ports_back_and_merges_ranges() -> None:
    pool = PortPool([RANGE])
    got = pool.take(5, port_draw(TaskId(JOB, 1), 1))
    assert pool.free == len(RANGE) - 5 and not set(got) & _members(pool)
    pool.give(got)
    assert pool.ranges == [[31000, 32000]] and pool.free == len(RANGE)


def test_a_task_placed_again_as_its_next_run_gets_other_ports() -> None:
    offers = [host("h", ports=(RANGE,))]
    req = task(needs(0.1, ports=2), JOB, 4)
    first = Placer(offers).place([gang(req)], {req.task_id: 1}).placed[0].ports
    again = Placer(offers).place([gang(req)], {req.task_id: 1}).placed[0].ports
    retry = Placer(offers).place([gang(req)], {req.task_id: 2}).placed[0].ports
    assert first == again and not set(first) & set(retry)


# -- properties ----------------------------------------------------------------------------
_ranges = st.lists(st.tuples(st.integers(1, 300), st.integers(0, 20)), min_size=1, max_size=6)
_ops = st.lists(st.tuples(st.booleans(), st.integers(0, 8), st.integers(0, (1 << 32) - 1)),
                max_size=40)


@settings(max_examples=300, deadline=None)
@given(_ranges, _ops)
def test_any_takes_and_gives_keep_the_ranges_exact_and_take_where_drawn(
        spans: list[tuple[int, int]], ops: list[tuple[bool, int, int]]) -> None:
    pool = PortPool([PortRange(b, b + n) for b, n in spans])
    free = {p for b, n in spans for p in range(b, b + n + 1)}
    held: list[int] = []
    _check(pool)
    assert _members(pool) == free
    for is_take, count, draw in ops:
        if is_take:
            if count > len(free):
                with pytest.raises(InvalidArgument):
                    pool.take(count, draw)
                continue
            got = pool.take(count, draw)
            assert len(got) == count and len(set(got)) == count
            assert set(got) <= free   # every port taken was free
            # ... and they are the next ones from the drawn position, wrapping round.
            order = sorted(free)
            at = draw * len(order) >> 32
            assert got == tuple((order[at:] + order[:at])[:count])
            free -= set(got)
            held.extend(got)
        else:
            back, held = held[:count], held[count:]
            pool.give(back)
            free |= set(back)
        _check(pool)
        assert _members(pool) == free and pool.free == len(free)
