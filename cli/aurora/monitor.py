"""Waiting on a job's tasks, as Aurora's client does (JobMonitor, InstanceWatcher).

An instance's state is that of its newest task (by first event).  Waits poll
every half second up to a deadline, never forever.  A restarted instance
counts as healthy once a new task of it (not one seen before the restart) has
been RUNNING for `watch_secs`, as a failure if that task leaves RUNNING.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from aurorabridge.thrift_api import api
from cli.aurora.context import AuroraContext
from cli.aurora.options import JobKey

POLL_SECS = 0.5
#: Aurora's JobMonitor gives up when its poll interval reaches 150 s.
KILL_WAIT_SECS = 150.0
RESTART_WAIT_SECS = 300.0
TERMINAL = frozenset(api.TERMINAL_STATES)
LIVE = frozenset(api.LIVE_STATES)


def _first_event(task: Any) -> int:
    events = task.taskEvents or []
    return min((e.timestamp for e in events), default=0)


def states(ctx: AuroraContext, key: JobKey, instances: Iterable[int] | None = None) -> dict[int, int]:
    """Instance -> ScheduleStatus of its newest task."""
    newest: dict[int, tuple[int, int]] = {}
    for task in ctx.query(key, instances=list(instances) if instances else None):
        instance, first = task.assignedTask.instanceId, _first_event(task)
        if instance not in newest or first > newest[instance][0]:
            newest[instance] = (first, task.status)
    return {i: s for i, (_, s) in newest.items()}


def wait_until(ctx: AuroraContext, key: JobKey, predicate: Callable[[int], bool],
               instances: Iterable[int] | None = None, timeout: float | None = None) -> bool:
    """Poll until every instance's state satisfies `predicate`; False when `timeout` passes."""
    wanted = list(instances) if instances is not None else None
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        if all(predicate(s) for s in states(ctx, key, wanted).values()):
            return True
        if deadline is not None and time.monotonic() >= deadline:
            return False
        time.sleep(POLL_SECS)


def terminal(status: int) -> bool:
    """A state the task never leaves."""
    return status in TERMINAL


def running_or_finished(status: int) -> bool:
    """RUNNING or past it."""
    return status in LIVE or status in TERMINAL


def watch_restart(ctx: AuroraContext, key: JobKey, instances: list[int], old_ids: set[str],
                  watch_secs: int, interval: float) -> set[int]:
    """Watch restarted `instances`; the ones that failed (see the module doc)."""
    seen: dict[int, tuple[str, float]] = {}
    done: dict[int, bool] = {}
    deadline = time.monotonic() + watch_secs + RESTART_WAIT_SECS
    while len(done) < len(instances):
        running = {t.assignedTask.instanceId: t for t in
                   ctx.query(key, statuses={api.ScheduleStatus.RUNNING}, instances=instances)
                   if t.assignedTask.taskId not in old_ids}
        now = time.monotonic()
        for instance in instances:
            if instance in done:
                continue
            task = running.get(instance)
            if task is None:
                if instance in seen:
                    done[instance] = False  # its new task left RUNNING
                continue
            task_id = task.assignedTask.taskId
            if instance not in seen:
                seen[instance] = (task_id, now)
            elif seen[instance][0] != task_id:
                done[instance] = False
            elif now - seen[instance][1] >= watch_secs:
                done[instance] = True
        if len(done) == len(instances):
            break
        if now >= deadline:
            for instance in instances:
                done.setdefault(instance, False)
            break
        time.sleep(min(interval, POLL_SECS) if watch_secs == 0 else interval)
    return {i for i, healthy in done.items() if not healthy}
