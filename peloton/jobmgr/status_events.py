"""Applying the host manager's status stream to task runtimes.

Events arrive in order; a batch is grouped by job and each task's events
are applied in arrival order, so a task never sees RUNNING after SUCCEEDED
of the same run.  An event for a run that is not the task's current run is
an orphan: if that run may still be alive it is killed (a late launch of a
run the job manager already replaced must not keep running).  The stream is
acknowledged only after the runtimes are stored, so a crash re-delivers.
"""

from __future__ import annotations

import logging
from collections import defaultdict

from peloton.common.loop import Loop
from peloton.core.errors import InvalidArgument
from peloton.core.model.ids import RunIdParser
from peloton.core.model.task import TaskRuntime
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
    """Consumes the status stream as consumer "jobmgr"."""

    def __init__(self, cache: JobCache, stream: EventStream, hostmgr: HostManagerPort,
                 queue: GoalStateQueue, config: JobManagerConfig) -> None:
        self.cache = cache
        self.stream = stream
        self.hostmgr = hostmgr
        self.queue = queue
        self.config = config
        self._loop = Loop("status-events", lambda: self.process_once(self.config.poll_timeout),
                          log=log)
        #: The last poll returned a full batch: more events are waiting (see `behind`).
        self._full = False
        self._run_ids = RunIdParser()

    def start(self) -> None:
        """Begin consuming in a greenlet."""
        self._loop.start()

    def stop(self) -> None:
        """Stop consuming; unacknowledged events are re-delivered later."""
        self._loop.stop()

    def process_once(self, timeout: float = 0.0) -> int:
        """Apply one batch of events; returns how many were taken."""
        events = self.stream.poll(self.config.event_batch, timeout)
        self._full = len(events) >= self.config.event_batch
        if not events:
            return 0
        self.apply(events)
        self.stream.acknowledge(events[-1].offset)
        return len(events)

    def behind(self) -> bool:
        """Whether events are waiting beyond the batch being applied: launching more runs
        now would only add to them (the placement processor waits; see its docstring)."""
        return self._full

    def apply(self, events: list[HostEvent]) -> None:
        """Apply a batch of events to the cached tasks and storage."""
        by_job: dict[str, dict[int, list[tuple[int, HostEvent]]]] = defaultdict(
            lambda: defaultdict(list))
        orphans: list[str] = []
        for ev in events:
            try:
                rid = self._run_ids.parse(ev.run_id)
            except InvalidArgument:
                log.warning("ignoring event for unparsable run id %r", ev.run_id)
                continue
            if self.cache.get(rid.job_id) is None:
                if not ev.state.terminal:
                    orphans.append(ev.run_id)
                continue
            by_job[rid.job_id][rid.instance].append((rid.run, ev))
        for job_id, per_task in by_job.items():
            self._apply_job(job_id, per_task, orphans)
        if orphans:
            log.info("killing %d orphan runs", len(orphans))
            self.hostmgr.kill(orphans, 0.0)

    def _apply_job(self, job_id: str, per_task: dict[int, list[tuple[int, HostEvent]]],
                   orphans: list[str]) -> None:
        job = self.cache.get(job_id)
        if job is None:
            return
        changes = {}
        steps: dict[int, list[TaskRuntime]] = {}
        daemon = job.spec.type is JobType.DAEMON
        for inst, evs in per_task.items():
            cur = job.get_task(inst)
            if cur is None:
                orphans.extend(ev.run_id for _, ev in evs if not ev.state.terminal)
                continue
            live = [(run, ev) for run, ev in evs if run == cur.run_id]
            orphans.extend(ev.run_id for run, ev in evs
                           if run != cur.run_id and not ev.state.terminal)
            if live:
                pinned = daemon or job.task_spec(inst, cur.config_version).stateful
                steps[inst] = []
                changes[inst] = _chain(live, pinned, steps[inst])
        # Several events of one run applied in one write (STARTING, RUNNING, SUCCEEDED of a
        # short task) still leave one pod event each.
        written = job.write_tasks(changes, passed_through=steps)
        if written and job.update is not None and job.update.state.active:
            self.queue.enqueue_update(job_id)


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
