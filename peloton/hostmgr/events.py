"""The ordered, acknowledged status stream (Peloton's pkg/common/eventstream).

Every status update a backend reports is appended once, with the next offset (1, 2, ...),
to a buffer shared by all consumers.  Each consumer reads from its own cursor and
acknowledges an offset when everything up to it is processed and persisted.  The buffer
is trimmed up to the *lowest* offset acknowledged by any consumer, and only trimmed
updates are acknowledged to the backend, so an update every consumer has not persisted
is re-delivered after a crash (at least once, in order).

- Consumers named in the config count from the start, before they subscribe, so nothing
  is acknowledged that they never saw.  With no consumer at all nothing is trimmed.
- Dedupe: an update whose uuid is still buffered is dropped; one whose uuid was trimmed
  recently is acknowledged to the backend again (it missed our first acknowledgement).
  Except the next report of a run an explicit reconcile named (`redeliver`): it is
  streamed again.  A host re-reports a run with its latest update's uuid, and a member
  job manager that takes a partition over may have read that update (and skipped it: it
  did not own the run yet) while the dead or paused previous owner never applied it, so
  dropping the re-report would lose the run's state for good.  Only a report of the
  run's newest state is streamed so: one older than an update of the run still buffered,
  or a non-terminal one of a run whose end was trimmed, is a duplicate as ever and leaves
  the run named.  A paused owner that never acknowledged a run's RUNNING keeps it
  buffered and its host resending it; streamed in place of the run's end, it would take
  the end's turn, the end would stay a duplicate, and the new owner would never learn it.
- A run's end outlives the backend's memory of it: the last terminal update of each of
  the `RECENT_ENDED` runs trimmed most recently is kept, and a LOST report of such a run
  from no host (hostname empty: the backend no longer knows it, because its end was
  acknowledged) is acknowledged and answered by streaming that terminal update again.
  A job manager member that skipped the end (its partition was between owners: the
  leaving owner had let go, the next had not taken it yet) reconciles the run on taking
  the partition over, and must learn how it ended, not that it was lost.  Run ids are
  never reused, so such a LOST is always stale.
- Full buffer: an update is refused outright (not buffered, not applied, not
  acknowledged), so the backend re-delivers it once consumers catch up.  That is
  back-pressure, as in Peloton, where a full buffer means no ACK and Mesos resends.
- Reads index a list by offset (O(batch), never O(buffer)); a read of some partitions
  looks at no more than `SCAN_LIMIT` events (each event's job id is cut from its run id
  once, when it is appended, and each job's partition is computed once); trimming is
  amortised O(1).
- Member consumers: a consumer named `<group>@<member>` is one member of a group, e.g.
  each job manager of an all-active cluster (`jobmgr@<member id>`,
  docs/design/all-active-jobmgr.md), which acts on its own partitions' events and
  acknowledges all.  A member names the partitions it holds when it
  reads (`read(..., partitions)`), and is given only the events of those partitions'
  jobs; the others are passed over, its read position moving past them, so it
  acknowledges them unread and trimming goes on.  Nothing passed over is needed later: a
  member that takes a partition over reconciles its runs, and the host streams their
  state again (`redeliver`), after the member's read position.  A configured name is
  then the group's placeholder: it holds trimming back only until the group's first
  member registers (so nothing is acknowledged before some member of the group has
  it), and comes back, at the last member's offset, when the group's last member is
  gone.  Members come and go with
  the cluster, so a member not heard from (register, poll, acknowledge) for
  `member_idle` seconds is forgotten instead of holding trimming back for ever; it
  should exceed the members' ZooKeeper session (a member silent longer has lost its
  partitions anyway, and its successor recovers and reconciles them).
"""

from __future__ import annotations

import enum
import logging
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Sequence

import gevent.event

from peloton.core.model.evolve import constructor
from peloton.core.partitions import PartitionSet, partition_of
from peloton.core.ports import MEMBER_SEP, EventScan, HostEvent
from peloton.core.states import TaskState
from peloton.hostmgr.backends.base import StatusUpdate

