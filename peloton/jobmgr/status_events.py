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
from peloton.core.model.ids import RunId
from peloton.core.model.task import TaskRuntime
from peloton.core.ports import EventStream, HostEvent
from peloton.core.states import JobType, TaskState
from peloton.jobmgr import runs
from peloton.jobmgr.context import JobContext
from peloton.jobmgr.writer import Change, pod_event

log = logging.getLogger(__name__)
S = TaskState


class EventProcessor:
    """Consumes the status stream as consumer "jobmgr"."""

    def __init__(self, ctx: JobContext, stream: EventStream) -> None:
        self.ctx = ctx
        self.stream = stream
        self._loop = Loop("status-events", lambda: self.process_once(self.ctx.config.poll_timeout), log=log)

    def start(self) -> None:
        """Begin consuming in a greenlet."""
        self._loop.start()

    def stop(self) -> None:
        """Stop consuming; unacknowledged events are re-delivered later."""
        self._loop.stop()

    def process_once(self, timeout: float = 0.0) -> int:
        """Apply one batch of events; returns how many were taken."""
        events = self.stream.poll(self.ctx.config.event_batch, timeout)
        if not events:
            return 0
        self.apply(events)
        self.stream.acknowledge(events[-1].offset)
        return len(events)

    def apply(self, events: list[HostEvent]) -> None:
        """Apply a batch of events to the cached tasks and storage."""
        by_job: dict[str, dict[int, list[tuple[int, HostEvent]]]] = defaultdict(
            lambda: defaultdict(list))
        orphans: list[str] = []
        for ev in events:
            try:
                rid = RunId.parse(ev.run_id)
            except InvalidArgument:
                log.warning("ignoring event for unparsable run id %r", ev.run_id)
                continue
            if self.ctx.cache.get(rid.job_id) is None:
                if not ev.state.terminal:
                    orphans.append(ev.run_id)
                continue
            by_job[rid.job_id][rid.instance].append((rid.run, ev))
        for job_id, per_task in by_job.items():
            self._apply_job(job_id, per_task, orphans)
        if orphans:
            log.info("killing %d orphan runs", len(orphans))
            self.ctx.hostmgr.kill(orphans, 0.0)

    def _apply_job(self, job_id: str, per_task: dict[int, list[tuple[int, HostEvent]]],
                   orphans: list[str]) -> None:
        job = self.ctx.cache.get(job_id)
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
        written = self.ctx.writer.apply(job, changes)
        if not written:
            return
        # Several events of one run applied in one write (STARTING, RUNNING, SUCCEEDED of a
        # short task) still leave one pod event each; the writer recorded the last one.
        history = [pod_event(job_id, inst, rt) for inst in written for rt in steps[inst][:-1]]
        if history:
            self.ctx.store.add_pod_events(history)
        service = job.spec.type is not JobType.BATCH
        for inst, rt in written.items():
            restart_due = rt.run_id != rt.desired_run_id
            if rt.state.terminal and (rt.goal_state is not rt.state or service or restart_due):
                self.ctx.enqueue_task(job_id, inst)
            elif rt.state is S.RUNNING and restart_due:
                self.ctx.enqueue_task(job_id, inst)
        if job.update is not None:
            self.ctx.on_update_due(job_id)
        self.ctx.on_tasks_changed(job_id)


def _chain(events: list[tuple[int, HostEvent]], pinned: bool,
           steps: list[TaskRuntime]) -> Change:
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
