"""Retry with capped exponential backoff, with the clock, sleep and randomness injected.

Used wherever a call can fail for a while and then succeed: a database
that restarts, a leader that moves, an agent that re-registers.  Modelled
on kazoo's `KazooRetry`: the policy is a value, the `Retrier` applies it,
and tests pass `peloton.common.clock.FakeClock` and its `sleep` (which records
the delays and advances the clock) so that no test ever really waits.

Only errors the caller marks as retryable are retried (by default
`Unavailable`, which backends raise for a lost connection); anything else
propagates at once, because retrying a rejected request cannot help.
When the attempts or the deadline run out, the last error is raised again
as `Unavailable`, with how long was tried added to its message.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from peloton.common.clock import SYSTEM_CLOCK, Clock
from peloton.core.errors import Unavailable

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how patiently to retry.

    `attempts` counts the first call (1 = never retry).  The n-th delay is
    `initial_delay * multiplier**(n-1)`, capped at `max_delay`, then moved
    by up to +-`jitter` (a fraction) so that many clients do not retry in
    lock step.  `deadline` (seconds since the first attempt) stops retrying
    early even if attempts remain.
    """

    attempts: int = 5
    initial_delay: float = 0.05
    max_delay: float = 2.0
    multiplier: float = 2.0
    jitter: float = 0.1
    deadline: float | None = None

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError("attempts must be >= 1")
        if self.initial_delay < 0 or self.max_delay < 0 or self.multiplier < 1:
            raise ValueError("delays must be >= 0 and multiplier >= 1")
        if not 0 <= self.jitter < 1:
            raise ValueError("jitter must be in [0, 1)")

    def delay(self, retry_number: int, rand: float = 0.5) -> float:
        """Seconds to wait before retry `retry_number` (1-based); `rand` in [0, 1)."""
        base = min(self.max_delay, self.initial_delay * self.multiplier ** (retry_number - 1))
        return max(0.0, base * (1 + self.jitter * (2 * rand - 1)))


#: No retry at all: the first failure is final (for tests and interactive tools).
NO_RETRY = RetryPolicy(attempts=1)


class Retrier:
    """Applies a RetryPolicy to calls; safe to share between threads (it holds no state)."""

    def __init__(self, policy: RetryPolicy = RetryPolicy(), *,
                 sleep: Callable[[float], None] = time.sleep,
                 clock: Clock = SYSTEM_CLOCK,
                 rand: Callable[[], float] = random.random,
                 retry_on: tuple[type[BaseException], ...] = (Unavailable,),
                 on_retry: Callable[[int, BaseException, float], None] | None = None) -> None:
        self.policy = policy
        self._sleep = sleep
        self._clock = clock
        self._rand = rand
        self._retry_on = retry_on
        self._on_retry = on_retry

    def call(self, fn: Callable[[], T]) -> T:
        """Call `fn` until it returns, raises a non-retryable error, or the policy gives up.

        On giving up, raises `Unavailable` (chained to the last error) saying
        how many attempts were made over how long.
        """
        start = self._clock.monotonic()
        attempt = 1
        while True:
            try:
                return fn()
            except self._retry_on as exc:
                delay = self.policy.delay(attempt, self._rand())
                elapsed = self._clock.monotonic() - start
                out_of_time = (self.policy.deadline is not None
                               and elapsed + delay > self.policy.deadline)
                if attempt >= self.policy.attempts or out_of_time:
                    raise Unavailable(f"{exc} (gave up after {attempt} attempt"
                                      f"{'s' if attempt != 1 else ''} in {elapsed:.2f}s)") from exc
                if self._on_retry is not None:
                    self._on_retry(attempt, exc, delay)
                self._sleep(delay)
                attempt += 1
