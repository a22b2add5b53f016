"""The status stream's back-pressure signal (`StatusEvents.behind`) says whether events are
waiting, from the stream's head, not guessed from a full batch.

The placement processor launches nothing while `behind()` is true.  A full batch may be
the last of the stream (events come in waves of a launch round's size): guessed from the
batch size, `behind` stayed true and the next poll waited, keeping launching idle for a
long poll's whole timeout.  The host manager answers each poll with its newest offset, so
a batch that drained the stream exactly is not behind, and one that left events is.
"""

from __future__ import annotations

from typing import Any

from peloton.core.partitions import PartitionSet
from peloton.core.ports import HostEvent
from peloton.core.states import TaskState
from peloton.jobmgr.config import JobManagerConfig
from peloton.jobmgr.status_events import StatusEvents


class ScriptedStream:
    """An EventStream over a fixed list of events whose head is set by the test; records
    each poll's timeout."""

    def __init__(self, events: list[HostEvent], head: int | None = None) -> None:
        self.events = events
        self.timeouts: list[float] = []
        self.acked = 0
        self.position = 0
        self.head = head if head is not None else len(events)
        self._from = 0

    def poll(self, limit: int, timeout: float,
             partitions: PartitionSet | None = None) -> list[HostEvent]:
        self.timeouts.append(timeout)
        self._from = self.position
        out = [e for e in self.events if e.offset > self.position][:limit]
        if out:
            self.position = out[-1].offset
        return out

    def rewind(self) -> None:
        self.position = self._from

    def acknowledge(self, offset: int) -> None:
        self.acked = offset


def events(first: int, count: int) -> list[HostEvent]:
    """`count` RUNNING events of a job this member does not own (applied as skipped)."""
    return [HostEvent(first + i, f"other-job-{i}-1", TaskState.RUNNING, "h", "a", 0.0)
            for i in range(count)]


def consumer(stream: ScriptedStream, batch: int) -> StatusEvents:
    # Neither the cache, the host manager nor the queue is reached for events of jobs
    # another member owns.
    unused: Any = None
    return StatusEvents(unused, stream, unused, unused, JobManagerConfig(event_batch=batch),
                        owns=lambda _job_id: False)


def test_events_waiting_beyond_a_batch_are_read_without_waiting() -> None:
    stream = ScriptedStream(events(1, 7))
    ev = consumer(stream, batch=3)
    assert ev.process_once(0.2) == 3
    assert ev.behind()
    assert ev.process_once(0.2) == 3
    assert ev.behind()
    assert ev.process_once(0.2) == 1
    assert not ev.behind()
    assert stream.timeouts == [0.2, 0.0, 0.0]
    assert stream.acked == 7


def test_a_full_batch_that_drained_the_stream_is_not_behind() -> None:
    # Guessed from the batch size, this batch would hold launching for a long poll.
    stream = ScriptedStream(events(1, 6))
    ev = consumer(stream, batch=3)
    assert ev.process_once(0.2) == 3
    assert ev.behind()
    assert ev.process_once(0.2) == 3
    assert not ev.behind()
    assert ev.process_once(0.2) == 0
    assert stream.timeouts == [0.2, 0.0, 0.2]
    assert stream.acked == 6


def test_a_partial_batch_with_events_beyond_it_is_behind() -> None:
    # Fewer events than the batch came back (another member's were passed over), yet the
    # head is beyond them: more are waiting.
    stream = ScriptedStream(events(1, 2), head=10)
    ev = consumer(stream, batch=3)
    assert ev.process_once(0.2) == 2
    assert ev.behind()
