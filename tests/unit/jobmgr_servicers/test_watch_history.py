"""watch.py's publisher for the all-active members' fan-in: a young member's history (the
changes since its start, replayed to a Watch that asks for them, refused once no longer
whole), each partition's history since its claim (watch_claims.py: the same for a Watch
of named jobs that asks from their partitions' claims) and its leave (every stream ends
cleanly, nothing is published after).  Direct, over the cache's listeners as the
aggregate calls them; over gRPC in test_watch_fanin.py and test_watch_one_job.py."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any, cast

import gevent
import pytest

from peloton.api.service_registry import Forwarder
from peloton.core.errors import InvalidArgument
from peloton.core.model.constraints import Label
from peloton.core.model.ids import RunId, new_id
from peloton.core.partitions import partition_of
from peloton.core.ports import HostManagerPort
from peloton.core.states import TaskState
from peloton.jobmgr.app import JobManager
from peloton.jobmgr.job_deps import Listeners
from peloton.jobmgr.ownership import Ownership
from peloton.jobmgr.servicers.watch import WatchPublisher
from peloton.jobmgr.servicers.watch_claims import HistoryGone
from peloton.storage import Store
from tests.contract import factories as f
from tests.unit.jobmgr.harness import Harness, job_spec


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


def stops_listening(listeners: Listeners) -> None:
    """The publisher drops its listeners soon (after the listeners' loop, not under it)."""
    deadline = time.monotonic() + 5.0
    while listeners.task:
        assert time.monotonic() < deadline, "the publisher still listens"
        gevent.sleep(0.01)


#: Jobs by the partition the tests' `member` puts them in: "p0-..." in 0, "p1-..." in 1.
def partition(job_id: str) -> int:
    return int(job_id[1])


def member(listeners: Listeners, clock: Clock, **kwargs: Any) -> WatchPublisher:
    """A member's publisher: its first changes and each partition's since its claim."""
    return publisher(listeners, clock, partition=partition, **kwargs)


def of_job(pub: WatchPublisher, job_id: str) -> Any:
    """A pod watch of one job, from its partition's claim."""
    return pub.add(True, frozenset({job_id}), from_claim=True)


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
    stops_listening(listeners)


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


# -- each partition's history since its claim ----------------------------------------------------
def test_a_watch_from_the_claim_gets_its_jobs_changes_since_the_claim_then_the_live_ones() -> None:
    listeners, clock = Listeners(), Clock()
    pub = member(listeners, clock)
    mine, neighbour, elsewhere = job("p0-a"), job("p0-b"), job("p1-c")
    task_changed(listeners, mine, 0)  # before the claim: not this member's to publish
    pub.claimed(0)
    task_changed(listeners, mine, 1)
    task_changed(listeners, neighbour, 0)  # the same partition, another job
    task_changed(listeners, elsewhere, 0)
    watcher = of_job(pub, "p0-a")
    task_changed(listeners, mine, 2)
    assert pods(watcher) == ["p0-a-1", "p0-a-2"]
    # A partition never claimed here has published nothing here: nothing to replay, and
    # what it publishes after its claim comes live.
    early = of_job(pub, "p1-c")
    pub.claimed(1)
    task_changed(listeners, elsewhere, 1)
    assert pods(early) == ["p1-c-1"]


def test_a_released_partitions_history_is_kept_until_it_ages_out_and_a_new_claim_starts_afresh(
        ) -> None:
    listeners, clock = Listeners(), Clock()
    pub = member(listeners, clock)
    pub.claimed(0)
    task_changed(listeners, job("p0-a"), 0)
    pub.released(0)
    task_changed(listeners, job("p0-a"), 1)  # published after the release: not kept
    assert pods(of_job(pub, "p0-a")) == ["p0-a-0"]  # a fan-in that saw the move late
    clock.now += 60.5
    with pytest.raises(HistoryGone):
        of_job(pub, "p0-a")
    pub.claimed(0)
    task_changed(listeners, job("p0-a"), 2)
    assert pods(of_job(pub, "p0-a")) == ["p0-a-2"]


def test_the_claims_histories_are_bounded_together_the_oldest_claim_going_first() -> None:
    listeners, clock = Listeners(), Clock()
    pub = member(listeners, clock, journal_size=3)
    pub.claimed(0)
    task_changed(listeners, job("p0-a"), 0)
    task_changed(listeners, job("p0-a"), 1)
    pub.claimed(1)
    task_changed(listeners, job("p1-b"), 0)
    task_changed(listeners, job("p1-b"), 1)  # a fourth: partition 0's history goes
    with pytest.raises(HistoryGone):
        of_job(pub, "p0-a")
    assert pods(of_job(pub, "p1-b")) == ["p1-b-0", "p1-b-1"]


def test_a_claims_history_is_refused_once_too_old_and_then_not_listened_for() -> None:
    listeners, clock = Listeners(), Clock()
    pub = member(listeners, clock)
    clock.now += 60.5  # the start's history is gone: only the claim's keeps it listening
    pub.claimed(0)
    task_changed(listeners, job("p0-a"), 0)
    assert len(listeners.task) == 1
    clock.now += 60.5
    with pytest.raises(HistoryGone):
        of_job(pub, "p0-a")
    task_changed(listeners, job("p0-a"), 1)
    stops_listening(listeners)


def test_a_watch_from_the_claim_must_follow_the_claim_it_read_last() -> None:
    # A fan-in reading the job's new owner names the epoch of the owner it read before
    # (`after`): a claim that took over from another epoch had an owner in between whose
    # changes the fan-in never read, so the watch is refused, never answered with a gap.
    listeners, clock = Listeners(), Clock()
    pub = member(listeners, clock)
    pub.claimed(0, after=10)
    task_changed(listeners, job("p0-a"), 0)
    followed = pub.add(True, frozenset({"p0-a"}), from_claim=True, after=10)
    assert pods(followed) == ["p0-a-0"]
    with pytest.raises(HistoryGone, match=r"over from epoch 10, not from 7 "):
        pub.add(True, frozenset({"p0-a"}), from_claim=True, after=7)
    # A first claim ever (no epoch before it) follows no claim a fan-in could have read.
    pub.claimed(1, after=None)
    with pytest.raises(HistoryGone, match=r"over from epoch none, not from 7 "):
        pub.add(True, frozenset({"p1-b"}), from_claim=True, after=7)


def test_a_watch_from_a_claim_to_come_ends_when_the_claim_follows_another() -> None:
    # The stream opened before this member marked its claim (the directory showed its node
    # first): the claim is checked when it comes.
    listeners, clock = Listeners(), Clock()
    pub = member(listeners, clock)
    follows = pub.add(True, frozenset({"p0-a"}), from_claim=True, after=10)
    skips = pub.add(True, frozenset({"p1-b"}), from_claim=True, after=10)
    cancelled = pub.add(True, frozenset({"p1-b"}), from_claim=True, after=10)
    pub.drop(cancelled.watch_id, "cancel")
    pub.claimed(0, after=10)
    pub.claimed(1, after=12)  # someone held partition 1 in between
    assert (follows.ended, skips.ended, cancelled.ended) == ("", "overflow", "cancel")
    task_changed(listeners, job("p0-a"), 0)
    assert pods(follows) == ["p0-a-0"]
    assert pub._expected == {}  # nothing left waiting


def test_without_claims_nothing_is_hashed_and_a_watch_from_the_claim_needs_named_jobs() -> None:
    listeners, clock = Listeners(), Clock()
    hashed: list[str] = []

    def partition(job_id: str) -> int:
        hashed.append(job_id)
        return 0

    pub = publisher(listeners, clock, partition=partition)
    task_changed(listeners, job("p0-a"), 0)  # no claim: recording costs no partition hash
    assert hashed == []
    with pytest.raises(InvalidArgument):
        pub.add(True, from_claim=True)
    lone = WatchPublisher(Listeners())  # a lone job manager keeps no partition's history
    with pytest.raises(HistoryGone):
        lone.add(True, frozenset({"p0-a"}), from_claim=True)
    pub.leave()
    assert of_job(pub, "p0-a").ended == "leave"  # ended, not refused: nothing is lost



def test_a_members_acquire_starts_the_partitions_history_and_its_release_closes_it() -> None:
    # app.py's wiring: what a member's job manager publishes of a partition it acquired is
    # kept from the acquire on, for a fan-in that opens its stream later.
    h = Harness()
    try:
        count = h.jm.ownership.count
        job_id = next(j for j in iter(new_id, None) if partition_of(j, count) == 1)
        h.jm.jobs.create(job_spec(1), job_id)
        h.settle(5)
        h.jm = member = JobManager(cast(Store, h.conflicts), h.rm, cast(HostManagerPort, h.hosts),
                                   h.config, clock=h.clock, ownership=Ownership(count, set()),
                                   forwarder=cast(Forwarder, object()))
        assert pods(member.watch.add(True, frozenset({job_id}), from_claim=True)) == []
        member.acquire_partition(1)
        run = RunId(job_id, 0, h.store.get_task_runtime(job_id, 0).run_id)
        h.hosts.finish(str(run), TaskState.FAILED)  # the member restarts the task
        h.settle(60)
        assert h.store.get_task_runtime(job_id, 0).run_id == run.run + 1
        later = member.watch.add(True, frozenset({job_id}), from_claim=True)
        assert pods(later) and set(pods(later)) == {f"{job_id}-0"}
        assert pods(member.watch.add(True, frozenset({job_id}))) == []  # live only: nothing
        member.release_partition(1)
        assert pods(member.watch.add(True, frozenset({job_id}), from_claim=True)) == pods(later)
    finally:
        h.close()