log = logging.getLogger(__name__)

#: How many trimmed uuids are remembered to recognise late re-deliveries.
RECENT_UUIDS = 16384
#: How many ended runs' last terminal update is kept after trimming (module docstring).
RECENT_ENDED = 16384
#: Seconds a member consumer may stay silent before it is forgotten.
MEMBER_IDLE = 60.0
#: Seconds an explicit reconcile waits for a run's re-report to stream it again.
REDELIVER_SECONDS = 60.0
#: Events one read of some partitions looks at, at most (it returns what it has then, and
#: the next read goes on from there): the lock is never held long for a sparse partition.
SCAN_LIMIT = 20_000
#: Job ids whose partition is remembered (emptied when full; a job's events come close
#: together, so recent jobs are what is asked about).
PARTITION_CACHE = 65_536


class Offered(enum.Enum):
    """What `EventLog.offer` did with an update."""

    ADDED = "added"
    DUPLICATE = "duplicate"
    REACKED = "reacked"
    FULL = "full"
    #: A repeated update streamed again, as a reconcile asked (`EventLog.redeliver`).
    REDELIVERED = "redelivered"


#: HostEvent's fields set without the frozen `__init__`'s machinery (core/model/evolve.py):
#: every status update of every run becomes one of these.
_new_event = constructor(HostEvent)


def job_of(run_id: str) -> str:
    """The job id part of a run id (`<job id>-<instance>-<run>`)."""
    return run_id.rsplit("-", 2)[0]


def to_event(offset: int, update: StatusUpdate) -> HostEvent:
    """The stream's view of a backend update."""
    return _new_event(offset=offset, run_id=update.run_id, state=update.state,
                      hostname=update.hostname, agent_id=update.agent_id,
                      timestamp=update.timestamp, message=update.message, reason=update.reason,
                      exit_code=update.exit_code,
                      healthy=update.healthy.value if update.healthy is not None else "")


