"""From a supervisor record to the state and words a user sees.

Reasons follow Mesos' TaskStatus.Reason names, which Peloton's job
manager already understands (e.g. REASON_CONTAINER_LIMITATION_MEMORY).
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass

from peloton.agent.isolation import MemoryIsolation, enforced_memory_mb
from peloton.agent.model import RunSpec
from peloton.agent.sandbox import SupervisorRecord
from peloton.core.states import TaskState

REASON_FAILED = "REASON_COMMAND_EXECUTOR_FAILED"
REASON_MEMORY = "REASON_CONTAINER_LIMITATION_MEMORY"
REASON_LAUNCH_FAILED = "REASON_CONTAINER_LAUNCH_FAILED"
REASON_KILLED = "REASON_TASK_KILLED"
REASON_LOST = "REASON_EXECUTOR_TERMINATED"
REASON_HEALTH = "REASON_TASK_HEALTH_CHECK_STATUS_UPDATED"
REASON_RECONCILIATION = "REASON_RECONCILIATION"


@dataclass(frozen=True, slots=True)
class Outcome:
    """A run's state with its message, reason and exit code."""

    state: TaskState
    message: str
    reason: str = ""
    exit_code: int | None = None


def signal_name(number: int) -> str:
    """SIGKILL for 9; the number itself when Python has no name for it."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def running(record: SupervisorRecord, spec: RunSpec | None, isolation: MemoryIsolation) -> Outcome:
    """The task's program is running."""
    limit = isolation.describe(enforced_memory_mb(spec.mem_mb) if spec else 0.0)
    return Outcome(TaskState.RUNNING, f"running as pid {record.pid} ({limit})")


def ended(record: SupervisorRecord, spec: RunSpec | None, isolation: MemoryIsolation) -> Outcome:
    """How a run ended, from its exit (or failure) record."""
    if record.state == "failed":
        what = spec.argv()[0] if spec else "the task"
        err = os.strerror(record.errno) if record.errno else "unknown error"
        step = {"exec": f"cannot execute {what!r}", "cgroup": "cannot set up the memory cgroup",
                "rlimit": "cannot set resource limits", "sandbox": "cannot prepare the sandbox",
                "user": "cannot switch to the task's user", "fork": "cannot fork"}.get(
                    record.stage, f"{record.stage} failed")
        return Outcome(TaskState.FAILED, f"{step}: {err}", REASON_LAUNCH_FAILED)
    code = record.code if record.code >= 0 else None
    if record.orphaned:
        return Outcome(TaskState.KILLED, "stopped by its supervisor: no agent held its work dir "
                       "for too long, or its sandbox was deleted (orphaned)", REASON_KILLED, code)
    if record.killed:
        how = (f" (SIGKILL after the {record.grace_ms / 1000:g} s grace period)"
               if record.signal == signal.SIGKILL else "")
        return Outcome(TaskState.KILLED, f"killed on request{how}", REASON_KILLED, code)
    mem = enforced_memory_mb(spec.mem_mb) if spec else 0.0
    if record.oom:
        return Outcome(TaskState.FAILED, f"memory limit of {mem:g} MB exceeded ({isolation.kind})",
                       REASON_MEMORY, code)
    if record.signal:
        return Outcome(TaskState.FAILED, f"killed by signal {signal_name(record.signal)}",
                       REASON_FAILED, code)
    if record.code == 0:
        return Outcome(TaskState.SUCCEEDED, "exited with code 0", exit_code=0)
    note = ""
    if mem > 0 and isolation.parent is None:
        note = f" (memory limited to {mem:g} MB by RLIMIT_AS: allocations beyond it fail)"
    return Outcome(TaskState.FAILED, f"exited with code {record.code}{note}", REASON_FAILED, code)
