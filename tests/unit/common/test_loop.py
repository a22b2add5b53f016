"""The one service loop every daemon's background work runs in (peloton/common/loop.py)."""

from __future__ import annotations

import gevent

from peloton.common.loop import Loop


def test_a_step_runs_at_once_and_then_every_interval() -> None:
    # A long interval: however slow the machine, a second step cannot come in this test.
    ran: list[int] = []
    loop = Loop("t", lambda: ran.append(1), interval=60.0)
    loop.start()
    with gevent.Timeout(5):
        while not ran:
            gevent.sleep(0.001)
    gevent.sleep(0.05)
    assert ran == [1]  # the first step at once, the next only after the interval
    loop.stop()
    assert not loop.running
    paced = Loop("t", lambda: ran.append(1), interval=0.01)
    paced.start()
    with gevent.Timeout(5):
        while len(ran) < 4:  # steps keep coming, one per interval
            gevent.sleep(0.001)
    paced.stop()


def test_delay_first_waits_one_interval_before_the_first_step() -> None:
    ran: list[int] = []
    loop = Loop("t", lambda: ran.append(1), interval=60.0, delay_first=True)
    loop.start()
    gevent.sleep(0.05)
    assert ran == []
    loop.stop()
    soon = Loop("t", lambda: ran.append(1), interval=0.01, delay_first=True)
    soon.start()
    with gevent.Timeout(5):
        while not ran:  # and then it does step
            gevent.sleep(0.001)
    soon.stop()


def test_a_failing_step_is_retried_after_retry_delay() -> None:
    calls: list[int] = []

    def step() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("boom")

    loop = Loop("t", step, interval=10.0, retry_delay=0.0)
    loop.start()
    with gevent.Timeout(2):
        while len(calls) < 2:
            gevent.sleep(0.001)
    assert loop.running  # the failure did not end the loop
    loop.stop()
