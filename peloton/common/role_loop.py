"""The loop behind a ZooKeeper role: an election candidate (leader.py) or a partition member
(membership.py).

A role is one `step` (look at ZooKeeper, act on what changed) run on one loop of the
client's handler (a greenlet, or a thread with kazoo's threading handler) from `start()`
to `stop()`: at once, again whenever something may have changed (a watch fired, see
`wake`; the connection changed state), and every `recheck` seconds as a safety net, not
the mechanism.  A step that raises is logged and retried after a capped backoff
(`retry`); the loop outlives every error, because it owns the role's callbacks:
`on_exit` (give up whatever the role holds) runs on the loop whenever it ends.  So the
role's callbacks all run on the loop, one at a time, never concurrently.

Connection states are safety-relevant, and the loop only records them (kazoo calls the
listener on its connection thread, which must never block):

* `connected` is true only in CONNECTED, and false from the moment kazoo reports
  SUSPENDED or LOST (after 2/3 of the session timeout without a reply, before the server
  can expire the session), even before the loop runs: what the role reports to the rest
  of the process (`is_leader`, `held`) reads it, so a partitioned process stops at once.
* `take_interrupted()` answers True, once, if the connection dropped since it was last
  asked, even if it is back by now: the session may have been lost meanwhile and someone
  else may have led or held, so the step gives everything up and starts from ZooKeeper.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable
from typing import Any

import gevent
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException

from peloton.common.retry import RetryPolicy


class RoleLoop:
    """Runs a ZooKeeper role's `step` on the client's handler; see the module docstring.

    `label` starts each log line (`"election jobmanager"`); a failed step is logged with
    a stack trace unless it is a `KazooException` or one of `expected`.
    """

    def __init__(self, client: KazooClient, step: Callable[[], None],
                 on_exit: Callable[[], None], *, label: str, retry: RetryPolicy,
                 recheck: float, rand: Callable[[], float] = random.random,
                 expected: tuple[type[Exception], ...] = (),
                 log: logging.Logger | None = None) -> None:
        self._client = client
        self._step = step
        self._on_exit = on_exit
        self._label = label
        self._retry = retry
        self._recheck = recheck
        self._rand = rand
        self._quiet = (KazooException, *expected)
        self._log = log or logging.getLogger("peloton.role_loop")
        self._wake = client.handler.event_object()
        self._worker: Any = None  # the handler's greenlet or thread, while started
        self._stopping = False
        self._connected = False
        self._interrupted = False  # the connection dropped since the step last asked

    @property
    def connected(self) -> bool:
        """The connection is up (CONNECTED as last reported; False before `start()`)."""
        return self._connected

    def take_interrupted(self) -> bool:
        """Whether the connection dropped since the last call (which this one clears)."""
        if not self._interrupted:
            return False
        self._interrupted = False
        return True

    def wake(self, _event: Any = None) -> None:
        """Run the step again soon; also usable as a kazoo watch callback."""
        self._wake.set()

    def start(self) -> None:
        """Start the loop (idempotent); returns at once."""
        if self._worker is not None:
            return
        self._stopping = False
        self._connected = self._client.connected
        self._client.add_listener(self._on_state)
        self._worker = self._client.handler.spawn(self._run)

    def stop(self, timeout: float = 10.0) -> None:
        """End the loop after its step in progress, then `on_exit`; waits up to `timeout`
        for both unless called on the loop itself (from a role callback)."""
        if self._worker is None:
            return
        self._stopping = True
        self._wake.set()
        if self._worker not in (threading.current_thread(), gevent.getcurrent()):
            self._worker.join(timeout)
        self._client.remove_listener(self._on_state)
        self._worker = None

    def _on_state(self, state: str) -> None:
        # Runs on kazoo's connection thread: record and wake the loop, never block here.
        self._connected = state == KazooState.CONNECTED
        if not self._connected:
            self._interrupted = True
        self._wake.set()

    def _run(self) -> None:
        failures = 0
        try:
            while not self._stopping:
                self._wake.clear()
                try:
                    self._step()
                    failures = 0
                    delay = self._recheck
                except Exception as exc:  # the loop must outlive any error: it owns on_exit
                    failures += 1
                    delay = self._retry.delay(failures, self._rand())
                    self._log.warning("%s: %s; retrying in %.1fs", self._label,
                                      str(exc) or type(exc).__name__, delay,
                                      exc_info=not isinstance(exc, self._quiet))
                if not self._stopping:
                    self._wake.wait(delay)
        finally:
            self._on_exit()
