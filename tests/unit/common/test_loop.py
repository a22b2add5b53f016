"""The one service loop every daemon's background work runs in (peloton/common/loop.py)."""

from __future__ import annotations

import gevent

from peloton.common.loop import Loop


def test_a_step_runs_at_once_and_then_every_interval() -> None:
    ran: list[int] = []
    loop = Loop("t", lambda: ran.append(1), interval=0.05)
    loop.start()
    gevent.sleep(0.01)
    assert len(ran) == 1
    loop.stop()
    assert not loop.running


def test_delay_first_waits_one_interval_before_the_first_step() -> None:
    ran: list[int] = []
    loop = Loop("t", lambda: ran.append(1), interval=0.2, delay_first=True)
    loop.start()
    gevent.sleep(0.05)
    assert ran == []
    loop.stop()


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
