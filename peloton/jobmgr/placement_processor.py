"""Launching placed tasks: resource manager placements -> LAUNCHED runtimes -> hosts.

Peloton's placement processor.  A placement is acted on only if the task
still wants that run (same run id, goal not a kill, not already past
launch): a task killed or restarted while it was being placed is skipped,
and the run the resource manager placed is forgotten there.  Runtimes are
written LAUNCHED *before* the host is asked to start them, so after a
crash the launch-timeout rule finds them; a host that refuses the launch
turns the run FAILED (a system failure, retried).
"""

from __future__ import annotations

import logging
from collections import defaultdict

from peloton.common.loop import Loop
from peloton.core.model.ids import RunId, TaskId
from peloton.core.model.sched import LaunchSpec, PlacedTask, Placement
from peloton.core.model.task import TaskRuntime, TaskSpec
from peloton.core.states import TaskState
from peloton.jobmgr import runs
from peloton.jobmgr.cache import CachedJob
from peloton.jobmgr.context import JobContext
from peloton.jobmgr.writer import Change

log = logging.getLogger(__name__)
S = TaskState
LAUNCHABLE = frozenset({S.INITIALIZED, S.PENDING, S.READY, S.PLACING, S.PLACED, S.LAUNCHING})


def assign_ports(spec: TaskSpec, picked: tuple[int, ...]) -> tuple[tuple[str, int], ...]:
    """Name -> port for a task: static ports as configured, dynamic ones as placement picked."""
    out = []
    dynamic = iter(picked)
    for port in spec.ports:
        if port.dynamic:
            value = next(dynamic, 0)
            out.append((port.name, value))
        else:
            out.append((port.name, port.value))
    return tuple(out)


class Launcher:
    """Takes placements from the resource manager and launches them."""

    def __init__(self, ctx: JobContext) -> None:
        self.ctx = ctx
        self._loop = Loop("launcher", lambda: self.launch_once(self.ctx.config.poll_timeout),
                          log=log)

    def start(self) -> None:
        """Begin launching in a greenlet."""
        self._loop.start()

    def stop(self) -> None:
        """Stop launching."""
        self._loop.stop()

    def launch_once(self, timeout: float = 0.0) -> int:
        """One round: take placements, write LAUNCHED, hand runs to hosts; returns runs launched."""
        placements = self.ctx.resmgr.get_placements(self.ctx.config.launch_batch, timeout)
        if not placements:
            return 0
        # job -> instance -> (placement, placed task)
        by_job: dict[str, dict[int, tuple[Placement, PlacedTask]]] = defaultdict(dict)
        stale: list[TaskId] = []
        for placement in placements:
            for placed in placement.tasks:
                if self.ctx.cache.get(placed.task_id.job_id) is None:
                    stale.append(placed.task_id)
                    continue
                by_job[placed.task_id.job_id][placed.task_id.instance] = (placement, placed)
        per_host: dict[str, list[LaunchSpec]] = defaultdict(list)
        launched_jobs: dict[str, CachedJob] = {}
        for job_id, items in by_job.items():
            job = self.ctx.cache.get(job_id)
            if job is None:
                continue
            launched = self._write_launched(job, items, stale)
            for inst, rt in launched.items():
                placement, _ = items[inst]
                spec = job.task_spec(inst, rt.config_version)
                per_host[placement.hostname].append(
                    LaunchSpec(run_id=str(RunId(job_id, inst, rt.run_id)), spec=spec,
                               ports=rt.ports))
            if launched:
                launched_jobs[job_id] = job
        if stale:
            self.ctx.resmgr.kill_tasks(stale)
        count = 0
        for hostname, specs in per_host.items():
            failures = self.ctx.hostmgr.launch(hostname, specs)
            count += len(specs) - len(failures)
            if failures:
                self._launch_failed(hostname, [f.run_id for f in failures],
                                    [f.reason for f in failures])
        for job_id in launched_jobs:
            self.ctx.on_tasks_changed(job_id)
        return count

    def _write_launched(self, job: CachedJob, items: dict[int, tuple[Placement, PlacedTask]],
                        stale: list[TaskId]) -> dict[int, TaskRuntime]:
        now = self.ctx.clock()
        changes = {}
        for inst, (placement, placed) in items.items():
            rt = job.get_task(inst)
            if rt is None or rt.goal_state in (S.KILLED, S.DELETED):
                stale.append(placed.task_id)
                continue
            if rt.run_id != placed.run_id or rt.state not in LAUNCHABLE:
                # A newer run replaced this one in the resource manager (or this is a
                # repeated placement): nothing to launch, and nothing of the newer run to kill.
                continue
            ports = assign_ports(job.task_spec(inst, rt.config_version), placed.ports)
            changes[inst] = _launch(placed.run_id, placement, ports, now)
        return self.ctx.writer.apply(job, changes)

    def _launch_failed(self, hostname: str, run_ids: list[str], reasons: list[str]) -> None:
        now = self.ctx.clock()
        dead: list[TaskId] = []
        for run_id, reason in zip(run_ids, reasons, strict=True):
            rid = RunId.parse(run_id)
            job = self.ctx.cache.get(rid.job_id)
            dead.append(rid.task)
            if job is None:
                continue
            msg = f"launch on {hostname} failed: {reason}"
            self.ctx.writer.apply_one(job, rid.instance, _launch_failed(rid.run, now, msg))
            self.ctx.enqueue_task(rid.job_id, rid.instance)
            self.ctx.on_tasks_changed(rid.job_id)
        self.ctx.resmgr.kill_tasks(dead)


def _launch(run: int, placement: Placement, ports: tuple[tuple[str, int], ...],
            now: float) -> Change:
    def change(cur: TaskRuntime) -> TaskRuntime | None:
        if cur.run_id != run or cur.state not in LAUNCHABLE:
            return None
        return runs.launched(cur, placement.hostname, placement.agent_id, ports, now)

    return change


def _launch_failed(run: int, now: float, message: str) -> Change:
    def change(cur: TaskRuntime) -> TaskRuntime | None:
        if cur.run_id != run or cur.state is not S.LAUNCHED:
            return None
        return runs.failed_launch(cur, now, message)

    return change