class EventLog:
    """The buffer, the consumers' acknowledged offsets, and trimming; see the module docstring."""

    def __init__(self, capacity: int, consumers: Sequence[str],
                 on_trim: Callable[[list[StatusUpdate]], None], *,
                 member_idle: float = MEMBER_IDLE,
                 now: Callable[[], float] = time.monotonic) -> None:
        self.capacity = capacity
        self.member_idle = member_idle
        self._now = now
        #: Changes whenever the host manager restarts; remote consumers re-subscribe on a change.
        self.stream_id = str(uuid.uuid4())
        self._on_trim = on_trim
        self._lock = threading.Lock()  # short critical sections only; never held across a wait
        #: (event, update, the event's job id), oldest first from `_start`.
        self._items: list[tuple[HostEvent, StatusUpdate, str]] = []
        self._start = 0  # index in _items of the oldest buffered event
        self._first = 1  # offset of that event
        self._next = 1  # offset of the next event
        self._buffered: dict[str, int] = {}
        self._recent: OrderedDict[str, None] = OrderedDict()
        #: Run id -> its terminal update, for runs trimmed recently (module docstring).
        self._ended: OrderedDict[str, StatusUpdate] = OrderedDict()
        #: Run id -> until when its next report is streamed even if repeated (`redeliver`).
        self._redeliver: OrderedDict[str, float] = OrderedDict()
        #: Run id -> offset of its newest buffered update (which repeat is the run's state).
        self._newest: dict[str, int] = {}
        self._acked: dict[str, int] = dict.fromkeys(consumers, 0)
        #: Configured names standing for a group no member of which has registered.
        self._placeholders: set[str] = set(consumers)
        #: Member consumer -> when it was last heard from.
        self._seen: dict[str, float] = {}
        self._signal = gevent.event.Event()
        self._waiting = 0
        #: Job id -> its partition of `_partition_count` (see `_select_locked`).
        self._partitions: dict[str, int] = {}
        self._partition_count = 0

    def __len__(self) -> int:
        return self._next - self._first

    @property
    def head(self) -> int:
        """Offset of the newest event (0 before the first)."""
        return self._next - 1

    def acknowledged(self) -> dict[str, int]:
        """Each consumer's acknowledged offset."""
        with self._lock:
            return dict(self._acked)

    # -- producing -------------------------------------------------------------------------
    def offer(self, update: StatusUpdate) -> Offered:
        """Append an update unless it is a duplicate or the buffer is full."""
        return self.offer_many((update,))[0]

    def offer_many(self, updates: Sequence[StatusUpdate]) -> list[Offered]:
        """`offer` each update in order, under one hold of the lock (a simulated host's
        wave of thousands, an agent's report); what was done with each."""
        verdicts: list[Offered] = []
        acked: list[StatusUpdate] = []  # to acknowledge to the backend (module docstring)
        signal = None
        try:
            with self._lock:
                for update in updates:
                    verdicts.append(self._offer_locked(update, acked))
                if self._waiting and any(v is Offered.ADDED or v is Offered.REDELIVERED
                                         for v in verdicts):
                    signal, self._signal = self._signal, gevent.event.Event()
        finally:
            if acked:
                self._on_trim(acked)
        if signal is not None:
            signal.set()
        return verdicts

    def _offer_locked(self, update: StatusUpdate, acked: list[StatusUpdate]) -> Offered:
        """One update of `offer_many`; what the backend is to be acknowledged goes to `acked`."""
        ended = (self._ended.get(update.run_id)
                 if update.state is TaskState.LOST and not update.hostname else None)
        stale: StatusUpdate | None = None
        if ended is not None:  # the backend forgot an ended run: say how it ended
            stale, update = update, ended
            if ended.uuid in self._buffered:  # already streamed again, unread yet
                acked.append(stale)  # acknowledged: the backend stops re-reporting it
                return Offered.DUPLICATE
        until = self._redeliver.get(update.run_id) if self._redeliver else None
        buffered = update.uuid in self._buffered
        repeated = buffered or update.uuid in self._recent
        again = stale is not None or (until is not None and until >= self._now()
                                      and not (repeated and self._outdated_locked(update)))
        if buffered and not again:
            return Offered.DUPLICATE
        if repeated and not buffered and not again:
            acked.append(update)
            return Offered.REACKED
        if self._next - self._first >= self.capacity:
            acked.extend(self._expire_locked())  # a member gone silent may hold it back
        if self._next - self._first >= self.capacity:
            return Offered.FULL  # not acknowledged: the backend reports it again
        offset = self._next
        self._next += 1
        if until is not None:
            del self._redeliver[update.run_id]  # its state is streamed now
        self._items.append((to_event(offset, update), update, job_of(update.run_id)))
        self._newest[update.run_id] = offset
        if update.uuid:
            self._buffered[update.uuid] = offset
        if stale is not None:
            acked.append(stale)
        return Offered.REDELIVERED if repeated else Offered.ADDED

    def _outdated_locked(self, update: StatusUpdate) -> bool:
        """A repeated `update` is older than what the log holds of its run: a later update
        of the run is buffered, or the run's end was trimmed (module docstring)."""
        newest = self._newest.get(update.run_id)
        if newest is not None:
            return newest != self._buffered.get(update.uuid)
        return not update.state.terminal and update.run_id in self._ended

    def redeliver(self, run_ids: Sequence[str]) -> None:
        """Stream the next report of each of `run_ids` (within `REDELIVER_SECONDS`) even if
        it repeats an update streamed already: what an explicit reconcile asks for (module
        docstring).  Consumers see that update twice; they are idempotent per event."""
        with self._lock:
            now = self._now()
            for run_id in run_ids:
                self._redeliver.pop(run_id, None)
                self._redeliver[run_id] = now + REDELIVER_SECONDS
            while self._redeliver and next(iter(self._redeliver.values())) < now:
                self._redeliver.popitem(last=False)  # never re-reported (a LOST run)

    # -- consuming -------------------------------------------------------------------------
    def register(self, consumer: str) -> int:
        """Make `consumer` known (it then holds trimming back); returns its acknowledged offset.

        A consumer new to this stream starts just before the oldest buffered event.  A
        member consumer (`<group>@<member>`) is also kept alive by this: remote consumers
        register on every poll.
        """
        trimmed: list[StatusUpdate] = []
        with self._lock:
            group, sep, _ = consumer.partition(MEMBER_SEP)
            if sep:
                self._seen[consumer] = self._now()
                if group in self._placeholders:  # a member stands for its group from now on
                    offset = self._acked.pop(group, self._first - 1)
                    self._placeholders.discard(group)
                    self._acked.setdefault(consumer, offset)
                    trimmed = self._trim_locked()
            else:
                self._placeholders.discard(consumer)
            offset = self._acked.setdefault(consumer, self._first - 1)
        if trimmed:
            self._on_trim(trimmed)
        return offset

    def forget(self, consumer: str) -> None:
        """Stop waiting for a consumer that is gone for good (an operator action)."""
        with self._lock:
            self._acked.pop(consumer, None)
            self._seen.pop(consumer, None)
            self._placeholders.discard(consumer)
            trimmed = self._trim_locked()
        if trimmed:
            self._on_trim(trimmed)

    def read(self, after: int, limit: int, timeout: float,
             partitions: PartitionSet | None = None) -> EventScan:
        """Up to `limit` events with offsets above `after`, oldest first, of jobs in
        `partitions` only (None: every event; the others are passed over, see the module
        docstring); waits up to `timeout` for one."""
        if partitions is not None and len(partitions.held) >= partitions.count:
            partitions = None  # every partition: nothing to pass over
        deadline = time.monotonic() + max(0.0, timeout)
        position = after
        while True:
            with self._lock:
                head = self._next - 1
                start = max(position + 1, self._first)
                if start <= head:
                    i = self._start + (start - self._first)
                    if partitions is None:
                        items = self._items[i:i + max(0, limit)]
                        events = [item[0] for item in items]
                        return EventScan(events, events[-1].offset if events else position, head)
                    events, position = self._select_locked(i, limit, partitions)
                    # Passed over all there was: wait for more, unless told not to.
                    if events or position < head or timeout <= 0:
                        return EventScan(events, position, head)
                elif timeout <= 0:
                    return EventScan([], position, head)
                signal = self._signal
                self._waiting += 1
            try:
                remaining = deadline - time.monotonic()
                if remaining > 0:
                    signal.wait(remaining)
            finally:
                with self._lock:
                    self._waiting -= 1
            if time.monotonic() >= deadline:
                timeout = 0.0  # one last look, then give up

    def _select_locked(self, i: int, limit: int,
                       partitions: PartitionSet) -> tuple[list[HostEvent], int]:
        """From index `i` on, up to `limit` events of `partitions`' jobs, looking at no more
        than `SCAN_LIMIT`; returns them and the offset of the last event looked at."""
        held, count = partitions.held, partitions.count
        cache = self._partitions
        if count != self._partition_count:
            cache.clear()
            self._partition_count = count
        items = self._items
        end = min(len(items), i + SCAN_LIMIT)
        out: list[HostEvent] = []
        j = i
        while j < end and len(out) < limit:
            event, _, job = items[j]
            j += 1
            partition = cache.get(job)
            if partition is None:
                if len(cache) >= PARTITION_CACHE:
                    cache.clear()
                partition = cache[job] = partition_of(job, count)
            if partition in held:
                out.append(event)
        return out, items[j - 1][0].offset if j > i else items[i][0].offset - 1

    def acknowledge(self, consumer: str, offset: int) -> None:
        """`consumer` processed everything up to `offset`; trim what every consumer has."""
        with self._lock:
            if consumer in self._seen:
                self._seen[consumer] = self._now()
            expired = self._expire_locked()
            offset = min(offset, self._next - 1)
            if offset <= self._acked.get(consumer, self._first - 1):
                self._acked.setdefault(consumer, self._first - 1)
                trimmed = expired
            else:
                self._acked[consumer] = offset
                trimmed = expired + self._trim_locked()
        if trimmed:
            self._on_trim(trimmed)

    def _expire_locked(self) -> list[StatusUpdate]:
        """Forget member consumers silent for longer than `member_idle`; returns what that
        let be trimmed.  The last member of a group leaves its placeholder behind, at its
        offset, so the group's next member still sees what it had not acknowledged."""
        now = self._now()
        gone = [c for c, seen in self._seen.items() if now - seen > self.member_idle]
        if not gone:
            return []
        for consumer in gone:
            del self._seen[consumer]
            offset = self._acked.pop(consumer, self._first - 1)
            group = consumer.partition(MEMBER_SEP)[0]
            if not any(c.partition(MEMBER_SEP)[0] == group for c in self._seen):
                self._placeholders.add(group)
                self._acked[group] = min(offset, self._acked.get(group, offset))
            log.warning("status stream: consumer %s silent for over %.0fs; no longer "
                        "waiting for it", consumer, self.member_idle)
        return self._trim_locked()

    def _trim_locked(self) -> list[StatusUpdate]:
        if not self._acked:
            return []
        floor = min(self._acked.values())
        count = floor - self._first + 1
        if count <= 0:
            return []
        end = self._start + count
        trimmed = [item[1] for item in self._items[self._start:end]]
        newest = self._newest
        for offset, update in enumerate(trimmed, self._first):
            if newest.get(update.run_id) == offset:  # nothing of the run is buffered now
                del newest[update.run_id]
            if update.uuid:
                self._buffered.pop(update.uuid, None)
                self._recent[update.uuid] = None
            if update.state.terminal:
                self._ended.pop(update.run_id, None)
                self._ended[update.run_id] = update
        self._start = end
        self._first += count
        while len(self._recent) > RECENT_UUIDS:
            self._recent.popitem(last=False)
        while len(self._ended) > RECENT_ENDED:
            self._ended.popitem(last=False)
        if self._start > 1024 and self._start * 2 > len(self._items):
            del self._items[:self._start]  # amortised: each item is moved at most once more
            self._start = 0
        return trimmed


