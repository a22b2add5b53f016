"""Applying the host manager's status stream to task runtimes.

Events arrive in order; a batch is grouped by job and each task's events
are applied in arrival order, so a task never sees RUNNING after SUCCEEDED
of the same run.  An event for a run that is not the task's current run is
an orphan: if that run may still be alive it is killed (a late launch of a
run the job manager already replaced must not keep running).  The stream is
acknowledged only after the runtimes are stored, so a crash re-delivers.  A
task write that kept losing its compare-and-set (task_writes.py) is not
dropped: that task's events are held and applied again first next round, to
the runtime stored then (the stream's cursor has moved on: a poll never returns
them twice), and the stream is acknowledged only up to the first held event,
so a crash re-delivers them too.  A round that raises (the store unavailable) holds its
whole batch the same way: dropped, a task's end would never be stored.

With all-active job managers, events of jobs another member owns (`owns`, ownership.py)
are skipped, never taken for orphans: their owner applies them from its own stream, and a
member taking a partition over has the host manager re-report its runs (recovery's
reconcile), so none is lost: the host manager streams a reconciled run's next report
again even when it repeats an event it already holds (hostmgr/events.py,
`EventLog.redeliver`), since this member may have skipped that event before it owned the
partition.  Most are skipped by the host manager: each poll names the partitions held
(`asked`, None for a lone job manager), it sends only their jobs' events, and the stream's
position moves past the others, which are acknowledged with the batch.  A partition
taken over while a poll waited may have had its reconcile's re-reports passed over by
that poll, so then the poll is read again, unfiltered (`EventStream.rewind`).  One
released meanwhile still has its events in the batch: `owns` skips them here.

A run's STARTING, alone in its batch, is kept in the cache, not stored
(core/lifecycle/store_later.py, `CachedJob.keep_tasks`): the run's next write stores it
with its pod event, usually the RUNNING that follows in a later batch; one that waited
`store_later_secs` is stored alone (`store_due`, each round), and a partition handed over
or a stop stores what its jobs kept first (`store_kept`).  The stream is acknowledged past
a kept STARTING: a job manager that dies before storing it leaves the run LAUNCHED, and
its successor's reconcile has the host manager report the run again (store_later.py says
what that costs).
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Callable

from peloton.common.loop import Loop
from peloton.core.errors import InvalidArgument
from peloton.core.lifecycle.store_later import may_keep
from peloton.core.model.ids import RunIdParser
from peloton.core.model.task import TaskRuntime
from peloton.core.partitions import PartitionSet
from peloton.core.ports import EventStream, HostEvent, HostManagerPort
from peloton.core.states import JobType, TaskState
from peloton.jobmgr import runs
from peloton.jobmgr.aggregate import TaskChange
from peloton.jobmgr.cache import JobCache
from peloton.jobmgr.config import JobManagerConfig
from peloton.jobmgr.goalstate.queue import GoalStateQueue

log = logging.getLogger(__name__)
S = TaskState


class StatusEvents:
    """Consumes the status stream (as consumer "jobmgr", or "jobmgr@<member id>" for a
    member of an all-active cluster, which reads its partitions' events: `asked` gives
    them, Ownership.asked)."""

    def __init__(self, cache: JobCache, stream: EventStream, hostmgr: HostManagerPort,
                 queue: GoalStateQueue, config: JobManagerConfig,
                 owns: Callable[[str], bool] = lambda _job_id: True,
                 asked: Callable[[], PartitionSet | None] = lambda: None) -> None:
        self.cache = cache
        self.owns = owns
        self.asked = asked
        self.stream = stream
        self.hostmgr = hostmgr
        self.queue = queue
        self.config = config
        self._loop = Loop("status-events", lambda: self.process_once(self.config.poll_timeout),
                          log=log)
        #: The last poll left events waiting beyond what it read (see `behind`).
        self._behind = False
        self._run_ids = RunIdParser()
        #: Events of tasks whose write was not stored, oldest first: applied again next round.
        self._held: list[HostEvent] = []
        #: (monotonic time due, job id) of jobs that kept a STARTING: stored alone then.
        self._due: list[tuple[float, str]] = []

    def start(self) -> None:
        """Begin consuming in a greenlet."""
        self._loop.start()

    def stop(self) -> None:
        """Stop consuming; unacknowledged events are re-delivered later, and what the cache
        kept unstored is stored now (best effort: the successor's reconcile is the rest)."""
        self._loop.stop()
        try:
            self.store_kept()
        except Exception:
            log.warning("could not store the kept STARTING reports on stop; the next owner "
                        "has the host manager report those runs again", exc_info=True)

    def process_once(self, timeout: float = 0.0) -> int:
        """Apply the events held back by a conflict, then one batch from the stream; returns
        how many were stored (or dropped as orphans), not those held back again."""
        # With events waiting (the stream's head beyond what was read), look again without
        # waiting; else wait.  A full batch that drained the stream exactly is not behind:
        # guessing "behind" from a full batch kept the placement processor from launching
        # for a long poll's `timeout` with nothing to catch up on (events come in waves of
        # a launch round's size: 0.2 s idle after 50 of 307 batches, 10 of a run's 61 s).
        self.store_due()
        stream = self.stream
        start = stream.position
        asked = self.asked()
        events = stream.poll(self.config.event_batch, 0.0 if self._behind else timeout, asked)
        if asked is not None and _grew(asked, self.asked()):
            stream.rewind()  # a partition taken over meanwhile (module docstring)
            events = stream.poll(self.config.event_batch, 0.0, None)
        self._behind = stream.head > stream.position
        batch, self._held = self._held + events, []
        if not batch:
            if stream.position > start:  # every event read was another member's
                stream.acknowledge(stream.position)
            return 0
        try:
            self._held = self.apply(batch)
        except Exception:
            # The stream's cursor is past these events already: a round that failed (the
            # store was unavailable) must hold them all, or a task's end is never stored.
            self._held = batch
            raise
        if self._held:
            log.info("holding %d status events of tasks whose write was not stored; "
                     "applied again next round", len(self._held))
        upto = self._held[0].offset - 1 if self._held else max(batch[-1].offset,
                                                                stream.position)
        if upto >= batch[0].offset:
            stream.acknowledge(upto)
        return len(batch) - len(self._held)

    def next_due(self) -> float | None:
        """The monotonic time a kept STARTING is due to be stored alone (None: none kept)."""
        return self._due[0][0] if self._due else None

    def store_due(self) -> int:
        """Store the STARTINGs kept for `store_later_secs` with nothing after them; returns
        the tasks stored.  One not stored (a lost compare-and-set, the store down) stays
        kept and due: it is tried again next round, never dropped."""
        due = self._due
        if not due:
            return 0
        now = self.cache.deps.clock.monotonic()
        jobs: set[str] = set()
        while due and due[0][0] <= now:
            jobs.add(heapq.heappop(due)[1])
        stored = 0
        # Due at `since + store_later_secs`: the tolerance keeps float rounding from
        # leaving out the very entry that came due.
        kept_until = now - self.config.store_later_secs + 1e-6
        for n, job_id in enumerate(jobs):
            job = self.cache.get(job_id)
            if job is None:
                continue  # finished and untracked, or handed over: nothing kept any more
            try:
                outcome = job.store_kept(job.kept(kept_until))
            except Exception:
                for again in list(jobs)[n:]:
                    heapq.heappush(due, (now, again))
                raise
            stored += len(outcome.written)
            if outcome.conflict:
                heapq.heappush(due, (now, job_id))  # still kept (aggregate.py): next round
        return stored

    def store_kept(self, owned: Callable[[str], bool] = lambda _job_id: True) -> int:
        """Store every STARTING kept by the jobs `owned` says (a partition handed over, a
        stop); returns the tasks stored.  Raises TaskWriteConflict for a task it could not
        store (it stays kept)."""
        stored = 0
        for job in self.cache:
            if owned(job.job_id) and job.kept():
                stored += len(job.store_kept().stored())
        return stored

    def behind(self) -> bool:
        """Whether events are waiting beyond the batch being applied (the stream's head is
        beyond what the last poll read): launching more runs now would only add to them
        (the placement processor waits; see its docstring)."""
        return self._behind

    def apply(self, events: list[HostEvent]) -> list[HostEvent]:
        """Apply a batch of events to the cached tasks and storage; returns the events of
        tasks whose change was not stored (oldest first), for the caller to apply again."""
        # Grouped by job first: whether this member owns a job and caches it is asked once
        # per job of the batch, not once per event (a batch is mostly a few big jobs).
        by_job: dict[str, dict[int, list[tuple[int, HostEvent]]]] = {}
        parse = self._run_ids.parse
        for ev in events:
            try:
                rid = parse(ev.run_id)
            except InvalidArgument:
                log.warning("ignoring event for unparsable run id %r", ev.run_id)
                continue
            per_task = by_job.get(rid.job_id)
            if per_task is None:
                per_task = by_job[rid.job_id] = {}
            evs = per_task.get(rid.instance)
            if evs is None:
                per_task[rid.instance] = [(rid.run, ev)]
            else:
                evs.append((rid.run, ev))
        orphans: list[str] = []
        held: list[HostEvent] = []
        for job_id, per_task in by_job.items():
            if not self.owns(job_id):
                continue  # its owner applies it (module docstring)
            if self.cache.get(job_id) is None:
                orphans.extend(ev.run_id for evs in per_task.values() for _, ev in evs
                               if not ev.state.terminal)
                continue
            held.extend(ev for inst in self._apply_job(job_id, per_task, orphans)
                        for _, ev in per_task[inst])
        if orphans:
            log.info("killing %d orphan runs", len(orphans))
            self.hostmgr.kill(orphans, 0.0)
        return sorted(held, key=lambda ev: ev.offset)

    def _apply_job(self, job_id: str, per_task: dict[int, list[tuple[int, HostEvent]]],
                   orphans: list[str]) -> frozenset[int]:
        """Apply one job's events; returns the instances whose change was not stored."""
        job = self.cache.get(job_id)
        if job is None:
            return frozenset()
        changes = {}
        keeps = {}
        steps: dict[int, list[TaskRuntime]] = {}
        daemon = job.spec.type is JobType.DAEMON
        keeping = self.config.store_later_secs > 0
        for inst, evs in per_task.items():
            cur = job.get_task(inst)
            if cur is None:
                orphans.extend(ev.run_id for _, ev in evs if not ev.state.terminal)
                continue
            if len(evs) == 1:
                # The common case (a task's events of one batch are mostly one): no chain,
                # and no steps to record, since a single event passes through nothing.
                run, ev = evs[0]
                if run == cur.run_id:
                    change = _single(run, ev, daemon or job.task_spec(
                        inst, cur.config_version).stateful)
                    if keeping and ev.state is S.STARTING:
                        keeps[inst] = change
                    else:
                        changes[inst] = change
                elif not ev.state.terminal:
                    orphans.append(ev.run_id)
                continue
            live = [(run, ev) for run, ev in evs if run == cur.run_id]
            orphans.extend(ev.run_id for run, ev in evs
                           if run != cur.run_id and not ev.state.terminal)
            if live:
                pinned = daemon or job.task_spec(inst, cur.config_version).stateful
                steps[inst] = []
                changes[inst] = _chain(live, pinned, steps[inst])
        if keeps:
            rest = job.keep_tasks(keeps, may_keep)
            changes.update(rest)
            if len(rest) < len(keeps):
                heapq.heappush(self._due, (self.cache.deps.clock.monotonic() +
                                           self.config.store_later_secs, job_id))
        # Several events of one run applied in one write (STARTING, RUNNING, SUCCEEDED of a
        # short task) still leave one pod event each.
        outcome = job.write_tasks(changes, passed_through=steps or None)
        if outcome.written and job.update is not None and job.update.state.active:
            self.queue.enqueue_update(job_id)
        return outcome.unwritten


def _grew(before: PartitionSet, now: PartitionSet | None) -> bool:
    """`now` holds a partition `before` did not (None: every partition)."""
    return now is None or not now.held <= before.held


def _single(run: int, event: HostEvent, pinned: bool) -> TaskChange:
    """The change applying one event (`_chain` of one, which records no steps)."""

    def change(rt: TaskRuntime) -> TaskRuntime | None:
        return runs.apply_event(rt, run, event, pinned=pinned)

    return change


def _chain(events: list[tuple[int, HostEvent]], pinned: bool,
           steps: list[TaskRuntime]) -> TaskChange:
    """One change applying several events of the same run in order; `steps` receives
    every runtime it passes through (refilled on each call)."""

    def change(rt: TaskRuntime) -> TaskRuntime | None:
        out: TaskRuntime | None = None
        cur = rt
        steps.clear()
        for run, ev in events:
            nxt = runs.apply_event(cur, run, ev, pinned=pinned)
            if nxt is not None:
                cur = out = nxt
                steps.append(nxt)
        return out

    return change
