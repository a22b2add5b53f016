"""The loop behind the election and partition membership (peloton/common/role_loop.py), on a
fake client: what wakes a step, what a connection drop tells the step, the backoff after a
failed step, and that `on_exit` ends every run of the loop, however it is stopped.

The real-ZooKeeper behaviour of both roles is in tests/integration/test_leader.py and
test_membership.py.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import pytest
from kazoo.client import KazooState
from kazoo.exceptions import ConnectionLoss

from peloton.common.retry import RetryPolicy
from peloton.common.role_loop import RoleLoop
from tests.harness.procs import wait_for

RECHECK = 3600.0  # never comes in a test: a step runs again only when something wakes it
BACKOFF = RetryPolicy(initial_delay=0.001, max_delay=0.004, multiplier=2.0, jitter=0.0)


class RecordingEvent:
    """A real event that remembers every timeout the loop waited with."""

    def __init__(self) -> None:
        self.waits: list[float | None] = []
        self._event = threading.Event()

    def set(self) -> None:
        self._event.set()

    def clear(self) -> None:
        self._event.clear()

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(timeout)
        return self._event.wait(timeout)


class FakeHandler:
    def __init__(self) -> None:
        self.events: list[RecordingEvent] = []

    def event_object(self) -> RecordingEvent:
        self.events.append(RecordingEvent())
        return self.events[-1]

    def spawn(self, fn: Callable[[], None]) -> threading.Thread:
        thread = threading.Thread(target=fn, daemon=True)
        thread.start()
        return thread


class FakeClient:
    """What the loop uses of a KazooClient: its handler, `connected` and state listeners."""

    def __init__(self, connected: bool = True) -> None:
        self.handler = FakeHandler()
        self.connected = connected
        self.listeners: list[Callable[[str], Any]] = []

    def add_listener(self, listener: Callable[[str], Any]) -> None:
        self.listeners.append(listener)

    def remove_listener(self, listener: Callable[[str], Any]) -> None:
        self.listeners.remove(listener)

    def report(self, state: str) -> None:
        self.connected = state == KazooState.CONNECTED
        for listener in list(self.listeners):
            listener(state)


class Role:
    """A role whose steps record what the loop told them, and fail while told to."""

    def __init__(self, client: FakeClient, **kwargs: Any) -> None:
        self.seen: list[tuple[bool, bool]] = []  # (connected, interrupted) per step
        self.exits = 0
        self.failures: list[Exception] = []
        self.on_step: Callable[[], None] = lambda: None
        self.loop = RoleLoop(client, self.step, self.on_exit, label="test role", retry=BACKOFF,
                             recheck=RECHECK, rand=lambda: 0.5, **kwargs)

    def step(self) -> None:
        self.seen.append((self.loop.connected, self.loop.take_interrupted()))
        self.on_step()
        if self.failures:
            raise self.failures.pop(0)

    def on_exit(self) -> None:
        self.exits += 1


@pytest.fixture
def client() -> FakeClient:
    return FakeClient()


def test_a_step_runs_at_start_and_again_on_each_wake(client: FakeClient) -> None:
    role = Role(client)
    role.loop.start()
    role.loop.start()  # idempotent: one loop
    wait_for(lambda: len(role.seen) == 1, 5, "the first step")
    assert role.seen == [(True, False)] and len(client.listeners) == 1
    role.loop.wake("a watch event")
    wait_for(lambda: len(role.seen) == 2, 5, "a step after the wake")
    role.loop.stop()
    assert role.exits == 1 and client.listeners == []


def test_a_dropped_connection_is_seen_at_once_and_told_to_the_step_once(
        client: FakeClient) -> None:
    role = Role(client)
    role.loop.start()
    wait_for(lambda: len(role.seen) == 1, 5, "the first step")
    client.report(KazooState.SUSPENDED)
    connected_at_once = role.loop.connected  # before the loop ran: `is_leader`/`held` read it
    assert not connected_at_once
    wait_for(lambda: len(role.seen) == 2, 5, "a step after the drop")
    assert role.seen[1] == (False, True)
    client.report(KazooState.CONNECTED)
    wait_for(lambda: len(role.seen) == 3, 5, "a step after the reconnect")
    assert role.seen[2] == (True, False)  # told once

    def blip() -> None:  # a drop and a reconnect before the loop looks again
        role.on_step = lambda: None
        client.report(KazooState.LOST)
        client.report(KazooState.CONNECTED)

    role.on_step = blip
    role.loop.wake()
    wait_for(lambda: len(role.seen) == 5, 5, "a step after the blip")
    assert role.seen[4] == (True, True) and role.loop.connected
    role.loop.stop()


def test_not_connected_at_start_until_the_client_says_so() -> None:
    client = FakeClient(connected=False)
    role = Role(client)
    assert not role.loop.connected  # before start
    role.loop.start()
    wait_for(lambda: len(role.seen) == 1, 5, "the first step")
    assert role.seen == [(False, False)]
    client.report(KazooState.CONNECTED)
    wait_for(lambda: len(role.seen) == 2, 5, "a step once connected")
    assert role.seen[1] == (True, False)
    role.loop.stop()


def test_a_failed_step_is_retried_with_a_capped_backoff_that_resets_on_success(
        client: FakeClient, caplog: pytest.LogCaptureFixture) -> None:
    role = Role(client, expected=(KeyError,))
    role.failures = [ConnectionLoss(), KeyError("expected"), RuntimeError("a bug"),
                     RuntimeError("again")]
    caplog.set_level(logging.WARNING, logger="peloton.role_loop")
    role.loop.start()
    wait_for(lambda: len(role.seen) == 5, 5, "four retries and a success")
    wake = client.handler.events[0]
    wait_for(lambda: len(wake.waits) == 5, 5, "the wait after the success")
    assert wake.waits == [0.001, 0.002, 0.004, 0.004, RECHECK]
    role.failures = [RuntimeError("after a success")]
    role.loop.wake()
    wait_for(lambda: len(wake.waits) == 7, 5, "a new failure and its retry")
    assert wake.waits[5] == 0.001  # the count starts again
    traced = [r.getMessage() for r in caplog.records if r.exc_info]
    quiet = [r.getMessage() for r in caplog.records if not r.exc_info]
    assert quiet[0].startswith("test role: ConnectionLoss; retrying in")
    assert quiet[1].startswith("test role: 'expected'; retrying in")
    assert [m.split(";")[0] for m in traced] == ["test role: a bug", "test role: again",
                                                  "test role: after a success"]
    role.loop.stop()
    assert role.exits == 1


def test_stop_from_a_step_ends_the_loop_after_that_step(client: FakeClient) -> None:
    role = Role(client)
    role.loop.start()
    wait_for(lambda: len(role.seen) == 1, 5, "the first step")
    role.on_step = role.loop.stop  # as a callback that stops its own component
    role.loop.wake()
    wait_for(lambda: role.exits == 1, 5, "on_exit after the stopping step")
    assert len(role.seen) == 2 and client.listeners == []
    role.on_step = lambda: None
    role.loop.start()  # and it can be started again
    wait_for(lambda: len(role.seen) == 3, 5, "the first step of the second run")
    role.loop.stop()
    assert role.exits == 2


def test_on_exit_runs_once_per_run_even_when_never_connected() -> None:
    client = FakeClient(connected=False)
    role = Role(client)
    role.loop.stop()  # before start: nothing to do
    assert role.exits == 0
    role.loop.start()
    role.loop.stop()
    assert role.exits == 1
    role.loop.stop()
    assert role.exits == 1
