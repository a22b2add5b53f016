"""The status stream's back-pressure signal (`StatusEvents.behind`) clears once the stream
is drained, without waiting out a long poll.

The placement processor launches nothing while `behind()` is true.  A full batch may be
the last of the stream (events come in waves of a launch round's size), so the poll after
it must not wait: a long poll there kept launching idle for its whole timeout.
"""

from __future__ import annotations

from typing import Any

from peloton.core.ports import HostEvent
from peloton.core.states import TaskState
from peloton.jobmgr.config import JobManagerConfig
from peloton.jobmgr.status_events import StatusEvents


class ScriptedStream:
    """An EventStream that answers polls from a script and records each poll's timeout."""

    def __init__(self, batches: list[list[HostEvent]]) -> None:
        self.batches = batches
        self.timeouts: list[float] = []
        self.acked = 0

    def poll(self, limit: int, timeout: float) -> list[HostEvent]:
        self.timeouts.append(timeout)
        return self.batches.pop(0)[:limit] if self.batches else []

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


def test_after_a_full_batch_the_next_poll_does_not_wait() -> None:
    stream = ScriptedStream([events(1, 3), events(4, 3)])
    ev = consumer(stream, batch=3)
    assert ev.process_once(0.2) == 3
    assert ev.behind()
    assert ev.process_once(0.2) == 3
    assert ev.behind()
    # The stream is drained: the look after the full batch returns at once, empty.
    assert ev.process_once(0.2) == 0
    assert not ev.behind()
    assert stream.timeouts == [0.2, 0.0, 0.0]
    assert stream.acked == 6


def test_after_a_partial_batch_the_poll_waits_as_asked() -> None:
    stream = ScriptedStream([events(1, 2)])
    ev = consumer(stream, batch=3)
    assert ev.process_once(0.2) == 2
    assert not ev.behind()
    assert ev.process_once(0.2) == 0
    assert stream.timeouts == [0.2, 0.2]
