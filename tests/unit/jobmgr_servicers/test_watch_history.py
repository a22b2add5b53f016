"""watch.py's publisher for the all-active members' fan-in: a young member's history (the
changes since its start, replayed to a Watch that asks for them, refused once no longer
whole) and its leave (every stream ends cleanly, nothing is published after).  Direct,
over the cache's listeners as the aggregate calls them; over gRPC in test_watch_fanin.py."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import gevent
import pytest

from peloton.core.model.constraints import Label
from peloton.core.states import TaskState
from peloton.jobmgr.job_deps import Listeners
from peloton.jobmgr.servicers.watch import HistoryGone, WatchPublisher
from tests.contract import factories as f


class Clock:
    """Monotonic seconds a test moves."""

    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


def job(job_id: str, labels: tuple[Label, ...] = ()) -> Any:
    """What a task listener is given of a cached job: its id and its tasks' labels."""
    spec = SimpleNamespace(labels=labels)
    return SimpleNamespace(job_id=job_id, task_spec=lambda _i, _v: spec, spec=spec,
                           runtime=None, update=None)


def task_changed(listeners: Listeners, of: Any, instance: int) -> None:
    """A task of `of` changed, told as the aggregate tells its listeners."""
    for fn in listeners.task:
        fn(of, instance, f.task_runtime(TaskState.RUNNING))


def pods(watcher: Any) -> list[str]:
    return [f"{job_id}-{instance}" for job_id, instance, _rt in watcher.buffer]


def publisher(listeners: Listeners, clock: Clock, **kwargs: Any) -> WatchPublisher:
    return WatchPublisher(listeners, journal=True, journal_seconds=60.0, clock=clock, **kwargs)


def test_a_watch_from_the_start_gets_the_matching_changes_since_then_then_the_live_ones() -> None:
    listeners, clock = Listeners(), Clock()
    pub = publisher(listeners, clock)
    a, b = job("a"), job("b", (Label("team", "x"),))
    task_changed(listeners, a, 0)  # before anyone watches
    task_changed(listeners, b, 0)
    task_changed(listeners, a, 1)
    every = pub.add(True, from_start=True)
    of_a = pub.add(True, frozenset({"a"}), from_start=True)
    labelled = pub.add(True, labels=(Label("team", "x"),), from_start=True)
    now = pub.add(True)  # not from the start: the live changes only
    task_changed(listeners, b, 1)
    assert pods(every) == ["a-0", "b-0", "a-1", "b-1"]
    assert pods(of_a) == ["a-0", "a-1"]
    assert pods(labelled) == ["b-0", "b-1"]
    assert pods(now) == ["b-1"]


def test_without_a_history_a_watch_from_the_start_is_refused() -> None:
    # A lone job manager keeps none: nothing it published before can be promised.
    listeners = Listeners()
    pub = WatchPublisher(listeners)
    assert listeners.task == []  # nobody watches: it does not even listen
    with pytest.raises(HistoryGone):
        pub.add(True, from_start=True)


def test_the_history_is_refused_once_too_long() -> None:
    listeners, clock = Listeners(), Clock()
    pub = publisher(listeners, clock, journal_size=3)
    a = job("a")
    for instance in range(3):
        task_changed(listeners, a, instance)
    assert pods(pub.add(True, from_start=True)) == ["a-0", "a-1", "a-2"]
    task_changed(listeners, a, 3)  # a fourth: the start is no longer covered
    with pytest.raises(HistoryGone):
        pub.add(True, from_start=True)


def test_the_history_is_refused_once_too_old_and_then_not_listened_for() -> None:
    listeners, clock = Listeners(), Clock()
    pub = publisher(listeners, clock)
    assert len(listeners.task) == 1  # listening for the history alone
    task_changed(listeners, job("a"), 0)
    clock.now += 60.5
    with pytest.raises(HistoryGone):
        pub.add(True, from_start=True)
    task_changed(listeners, job("a"), 1)
    deadline = time.monotonic() + 5.0
    while listeners.task:  # dropped after the listeners' loop, not under it
        assert time.monotonic() < deadline, "the publisher still listens"
        gevent.sleep(0.01)


def test_dropping_the_history_under_the_caches_loop_skips_no_other_listener() -> None:
    listeners, clock = Listeners(), Clock()
    publisher(listeners, clock, journal_size=1)
    heard: list[int] = []
    listeners.task.append(lambda _job, instance, _rt: heard.append(instance))
    task_changed(listeners, job("a"), 0)
    task_changed(listeners, job("a"), 1)  # the history is dropped while the loop runs
    assert heard == [0, 1]


def test_a_leave_ends_every_stream_after_what_it_buffered_and_publishes_nothing_more() -> None:
    listeners, clock = Listeners(), Clock()
    pub = publisher(listeners, clock)
    watcher = pub.add(True)
    task_changed(listeners, job("a"), 0)
    pub.leave()
    task_changed(listeners, job("a"), 1)
    assert watcher.ended == "leave" and pods(watcher) == ["a-0"]  # still to be sent
    assert pub.watchers == {} and listeners.task == []
    late = pub.add(True)  # a fan-in that had not heard of the leave yet
    assert late.ended == "leave" and not late.buffer and pub.watchers == {}
    late_from_start = pub.add(True, from_start=True)  # ended, not refused: nothing is lost
    assert late_from_start.ended == "leave"
