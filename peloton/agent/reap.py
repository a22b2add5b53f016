"""Stopping every task under a work dir whose agent has stopped (what `peloton up` does on exit).

An agent's `stop()` leaves its tasks running so that the next agent on the
same work dir adopts them.  `peloton up` stops its tasks on exit unless told
`--keep-tasks`; it does so here, after every daemon has stopped (so nothing
restarts them meanwhile), through the sandbox protocol of supervisor.c:
write the grace period into the sandbox's `kill` file and SIGTERM the
supervisor holding the sandbox's lock, which stops the task's process group
(SIGKILL after the grace) and records how it ended.  Whatever still holds a
sandbox lock after the grace and `wait_secs` more is SIGKILLed, task group
and supervisor.  The next `peloton up` reports those runs as KILLED, and
the job manager restarts the ones whose goal is to run.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

from peloton.agent.sandbox import Sandboxes

log = logging.getLogger(__name__)


def live_runs(work_dir: Path) -> list[str]:
    """Runs under `work_dir` whose supervisor is alive (holds its sandbox lock)."""
    if not (work_dir / "sandboxes").is_dir():
        return []
    boxes = Sandboxes(work_dir)
    return sorted(r for r in boxes.run_ids() if boxes.supervisor_alive(r))


def stop_runs(work_dir: Path, grace_secs: float = 5.0, wait_secs: float = 5.0, *,
              sleep: Callable[[float], None] = time.sleep,
              clock: Callable[[], float] = time.monotonic) -> list[str]:
    """Stop every live run under `work_dir` (no agent may be using it); returns their ids."""
    live = live_runs(work_dir)
    if not live:
        return []
    boxes = Sandboxes(work_dir)
    for run_id in live:
        boxes.request_kill(run_id, grace_secs)
        record = boxes.running_record(run_id)
        if record is not None:
            _signal(record.supervisor_pid, signal.SIGTERM)
        # No run.json yet: the supervisor finds the kill file before it starts the task.
    deadline = clock() + grace_secs + wait_secs
    left = live
    while left and clock() < deadline:
        sleep(0.1)
        left = [r for r in left if boxes.supervisor_alive(r)]
    for run_id in left:
        record = boxes.running_record(run_id)
        if record is not None:
            log.warning("run %s did not stop in time; killing it", run_id)
            _signal(-record.pid, signal.SIGKILL)
            _signal(record.supervisor_pid, signal.SIGKILL)
    return live


def _signal(pid: int, sig: int) -> None:
    if pid in (0, -1, os.getpid()):
        return
    try:
        if pid < 0:
            os.killpg(-pid, sig)
        else:
            os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
