"""Priority-FIFO gang queues, four per leaf pool.

A `GangQueue` serves the highest priority first and, within a priority,
the oldest gang first (Peloton's only scheduling policy, PriorityFIFO).
Every operation is O(1) except the first gang of a new priority, which
inserts that priority into a short sorted list.

A leaf pool has four queues (`LeafQueues`).  New gangs go to PENDING;
admission moves a pending gang it cannot admit to the queue of its class
(non-preemptible, controller or revocable) so one blocked class does not
hold up the others, scans the queues in `ADMISSION_ORDER`, and backfills
past gangs it refuses (admission.py).
"""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Iterator
from enum import StrEnum

from peloton.core.respool.records import Gang


class QueueKind(StrEnum):
    """The four queues of a leaf pool."""

    PENDING = "pending"
    NON_PREEMPTIBLE = "non-preemptible"
    CONTROLLER = "controller"
    REVOCABLE = "revocable"


#: The order admission visits the queues (Peloton's DequeueGangs).
ADMISSION_ORDER: tuple[QueueKind, ...] = (
    QueueKind.NON_PREEMPTIBLE, QueueKind.CONTROLLER, QueueKind.REVOCABLE, QueueKind.PENDING)


class GangQueue:
    """Highest priority first, FIFO within a priority.

    Invariant: `_prios` is the ascending list of priorities that have a
    non-empty deque in `_by_prio`, and `_len` is the number of gangs queued.
    """

    __slots__ = ("_by_prio", "_len", "_prios")

    def __init__(self) -> None:
        self._by_prio: dict[int, deque[Gang]] = {}
        self._prios: list[int] = []
        self._len = 0

    def push(self, gang: Gang) -> None:
        """Append at the tail of the gang's priority."""
        dq = self._by_prio.get(gang.priority)
        if dq is None:
            dq = self._by_prio[gang.priority] = deque()
            bisect.insort(self._prios, gang.priority)
        dq.append(gang)
        self._len += 1

    def push_front(self, gang: Gang) -> None:
        """Put a gang back at the head of its priority (it keeps its turn)."""
        dq = self._by_prio.get(gang.priority)
        if dq is None:
            dq = self._by_prio[gang.priority] = deque()
            bisect.insort(self._prios, gang.priority)
        dq.appendleft(gang)
        self._len += 1

    def peek(self) -> Gang | None:
        """The gang that would be popped next, or None when empty."""
        if not self._prios:
            return None
        return self._by_prio[self._prios[-1]][0]

    def pop(self) -> Gang:
        """Remove and return the head gang (IndexError when empty)."""
        prio = self._prios[-1]
        dq = self._by_prio[prio]
        gang = dq.popleft()
        if not dq:
            del self._by_prio[prio]
            self._prios.pop()
        self._len -= 1
        return gang

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[Gang]:
        """Gangs in service order (highest priority first, FIFO within)."""
        for prio in reversed(self._prios):
            yield from self._by_prio[prio]


class LeafQueues:
    """The four queues of one leaf pool, and the gang of each that holds a reservation.

    `reserved[kind]` is a gang queued in `queues[kind]` that admission keeps room
    for (backfill's starvation protection, admission.py); it is set and cleared
    only by admission.
    """

    __slots__ = ("queues", "reserved")

    def __init__(self) -> None:
        self.queues: dict[QueueKind, GangQueue] = {k: GangQueue() for k in QueueKind}
        self.reserved: dict[QueueKind, Gang] = {}

    def __getitem__(self, kind: QueueKind) -> GangQueue:
        return self.queues[kind]

    def __len__(self) -> int:
        return sum(len(q) for q in self.queues.values())

    def gangs(self) -> Iterator[tuple[QueueKind, Gang]]:
        """Every queued gang with its queue, in admission order."""
        for kind in ADMISSION_ORDER:
            for gang in self.queues[kind]:
                yield kind, gang
