"""The generic goal-state engine: evaluate entities when due, one at a time each, with backoff.

Modelled on Peloton's `pkg/common/goalstate`, in two parts so that domain code
can be wired without cycles:

* `Schedule` holds only keys and time: which entities are tracked, when each is
  next due, whether one is being evaluated, how often it failed in a row.  It
  is built first; the domain's actions take it (to schedule re-looks) and know
  nothing of the engine that runs it.
* `Engine` runs a schedule: it is given a `resolve(key)` function that looks at
  the entity's current and goal state and returns the idempotent actions to
  run now, in order.  It knows nothing else about entities.

Guarantees:
- a key is tracked from its first `enqueue` until `delete`; enqueueing again
  keeps the earlier of the two deadlines;
- at most one evaluation of a key runs at a time; an `enqueue` that arrives
  during an evaluation is remembered and the key runs again after it (at that
  deadline, or earlier if a retry is due earlier);
- actions run in order; the first one that raises ends the evaluation, which
  counts as a failure: the key is re-enqueued after a backoff that grows with
  consecutive failures and is capped; a successful evaluation resets it;
- `stop()` lets running evaluations finish (up to a timeout), starts no new
  ones, and keeps everything tracked, so a later `start()` resumes.

Backoff: capped exponential with jitter (`DEFAULT_BACKOFF`: 10 s, doubling,
capped at 60 min, +-10 %), using `peloton.common.retry.RetryPolicy`.
Peloton's engine adds 10 s per failure (linear) up to 60 min, although its
comments say exponential.  Linear keeps a thousand tasks that fail together
(a resource manager outage) retrying about 26 times each in the first hour,
in lock step; doubling retries each about 9 times, and the jitter spreads them
out.  Peloton itself throttles failing service tasks exponentially (30 s x 2^n).

Time: deadlines are on the injected clock's monotonic reading.  Concurrency:
`start()` runs a dispatcher greenlet and a gevent pool of `workers` greenlets.
Without `start()`, `run_due()` evaluates due keys in the caller, which is how
tests drive an engine with a fake clock.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import gevent
import gevent.event
import gevent.pool

from peloton.common.clock import SYSTEM_CLOCK, Clock
from peloton.common.deadline_queue import DeadlineQueue
from peloton.common.retry import RetryPolicy

K = TypeVar("K", bound=Hashable)

#: Peloton's cap (60 min) with doubling from 10 s and 10 % jitter; `attempts` is unused here.
DEFAULT_BACKOFF = RetryPolicy(initial_delay=10.0, max_delay=3600.0, multiplier=2.0, jitter=0.1)


@dataclass(frozen=True, slots=True)
class Action:
    """One named, idempotent step; `run` raises to report failure."""

    name: str
    run: Callable[[], None]


class EngineObserver(Protocol):
    """Optional metrics hooks (see `peloton.common.metrics.GoalStateMetrics`)."""

    def action_finished(self, action: str, ok: bool, seconds: float) -> None:
        """An action returned (`ok`) or raised, after `seconds`."""
        ...

    def queue_changed(self, scheduled: int, tracked: int) -> None:
        """The number of scheduled and of tracked keys changed."""
        ...


class _Tracked:
    __slots__ = ("failures", "pending", "running")

    def __init__(self) -> None:
        self.failures = 0
        self.running = False
        self.pending: float | None = None  # deadline asked for while running


class Schedule(Generic[K]):
    """Tracked keys, their deadlines and failure counts; see the module docstring.

    Safe to use from any greenlet; every method is short and never yields.
    """

    def __init__(self, *, name: str = "goalstate", clock: Clock = SYSTEM_CLOCK,
                 backoff: RetryPolicy = DEFAULT_BACKOFF,
                 rand: Callable[[], float] = random.random,
                 observer: EngineObserver | None = None) -> None:
        self.name = name
        self.clock = clock
        self.backoff = backoff
        self.observer = observer
        self._rand = rand
        self._queue: DeadlineQueue[K] = DeadlineQueue()
        self._tracked: dict[K, _Tracked] = {}
        #: Set whenever the schedule changed (the engine's dispatcher waits on it).
        self.changed = gevent.event.Event()

    # -- what domain code calls ---------------------------------------------------------
    def enqueue(self, key: K, deadline: float | None = None) -> None:
        """Track `key` and evaluate it no later than `deadline` (monotonic; None = now)."""
        when = self.clock.monotonic() if deadline is None else deadline
        tracked = self._tracked.get(key)
        if tracked is None:
            tracked = self._tracked[key] = _Tracked()
        if tracked.running:
            tracked.pending = when if tracked.pending is None else min(tracked.pending, when)
        else:
            self._queue.enqueue(key, when)
        self._changed()

    def enqueue_after(self, key: K, delay: float) -> None:
        """`enqueue` with a deadline `delay` seconds from now."""
        self.enqueue(key, self.clock.monotonic() + delay)

    def delete(self, key: K) -> None:
        """Stop tracking a key; a running evaluation finishes but is not re-enqueued."""
        self._tracked.pop(key, None)
        self._queue.remove(key)
        self._changed()

    def is_tracked(self, key: K) -> bool:
        """True between the first `enqueue` and `delete`."""
        return key in self._tracked

    def is_scheduled(self, key: K) -> bool:
        """True if the key waits in the queue or is due to run again after its evaluation."""
        tracked = self._tracked.get(key)
        return key in self._queue or (tracked is not None and tracked.pending is not None)

    def is_running(self, key: K) -> bool:
        """True while an evaluation of the key is in progress."""
        tracked = self._tracked.get(key)
        return tracked is not None and tracked.running

    def deadline(self, key: K) -> float | None:
        """When the key is next due (None if it is not queued)."""
        return self._queue.deadline(key)

    def failures(self, key: K) -> int:
        """Consecutive failed evaluations of the key (0 after a success)."""
        tracked = self._tracked.get(key)
        return tracked.failures if tracked is not None else 0

    def __len__(self) -> int:
        """Keys tracked."""
        return len(self._tracked)

    # -- what the engine calls -------------------------------------------------------
    def next_deadline(self) -> float | None:
        """The earliest deadline queued, or None."""
        return self._queue.next_deadline()

    def claim_due(self) -> list[K]:
        """Every key due now, marked running (earliest first)."""
        now = self.clock.monotonic()
        return [key for key in self._queue.pop_all_due(now) if self._claim(key)]

    def claim_next(self) -> K | None:
        """The earliest key due now, marked running, or None."""
        now = self.clock.monotonic()
        while (key := self._queue.pop_due(now)) is not None:
            if self._claim(key):
                return key
        return None

    def _claim(self, key: K) -> bool:
        tracked = self._tracked.get(key)
        if tracked is None:
            return False
        tracked.running = True
        return True

    def finish(self, key: K, ok: bool | None) -> None:
        """An evaluation ended: `ok`, failed (False), or was interrupted (None, run again)."""
        tracked = self._tracked.get(key)
        if tracked is None:
            return  # deleted while running
        tracked.running = False
        pending, tracked.pending = tracked.pending, None
        now = self.clock.monotonic()
        retry: float | None = None
        if ok is None:
            retry = now
        elif ok:
            tracked.failures = 0
        else:
            tracked.failures += 1
            retry = now + self.backoff.delay(tracked.failures, self._rand())
        candidates = [d for d in (pending, retry) if d is not None]
        if candidates:
            self._queue.enqueue(key, min(candidates))
        self._changed()

    def _changed(self) -> None:
        if self.observer is not None:
            self.observer.queue_changed(len(self._queue), len(self._tracked))
        self.changed.set()


class Engine(Generic[K]):
    """Runs a `Schedule`: evaluates each key when due with the actions `resolve` names."""

    def __init__(self, schedule: Schedule[K], resolve: Callable[[K], Sequence[Action]], *,
                 workers: int = 1, log: logging.Logger | None = None) -> None:
        if workers < 1:
            raise ValueError("workers must be >= 1")
        self.schedule = schedule
        self.resolve = resolve
        self.workers = workers
        self._log = log or logging.getLogger(f"peloton.goalstate.{schedule.name}")
        self._stopping = False
        self._dispatcher: Any = None
        self._pool: Any = None

    @property
    def running(self) -> bool:
        """Whether `start()` was called without a `stop()` since."""
        return self._dispatcher is not None

    def run_due(self) -> int:
        """Evaluate, in the caller, every key due now that is not running; returns how many.

        Keys enqueued during this call run in a later call, so a pass is bounded.
        """
        claimed = self.schedule.claim_due()
        for key in claimed:
            self._evaluate(key)
        return len(claimed)

    def _evaluate(self, key: K) -> None:
        ok: bool | None = None  # killed by stop(): neither success nor failure, run again
        try:
            ok = self._run_actions(key)
        finally:
            self.schedule.finish(key, ok)

    def _run_actions(self, key: K) -> bool:
        name, clock = self.schedule.name, self.schedule.clock
        try:
            actions = list(self.resolve(key))
        except Exception:
            self._log.exception("goal-state %s: resolving %s failed", name, key)
            return False
        for action in actions:
            started = clock.monotonic()
            try:
                action.run()
            except Exception:
                self._log.warning("goal-state %s: action %s of %s failed", name, action.name,
                                  key, exc_info=True)
                self._observe(action.name, False, clock.monotonic() - started)
                return False
            self._observe(action.name, True, clock.monotonic() - started)
        return True

    def _observe(self, action: str, ok: bool, seconds: float) -> None:
        observer = self.schedule.observer
        if observer is not None:
            observer.action_finished(action, ok, seconds)

    # -- lifecycle ------------------------------------------------------------------------
    def start(self) -> None:
        """Start the dispatcher and the worker pool; idempotent."""
        if self._dispatcher is not None:
            return
        self._stopping = False
        self._pool = gevent.pool.Pool(self.workers)
        self._dispatcher = gevent.spawn(self._dispatch)

    def stop(self, timeout: float = 10.0) -> None:
        """Start no new evaluations, wait up to `timeout` for running ones, then kill stragglers."""
        if self._dispatcher is None:
            return
        self._stopping = True
        # The dispatcher only blocks where it holds no claimed key (waiting for a free worker
        # or for a deadline), so killing it loses nothing.
        self._dispatcher.kill()
        if not self._pool.join(timeout=timeout):
            self._log.warning("goal-state %s: killing evaluations still running after %.1fs",
                              self.schedule.name, timeout)
            self._pool.kill()
        self._dispatcher = self._pool = None

    def _dispatching(self) -> bool:
        return not self._stopping

    def _dispatch(self) -> None:
        schedule = self.schedule
        while self._dispatching():
            self._pool.wait_available()  # claim only when a worker is free to run it
            if not self._dispatching():
                return
            schedule.changed.clear()
            key = schedule.claim_next()
            if key is not None:
                self._pool.spawn(self._evaluate, key)
                continue
            next_deadline = schedule.next_deadline()
            timeout = (None if next_deadline is None
                       else max(0.0, next_deadline - schedule.clock.monotonic()))
            schedule.changed.wait(timeout)
