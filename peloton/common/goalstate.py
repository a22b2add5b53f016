"""The generic goal-state engine: evaluate entities when due, one at a time each, with backoff.

Modelled on Peloton's `pkg/common/goalstate`.  Domain code (jobs, tasks,
updates) implements `Entity`: an id plus `actions()`, which looks at the
entity's current and goal state and returns the idempotent actions to run,
in order.  The engine knows nothing else about entities.

Guarantees:
- an entity is tracked from its first `enqueue` until `delete`; enqueueing
  again keeps the earlier of the two deadlines;
- at most one evaluation of an entity runs at a time; an `enqueue` that
  arrives during an evaluation is remembered and the entity runs again
  after it (at that deadline, or earlier if a retry is due earlier);
- actions run in order; the first one that raises ends the evaluation, which
  counts as a failure: the entity is re-enqueued after a backoff that grows
  with consecutive failures and is capped; a successful evaluation resets it;
- `stop()` lets running evaluations finish (up to a timeout), starts no new
  ones, and keeps everything tracked, so a later `start()` resumes.

Backoff: capped exponential with jitter (`DEFAULT_BACKOFF`: 10 s, doubling,
capped at 60 min, +-10 %), using `peloton.common.retry.RetryPolicy`.
Peloton's engine adds 10 s per failure (linear) up to 60 min, although its
comments say exponential.  Linear keeps a thousand tasks that fail together
(a resource manager outage) retrying about 26 times each in the first hour,
in lock step; doubling retries each about 9 times, and the jitter spreads them
out.  Peloton itself throttles failing service tasks exponentially (30 s x 2^n).

Concurrency: `start()` runs a dispatcher greenlet and a gevent pool of
`workers` greenlets.  Without `start()`, `run_due()` evaluates due entities
in the caller, which is how tests drive the engine with a fake clock.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import gevent
import gevent.event
import gevent.pool

from peloton.common.deadline_queue import DeadlineQueue
from peloton.common.retry import RetryPolicy

#: Peloton's cap (60 min) with doubling from 10 s and 10 % jitter; `attempts` is unused here.
DEFAULT_BACKOFF = RetryPolicy(initial_delay=10.0, max_delay=3600.0, multiplier=2.0, jitter=0.1)


@dataclass(frozen=True, slots=True)
class Action:
    """One named, idempotent step; `run` raises to report failure."""

    name: str
    run: Callable[[], None]


class Entity(Protocol):
    """What the engine evaluates.  Implemented by job, task and update wrappers."""

    @property
    def id(self) -> str:
        """Stable identity; entities with the same id are never evaluated concurrently."""
        ...

    def actions(self) -> Sequence[Action]:
        """The actions to run now, in order, given current and goal state (empty: nothing to do).

        Called by the engine at the start of each evaluation; raising counts as a failure.
        """
        ...


class EngineObserver(Protocol):
    """Optional metrics hooks (see `peloton.common.metrics.GoalStateMetrics`)."""

    def action_finished(self, action: str, ok: bool, seconds: float) -> None:
        """An action returned (`ok`) or raised, after `seconds`."""
        ...

    def queue_changed(self, scheduled: int, tracked: int) -> None:
        """The number of scheduled and of tracked entities changed."""
        ...


class _Tracked:
    __slots__ = ("entity", "failures", "pending", "running")

    def __init__(self, entity: Entity) -> None:
        self.entity = entity
        self.failures = 0
        self.running = False
        self.pending: float | None = None  # deadline asked for while running


class Engine:
    """Evaluates tracked entities when their deadline passes; see the module docstring."""

    def __init__(self, *, name: str = "goalstate", workers: int = 1,
                 backoff: RetryPolicy = DEFAULT_BACKOFF,
                 clock: Callable[[], float] = time.monotonic,
                 rand: Callable[[], float] = random.random,
                 observer: EngineObserver | None = None,
                 log: logging.Logger | None = None) -> None:
        if workers < 1:
            raise ValueError("workers must be >= 1")
        self.name = name
        self.workers = workers
        self.backoff = backoff
        self._clock = clock
        self._rand = rand
        self._observer = observer
        self._log = log or logging.getLogger(f"peloton.goalstate.{name}")
        self._lock = threading.Lock()  # short critical sections only; never held across a yield
        self._queue: DeadlineQueue[str] = DeadlineQueue()
        self._tracked: dict[str, _Tracked] = {}
        self._wake = gevent.event.Event()
        self._stopping = False
        self._dispatcher: Any = None
        self._pool: Any = None

    # -- scheduling -----------------------------------------------------------------------

    def enqueue(self, entity: Entity, deadline: float | None = None) -> None:
        """Track `entity` and evaluate it no later than `deadline` (engine clock; None = now)."""
        when = self._clock() if deadline is None else deadline
        with self._lock:
            tracked = self._tracked.get(entity.id)
            if tracked is None:
                tracked = self._tracked[entity.id] = _Tracked(entity)
            tracked.entity = entity
            if tracked.running:
                tracked.pending = when if tracked.pending is None else min(tracked.pending, when)
            else:
                self._queue.enqueue(entity.id, when)
        self._changed()

    def enqueue_after(self, entity: Entity, delay: float) -> None:
        """`enqueue` with a deadline `delay` seconds from now."""
        self.enqueue(entity, self._clock() + delay)

    def delete(self, entity_id: str) -> None:
        """Stop tracking an entity; a running evaluation finishes but is not re-enqueued."""
        with self._lock:
            self._tracked.pop(entity_id, None)
            self._queue.remove(entity_id)
        self._changed()

    def is_tracked(self, entity_id: str) -> bool:
        """True between the first `enqueue` and `delete`."""
        return entity_id in self._tracked

    def is_scheduled(self, entity_id: str) -> bool:
        """True if the entity waits in the queue or is due to run again after its evaluation."""
        tracked = self._tracked.get(entity_id)
        return entity_id in self._queue or (tracked is not None and tracked.pending is not None)

    def deadline(self, entity_id: str) -> float | None:
        """When the entity is next due (None if it is not queued)."""
        return self._queue.deadline(entity_id)

    def failures(self, entity_id: str) -> int:
        """Consecutive failed evaluations of the entity (0 after a success)."""
        tracked = self._tracked.get(entity_id)
        return tracked.failures if tracked is not None else 0

    # -- evaluation -----------------------------------------------------------------------

    def run_due(self) -> int:
        """Evaluate, in the caller, every entity due now that is not running; returns how many.

        Entities enqueued during this call run in a later call, so a pass is bounded.
        """
        with self._lock:
            claimed = [t for key in self._queue.pop_all_due(self._clock())
                       if (t := self._claim_locked(key)) is not None]
        for tracked in claimed:
            self._evaluate(tracked)
        return len(claimed)

    def _claim_locked(self, key: str) -> _Tracked | None:
        tracked = self._tracked.get(key)
        if tracked is None:
            return None
        tracked.running = True
        return tracked

    def _claim_next(self) -> _Tracked | None:
        with self._lock:
            while (key := self._queue.pop_due(self._clock())) is not None:
                if (tracked := self._claim_locked(key)) is not None:
                    return tracked
        return None

    def _evaluate(self, tracked: _Tracked) -> None:
        try:
            ok: bool | None = self._run_actions(tracked.entity)
        except BaseException:  # killed by stop(): neither success nor failure, run again
            ok = None
            raise
        finally:
            self._finish(tracked, ok)

    def _run_actions(self, entity: Entity) -> bool:
        try:
            actions = list(entity.actions())
        except Exception:
            self._log.exception("goal-state %s: actions() of %s failed", self.name, entity.id)
            return False
        for action in actions:
            started = self._clock()
            try:
                action.run()
            except Exception:
                self._log.warning("goal-state %s: action %s of %s failed", self.name, action.name,
                                  entity.id, exc_info=True)
                self._observe(action.name, False, self._clock() - started)
                return False
            self._observe(action.name, True, self._clock() - started)
        return True

    def _finish(self, tracked: _Tracked, ok: bool | None) -> None:
        """Re-enqueue as needed; `ok` None means the evaluation was interrupted."""
        with self._lock:
            tracked.running = False
            pending, tracked.pending = tracked.pending, None
            if self._tracked.get(tracked.entity.id) is not tracked:
                return  # deleted while running
            if ok is None:
                retry: float | None = self._clock()
            elif ok:
                tracked.failures = 0
                retry = None
            else:
                tracked.failures += 1
                retry = self._clock() + self.backoff.delay(tracked.failures, self._rand())
            candidates = [d for d in (pending, retry) if d is not None]
            if candidates:
                self._queue.enqueue(tracked.entity.id, min(candidates))
        self._changed()

    def _observe(self, action: str, ok: bool, seconds: float) -> None:
        if self._observer is not None:
            self._observer.action_finished(action, ok, seconds)

    def _changed(self) -> None:
        if self._observer is not None:
            self._observer.queue_changed(len(self._queue), len(self._tracked))
        self._wake.set()

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
        # The dispatcher only blocks where it holds no claimed entity (waiting for a free worker
        # or for a deadline), so killing it loses nothing.
        self._dispatcher.kill()
        if not self._pool.join(timeout=timeout):
            self._log.warning("goal-state %s: killing evaluations still running after %.1fs",
                              self.name, timeout)
            self._pool.kill()
        self._dispatcher = self._pool = None

    def _dispatching(self) -> bool:
        return not self._stopping

    def _dispatch(self) -> None:
        while self._dispatching():
            self._pool.wait_available()  # claim only when a worker is free to run it
            if not self._dispatching():
                return
            self._wake.clear()
            tracked = self._claim_next()
            if tracked is not None:
                self._pool.spawn(self._evaluate, tracked)
                continue
            next_deadline = self._queue.next_deadline()
            timeout = None if next_deadline is None else max(0.0, next_deadline - self._clock())
            self._wake.wait(timeout)
