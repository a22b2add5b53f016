"""A job manager member reads only its partitions' status events (status_events.py).

Each poll names the partitions held at that moment (`Ownership.asked`): none for a lone job
manager, so it reads every event as before partitions; and the set follows
`acquire_partition` / `release_partition`.  A partition taken over while a poll waited
may have had events passed over by that poll (the takeover's reconcile re-reports come
just then), so that poll is read again, unfiltered.
"""

from __future__ import annotations

from typing import Any, cast

from peloton.core.partitions import PartitionSet
from peloton.core.ports import HostEvent, HostManagerPort
from peloton.core.states import TaskState
from peloton.jobmgr.app import JobManager
from peloton.jobmgr.config import JobManagerConfig
from peloton.jobmgr.ownership import Ownership
from peloton.jobmgr.status_events import StatusEvents
from peloton.storage.partition_fences import PartitionFences
from tests.fakes.hostmgr import FakeHostManager, FakeStream
from tests.harness.partition_ids import job_in
from tests.unit.jobmgr.harness import Harness

S = TaskState
COUNT = 4


def asked(jm: JobManager) -> PartitionSet | None:
    """The partitions `jm`'s last status poll named."""
    stream = cast(FakeStream, jm.events.stream)
    return stream.asked[-1]


def test_a_lone_job_manager_names_no_partition(h: Harness) -> None:
    h.jm.events.process_once(0.0)
    assert asked(h.jm) is None


def test_a_member_names_the_partitions_it_holds_as_they_change(h: Harness) -> None:
    member = JobManager(h.store, h.rm, cast(HostManagerPort, h.hosts), h.config,
                        clock=h.clock, fences=PartitionFences(h.store, "a", count=COUNT),
                        member="a")
    member.events.process_once(0.0)
    assert asked(member) == PartitionSet(COUNT, frozenset())  # holds none yet: reads none
    member.acquire_partition(0, epoch=10)
    member.acquire_partition(2, epoch=10)
    member.events.process_once(0.0)
    assert asked(member) == PartitionSet(COUNT, frozenset({0, 2}))
    member.release_partition(0)
    member.events.process_once(0.0)
    assert asked(member) == PartitionSet(COUNT, frozenset({2}))


class NoJobs:
    """A job cache with no job loaded: every owned event is an orphan's (killed)."""

    def get(self, job_id: str) -> None:
        return None


class TakeOverDuringPoll:
    """A stream whose next poll, before reading, lets a partition be taken over and the
    takeover's reconcile re-report one of its runs (what happens while a long poll waits)."""

    def __init__(self, stream: FakeStream, take_over: Any) -> None:
        self.stream = stream
        self.take_over = take_over

    @property
    def position(self) -> int:
        return self.stream.position

    @property
    def head(self) -> int:
        return self.stream.head

    def poll(self, limit: int, timeout: float,
             partitions: PartitionSet | None = None) -> list[HostEvent]:
        take_over, self.take_over = self.take_over, None
        if take_over is not None:
            take_over()
        return self.stream.poll(limit, timeout, partitions)

    def rewind(self) -> None:
        self.stream.rewind()

    def acknowledge(self, offset: int) -> None:
        self.stream.acknowledge(offset)


def test_a_partition_taken_over_during_a_poll_has_its_events_read_again() -> None:
    hosts = FakeHostManager()
    ownership = Ownership(COUNT, {0})
    theirs = f"{job_in(1, COUNT)}-0-1"

    def take_over() -> None:
        ownership.acquire(1)
        hosts.emit(theirs, S.RUNNING, "h")  # the reconcile's re-report

    stream = TakeOverDuringPoll(hosts.subscribe("jobmgr@a"), take_over)
    events = StatusEvents(cast(Any, NoJobs()), stream, cast(HostManagerPort, hosts),
                          cast(Any, None), JobManagerConfig(), owns=ownership.owns,
                          asked=ownership.asked)
    events.process_once(0.0)
    # Read (here: an orphan of a job it now owns, so killed), not passed over unread.
    assert hosts.killed == [theirs]
    assert stream.stream.asked == [PartitionSet(COUNT, frozenset({0})), None]
    assert hosts.acked == {"jobmgr@a": 1}


def test_events_of_other_partitions_are_acknowledged_unread() -> None:
    hosts = FakeHostManager()
    ownership = Ownership(COUNT, {0})
    for i in range(3):
        hosts.emit(f"{job_in(1, COUNT)}-{i}-1", S.RUNNING, "h")
    events = StatusEvents(cast(Any, NoJobs()), hosts.subscribe("jobmgr@a"),
                          cast(HostManagerPort, hosts), cast(Any, None), JobManagerConfig(),
                          owns=ownership.owns, asked=ownership.asked)
    assert events.process_once(0.0) == 0
    assert hosts.killed == [] and hosts.acked == {"jobmgr@a": 3}
    assert not events.behind()
