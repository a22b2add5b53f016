"""Backoff and retry rules."""

from __future__ import annotations

from peloton.core.lifecycle import retry


def test_service_restart_throttle() -> None:
    assert [retry.service_restart_delay(n) for n in range(0, 4)] == [0, 30, 60, 120]
    assert retry.service_restart_delay(8) == 3600  # 30 * 128 = 3840, capped at 60 min
    assert retry.service_restart_delay(10**6) == 3600
    assert not retry.service_restart_due(2, last_update=100, now=159)
    assert retry.service_restart_due(2, last_update=100, now=160)


def test_batch_retries() -> None:
    assert retry.batch_retry_allowed(2, 3) and not retry.batch_retry_allowed(3, 3)
    assert not retry.batch_retry_allowed(0, 0)
    assert retry.batch_retry_allowed(3, 0, system_failure=True)
    assert not retry.batch_retry_allowed(4, 0, system_failure=True)


def test_engine_backoff_is_linear_and_capped() -> None:
    assert [retry.engine_backoff(n) for n in (0, 1, 2, 3)] == [0, 10, 20, 30]
    assert retry.engine_backoff(1000) == 3600


def test_placement_backoff_cycles() -> None:
    assert [retry.placing_timeout(a) for a in (1, 2, 3)] == [900, 1200, 600]
    assert [retry.cycle_ended(a) for a in (1, 2, 3, 6)] == [False, False, True, True]
    assert not retry.wants_host_reservation(9, enabled=False)
    assert retry.wants_host_reservation(9, enabled=True)
    assert not retry.wants_host_reservation(8, enabled=True)
