"""Priority-FIFO gang queues, four per leaf pool.

A `GangQueue` serves the highest priority first and, within a priority,
the oldest gang first (Peloton's only scheduling policy, PriorityFIFO).
Every operation is O(1) except the first gang of a new priority, which
inserts that priority into a short sorted list.

A queue also counts its gangs by *shape* (`Shape`: need and flags), for admission
to stop a pass early: once every gang left in a queue is of a shape refused in the
pass, walking the rest would only pass each over (admission.py).  Only gangs whose
shape alone answers what a walk would do are counted: one task, still PENDING, need
unchanged since queued.  A gang that loses a task while queued (killed, or moved on
by the resource manager) is dropped from the count (`changed`), so admission walks
to it again and removes what left.  A counted gang points to its `ShapeRun`
(`Gang.run`), and by the invariant above needs no check of its tasks' states.

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

from peloton.core.respool.records import Gang, Shape
from peloton.core.states import TaskState


class QueueKind(StrEnum):
    """The four queues of a leaf pool."""

    PENDING = "pending"
    NON_PREEMPTIBLE = "non-preemptible"
    CONTROLLER = "controller"
    REVOCABLE = "revocable"


#: The order admission visits the queues (Peloton's DequeueGangs).
ADMISSION_ORDER: tuple[QueueKind, ...] = (
    QueueKind.NON_PREEMPTIBLE, QueueKind.CONTROLLER, QueueKind.REVOCABLE, QueueKind.PENDING)


class ShapeRun:
    """The counted gangs of one shape in a queue (see the module docstring).

    `fresh` lists those never refused yet when counted (`refused_since` None then),
    lazily: a gang that left the queue or stopped being counted stays listed until the
    list is next stamped or compacted (`_listed` tells), so leaving costs nothing and
    a queued gang costs a list slot, not a dict entry (a million queued gangs).
    `oldest` is at most the earliest `refused_since` of the others (infinity: none).
    It is not raised when a gang leaves, so it may be earlier than any gang left:
    admission only ever reads it as "no gang here was refused before this".
    """

    __slots__ = ("count", "fresh", "oldest", "queue", "shape")

    def __init__(self, queue: GangQueue, shape: Shape) -> None:
        self.queue = queue
        self.shape = shape
        self.count = 0
        self.fresh: list[Gang] = []
        self.oldest = float("inf")

    def _listed(self, gang: Gang) -> bool:
        return gang.run is self

    def compact(self) -> None:
        """Drop what is listed in `fresh` but no longer counted here (the queue calls it once
        the list is more than twice the count: amortised O(1), the list at least halves).
        A gang may be listed twice (put back unrefused); dict.fromkeys keeps one."""
        self.fresh = list(dict.fromkeys(g for g in self.fresh if self._listed(g)))

    def earliest(self, now: float) -> float:
        """The earliest first refusal among the counted gangs, the fresh ones dated `now`
        unless dated since (a caller may date a queued gang: the forecast's resume)."""
        earliest = self.oldest
        for gang in self.fresh:
            if self._listed(gang):
                since = gang.refused_since
                earliest = min(earliest, now if since is None else since)
        return earliest

    def stamp(self, now: float) -> None:
        """Date every fresh gang's first refusal `now` (unless dated since) and count it
        with the refused ones: what a walk passing each over at `now` would have done."""
        oldest = self.oldest
        for gang in self.fresh:
            if self._listed(gang):
                if gang.refused_since is None:
                    gang.refused_since = now
                oldest = min(oldest, gang.refused_since)
        self.oldest = oldest
        self.fresh = []


class GangQueue:
    """Highest priority first, FIFO within a priority.

    Invariant: `_prios` is the ascending list of priorities that have a
    non-empty deque in `_by_prio`, and `_len` is the number of gangs queued.
    `runs[shape].count` is the number of queued gangs counted under that shape
    (`Gang.run` is their run; None: not counted).
    """

    __slots__ = ("_by_prio", "_len", "_prios", "runs")

    def __init__(self) -> None:
        self._by_prio: dict[int, deque[Gang]] = {}
        self._prios: list[int] = []
        self._len = 0
        self.runs: dict[Shape, ShapeRun] = {}

    def _count(self, gang: Gang) -> None:
        gang.queue = self
        tasks = gang.tasks
        if len(tasks) != 1 or tasks[0].state is not TaskState.PENDING:
            gang.run = None
            return
        shape = (gang.need.units, gang.revocable, gang.preemptible, gang.controller)
        run = self.runs.get(shape)
        if run is None:
            run = self.runs[shape] = ShapeRun(self, shape)
        gang.run = run
        run.count += 1
        since = gang.refused_since
        if since is None:
            fresh = run.fresh
            fresh.append(gang)
            if len(fresh) > 2 * run.count + 64:
                run.compact()
        elif since < run.oldest:
            run.oldest = since

    def changed(self, gang: Gang) -> None:
        """A gang queued here lost a task (killed, or moved on by its caller) or its need
        changed: stop counting it by shape, so admission walks to it again."""
        run = gang.run
        if run is None:
            return
        gang.run = None
        run.count -= 1
        if not run.count:
            del self.runs[run.shape]

    def push(self, gang: Gang) -> None:
        """Append at the tail of the gang's priority."""
        dq = self._by_prio.get(gang.priority)
        if dq is None:
            dq = self._by_prio[gang.priority] = deque()
            bisect.insort(self._prios, gang.priority)
        dq.append(gang)
        self._len += 1
        self._count(gang)

    def push_front(self, gang: Gang) -> None:
        """Put a gang back at the head of its priority (it keeps its turn)."""
        dq = self._by_prio.get(gang.priority)
        if dq is None:
            dq = self._by_prio[gang.priority] = deque()
            bisect.insort(self._prios, gang.priority)
        dq.appendleft(gang)
        self._len += 1
        self._count(gang)

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
        gang.queue = None
        self.changed(gang)
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
