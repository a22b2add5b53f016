"""The retry helper: backoff, jitter, deadline, what is retried and what is not."""

from __future__ import annotations

import pytest

from peloton.common.clock import FakeClock
from peloton.common.retry import Retrier, RetryPolicy
from peloton.core.errors import InvalidArgument, Unavailable


def test_delays_double_up_to_the_cap() -> None:
    policy = RetryPolicy(initial_delay=0.1, max_delay=0.5, multiplier=2.0, jitter=0.0)
    assert [policy.delay(n) for n in range(1, 6)] == [0.1, 0.2, 0.4, 0.5, 0.5]


def test_jitter_stays_within_its_fraction() -> None:
    policy = RetryPolicy(initial_delay=1.0, jitter=0.2)
    assert policy.delay(1, rand=0.0) == pytest.approx(0.8)
    assert policy.delay(1, rand=0.999999) == pytest.approx(1.2, rel=1e-5)


def test_retries_unavailable_then_succeeds() -> None:
    clock = FakeClock(monotonic=0.0)
    calls = []

    def flaky() -> str:
        calls.append(clock.monotonic())
        if len(calls) < 3:
            raise Unavailable("db down")
        return "ok"

    retrier = Retrier(RetryPolicy(attempts=5, initial_delay=1.0, jitter=0.0),
                      sleep=clock.sleep, clock=clock)
    assert retrier.call(flaky) == "ok"
    assert clock.sleeps == [1.0, 2.0]
    assert calls == [0.0, 1.0, 3.0]


def test_gives_up_with_unavailable_saying_how_long() -> None:
    clock = FakeClock(monotonic=0.0)
    seen: list[tuple[int, float]] = []
    retrier = Retrier(RetryPolicy(attempts=3, initial_delay=0.5, jitter=0.0),
                      sleep=clock.sleep, clock=clock,
                      on_retry=lambda n, exc, d: seen.append((n, d)))

    def down() -> None:
        raise Unavailable("connection refused")

    with pytest.raises(Unavailable, match=r"connection refused \(gave up after 3 attempts "
                                          r"in 1\.50s\)") as err:
        retrier.call(down)
    assert isinstance(err.value.__cause__, Unavailable)
    assert seen == [(1, 0.5), (2, 1.0)]


def test_deadline_stops_early() -> None:
    clock = FakeClock(monotonic=0.0)
    retrier = Retrier(RetryPolicy(attempts=100, initial_delay=1.0, max_delay=10.0, jitter=0.0,
                                  deadline=5.0),
                      sleep=clock.sleep, clock=clock)
    with pytest.raises(Unavailable):
        retrier.call(lambda: (_ for _ in ()).throw(Unavailable("x")))
    assert clock.sleeps == [1.0, 2.0]  # a third wait (4 s) would pass the 5 s deadline


def test_other_errors_are_not_retried() -> None:
    clock = FakeClock(monotonic=0.0)
    retrier = Retrier(sleep=clock.sleep, clock=clock)

    def bad() -> None:
        raise InvalidArgument("no")

    with pytest.raises(InvalidArgument):
        retrier.call(bad)
    assert clock.sleeps == []


def test_policy_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        RetryPolicy(attempts=0)
    with pytest.raises(ValueError):
        RetryPolicy(jitter=1.5)