class ConsumerStream:
    """One consumer's `EventStream`: a read cursor over the shared log.

    `poll` continues after the last event this object returned or passed over (so a
    consumer may poll again before acknowledging); a new `subscribe` with the same name
    starts after the consumer's acknowledged offset, which is how unacknowledged events
    are re-delivered.
    """

    def __init__(self, log: EventLog, consumer: str) -> None:
        self.consumer = consumer
        self._log = log
        self._cursor = log.register(consumer)
        self._from = self._cursor
        self._head = self._cursor

    @property
    def stream_id(self) -> str:
        """Identity of the host manager's stream (changes when it restarts)."""
        return self._log.stream_id

    @property
    def position(self) -> int:
        """The offset of the last event the last poll returned or passed over."""
        return self._cursor

    @property
    def head(self) -> int:
        """The newest offset when the last poll answered."""
        return self._head

    def poll(self, limit: int, timeout: float,
             partitions: PartitionSet | None = None) -> list[HostEvent]:
        """Events after `position`, oldest first, of jobs in `partitions` only (None: all);
        waits up to `timeout` seconds."""
        if MEMBER_SEP in self.consumer:
            self._log.register(self.consumer)  # a member not heard from is forgotten
        self._from = self._cursor
        scan = self._log.read(self._cursor, limit, timeout, partitions)
        self._cursor, self._head = scan.position, scan.head
        return scan.events

    def rewind(self) -> None:
        """The next poll reads again what the last one read (returned or passed over)."""
        self._cursor = self._from

    def acknowledge(self, offset: int) -> None:
        """Everything up to and including `offset` is processed and persisted."""
        self._log.acknowledge(self.consumer, offset)
