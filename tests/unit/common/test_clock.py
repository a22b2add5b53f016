"""The injected clock: fake time moves only when told, both readings together."""

from __future__ import annotations

import time

import pytest

from peloton.common.clock import SYSTEM_CLOCK, FakeClock


def test_fake_clock_moves_only_when_advanced() -> None:
    clock = FakeClock(wall=100.0, monotonic=5.0)
    assert (clock.wall(), clock.monotonic()) == (100.0, 5.0)
    clock.advance(2.5)
    assert (clock.wall(), clock.monotonic()) == (102.5, 7.5)
    with pytest.raises(ValueError):
        clock.advance(-1)


def test_fake_sleep_records_and_advances() -> None:
    clock = FakeClock(wall=0.0, monotonic=0.0)
    clock.sleep(1.0)
    clock.sleep(0.5)
    assert clock.sleeps == [1.0, 0.5]
    assert clock.monotonic() == 1.5


def test_system_clock_reads_the_real_clocks() -> None:
    before_wall, before_mono = time.time(), time.monotonic()
    assert SYSTEM_CLOCK.wall() >= before_wall
    assert SYSTEM_CLOCK.monotonic() >= before_mono
