"""Lifecycle: start in order, stop in reverse, roll back on a failed start, stop past failures."""

from __future__ import annotations

import pytest

from peloton.common.components import Component, FunctionComponent, Lifecycle


class Recorder:
    def __init__(self, name: str, events: list[str], fail_start: bool = False,
                 fail_stop: bool = False) -> None:
        self.name = name
        self._events = events
        self._fail_start = fail_start
        self._fail_stop = fail_stop

    def start(self) -> None:
        if self._fail_start:
            raise RuntimeError(f"{self.name} cannot start")
        self._events.append(f"start {self.name}")

    def stop(self) -> None:
        self._events.append(f"stop {self.name}")
        if self._fail_stop:
            raise RuntimeError(f"{self.name} cannot stop")


def test_starts_in_order_and_stops_in_reverse() -> None:
    events: list[str] = []
    group = Lifecycle([Recorder(n, events) for n in ("recovery", "engine", "server")])
    group.start()
    assert group.started == ["recovery", "engine", "server"]
    group.stop()
    assert events == ["start recovery", "start engine", "start server",
                      "stop server", "stop engine", "stop recovery"]
    assert not group.running


def test_failed_start_stops_the_started_ones_and_reraises() -> None:
    events: list[str] = []
    group = Lifecycle([Recorder("recovery", events), Recorder("engine", events),
                       Recorder("server", events, fail_start=True), Recorder("never", events)])
    with pytest.raises(RuntimeError, match="server cannot start"):
        group.start()
    assert events == ["start recovery", "start engine", "stop engine", "stop recovery"]
    assert not group.running
    group.stop()  # nothing left to stop
    assert events[-1] == "stop recovery"


def test_the_start_error_survives_a_failing_rollback() -> None:
    events: list[str] = []
    group = Lifecycle([Recorder("a", events, fail_stop=True), Recorder("b", events, fail_start=True)])
    with pytest.raises(RuntimeError, match="b cannot start"):
        group.start()
    assert events == ["start a", "stop a"]


def test_stop_tries_every_component_and_raises_the_first_failure() -> None:
    events: list[str] = []
    group = Lifecycle([Recorder("a", events), Recorder("b", events, fail_stop=True),
                       Recorder("c", events, fail_stop=True)])
    group.start()
    with pytest.raises(RuntimeError, match="c cannot stop"):
        group.stop()
    assert events[3:] == ["stop c", "stop b", "stop a"]
    assert not group.running


def test_start_twice_is_a_no_op_and_groups_nest() -> None:
    events: list[str] = []
    inner = Lifecycle([Recorder("x", events), FunctionComponent("y", lambda: events.append("start y"),
                                                                lambda: events.append("stop y"))],
                      name="inner")
    outer = Lifecycle([Recorder("first", events), inner])
    assert isinstance(inner, Component)
    outer.start()
    outer.start()
    outer.stop()
    assert events == ["start first", "start x", "start y", "stop y", "stop x", "stop first"]
    assert outer.started == []
