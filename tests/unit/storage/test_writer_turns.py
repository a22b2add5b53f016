"""SQLite writers of one process take turns: small writes before bulk ones, each in order."""

from __future__ import annotations

import gevent
import gevent.event

from peloton.storage.sql.database import WriterTurns


def test_small_writes_go_before_waiting_bulk_ones_each_in_arrival_order() -> None:
    turns = WriterTurns()
    order: list[str] = []
    release = gevent.event.Event()

    def writer(name: str, bulk: bool, hold: gevent.event.Event | None = None) -> None:
        with turns.turn(bulk):
            order.append(name)
            if hold is not None:
                hold.wait()

    first = gevent.spawn(writer, "first", True, release)
    gevent.sleep(0)
    waiting = [gevent.spawn(writer, name, bulk) for name, bulk in
               (("bulk-1", True), ("small-1", False), ("bulk-2", True), ("small-2", False))]
    gevent.sleep(0)
    assert order == ["first"]  # one at a time
    release.set()
    gevent.joinall([first, *waiting], timeout=5, raise_error=True)
    assert order == ["first", "small-1", "small-2", "bulk-1", "bulk-2"]


def test_a_killed_waiter_gives_its_place_back() -> None:
    turns = WriterTurns()
    release = gevent.event.Event()
    order: list[str] = []

    def writer(name: str, hold: gevent.event.Event | None = None) -> None:
        with turns.turn():
            order.append(name)
            if hold is not None:
                hold.wait()

    holder = gevent.spawn(writer, "holder", release)
    gevent.sleep(0)
    doomed, later = gevent.spawn(writer, "doomed"), gevent.spawn(writer, "later")
    gevent.sleep(0)
    doomed.kill()
    release.set()
    gevent.joinall([holder, later], timeout=5, raise_error=True)
    assert order == ["holder", "later"]
    with turns.turn():  # free again
        order.append("after")
    assert order[-1] == "after"
