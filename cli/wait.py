"""`--wait`: poll a job, a v0 update or a stateless workflow until it ends, with a live bar.

Each waiter polls one read RPC every `poll` seconds, shows progress through
`Output.progress`, and returns the final state name.  A bad end (a batch
job FAILED or KILLED, an update FAILED, ROLLED_BACK or ABORTED) raises
WaitFailed, and running past `timeout` raises WaitTimeout, so the shell sees
a distinct exit code for each.  Sleep and clock are injectable for tests.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from cli.exit_codes import WaitFailed, WaitTimeout
from cli.output import Output
from peloton.api.client import PelotonClient
from peloton.api.gen.peloton.api.v0.job import job_pb2
from peloton.api.gen.peloton.api.v0.update import update_pb2
from peloton.api.gen.peloton.api.v1alpha.job.stateless import stateless_pb2

TERMINAL_JOB_STATES = {"SUCCEEDED", "FAILED", "KILLED", "DELETED"}
FAILED_JOB_STATES = {"FAILED", "KILLED"}
TERMINAL_TASK_STATES = {"SUCCEEDED", "FAILED", "KILLED", "LOST", "DELETED"}
TERMINAL_UPDATE_STATES = {"SUCCEEDED", "ABORTED", "FAILED", "ROLLED_BACK"}
FAILED_UPDATE_STATES = {"ABORTED", "FAILED", "ROLLED_BACK"}
_WF = "WORKFLOW_STATE_"
_POD = "POD_STATE_"
#: Polls of an already-finished workflow before we accept it as the one we started.
_STALE_POLLS = 5

# Task states in lifecycle order, for a stable summary beside the bar.
_TASK_ORDER = ["INITIALIZED", "PENDING", "READY", "PLACING", "PLACED", "LAUNCHING", "LAUNCHED",
               "STARTING", "RUNNING", "KILLING", "PREEMPTING", "SUCCEEDED", "FAILED", "LOST",
               "KILLED", "DELETED"]


@dataclass(frozen=True, slots=True)
class Poller:
    """How to wait: poll period, overall limit (None = forever), and the time functions."""

    poll: float = 1.0
    timeout: float | None = None
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic

    def start(self) -> Callable[[str], None]:
        """A pacer: each call sleeps one period, or raises WaitTimeout past the limit."""
        deadline = None if not self.timeout else self.clock() + self.timeout

        def pace(what: str) -> None:
            if deadline is not None and self.clock() >= deadline:
                raise WaitTimeout(f"gave up waiting for {what} after {self.timeout:g}s")
            self.sleep(self.poll)

        return pace


def summarize(stats: Mapping[str, int]) -> str:
    """`RUNNING 3 SUCCEEDED 2` in lifecycle order, zero counts left out."""
    known = [s for s in _TASK_ORDER if stats.get(s)]
    rest = sorted(s for s in stats if s not in _TASK_ORDER and stats[s])
    return " ".join(f"{s} {stats[s]}" for s in known + rest)


def wait_job(client: PelotonClient, job_id: str, out: Output, poller: Poller, *,
             until_running: bool = False, fail_on: frozenset[str] = frozenset(FAILED_JOB_STATES)) -> str:
    """Wait for a job to end (or, with `until_running`, for all of a service's tasks to run).

    Ending in a state of `fail_on` raises WaitFailed (a stop expects KILLED, so it passes none).
    """
    pace = poller.start()
    what = f"job {job_id}"
    with out.progress(f"job {job_id[:8]}", 1) as bar:
        while True:
            info = client.get_job(job_id).jobInfo
            runtime = info.runtime
            total = info.config.instanceCount
            stats = {k: int(v) for k, v in runtime.taskStats.items()}
            state = str(job_pb2.JobState.Name(runtime.state))
            running = stats.get("RUNNING", 0)
            done = running if until_running else sum(stats.get(s, 0) for s in TERMINAL_TASK_STATES)
            bar.update(min(done, total), total, f"{state}  {summarize(stats)}")
            if state in TERMINAL_JOB_STATES or (until_running and total and running >= total):
                break
            pace(what)
    if state in fail_on:
        raise WaitFailed(f"job {job_id} ended {state}: {summarize(stats)}")
    return state


def wait_update(client: PelotonClient, update_id: str, out: Output, poller: Poller) -> str:
    """Wait for a v0 update to reach a terminal state; shows done / failed / remaining."""
    pace = poller.start()
    with out.progress(f"update {update_id[:8]}", 1) as bar:
        while True:
            status = client.get_update(update_id, status_only=True).updateInfo.status
            state = str(update_pb2.State.Name(status.state))
            done, failed, left = status.numTasksDone, status.numTasksFailed, status.numTasksRemaining
            bar.update(done + failed, done + failed + left,
                       f"{state}  done {done} failed {failed} remaining {left}")
            if state in TERMINAL_UPDATE_STATES:
                break
            pace(f"update {update_id}")
    if state in FAILED_UPDATE_STATES:
        raise WaitFailed(f"update {update_id} ended {state}: done {done}, failed {failed}, "
                         f"remaining {left}")
    return state


def wait_workflow(client: PelotonClient, job_id: str, version: str, out: Output, poller: Poller) -> str:
    """Wait for the workflow a stateless write started (entity `version`) to end."""
    pace = poller.start()
    stale = 0
    with out.progress(f"workflow {job_id[:8]}", 1) as bar:
        while True:
            status = client.get_stateless_job(job_id, summary_only=True).summary.status
            wf = status.workflow_status
            state = str(stateless_pb2.WorkflowState.Name(wf.state)).removeprefix(_WF)
            done, failed = wf.num_instances_completed, wf.num_instances_failed
            left = wf.num_instances_remaining
            # The pods' states say why a workflow does not move on (pods that keep failing).
            pods = summarize({k.removeprefix(_POD): int(v) for k, v in status.pod_stats.items()})
            bar.update(done + failed, done + failed + left,
                       f"{state}  done {done} failed {failed} remaining {left}"
                       + (f"  pods {pods}" if pods else ""))
            finished = state in TERMINAL_UPDATE_STATES
            # Right after the write, the status may still describe the previous workflow.
            ours = not version or wf.version.value == version or stale >= _STALE_POLLS
            if finished and ours:
                break
            stale = stale + 1 if finished else _STALE_POLLS
            pace(f"the workflow of job {job_id}")
    if state in FAILED_UPDATE_STATES:
        raise WaitFailed(f"workflow of job {job_id} ended {state}: done {done}, failed {failed}, "
                         f"remaining {left}")
    return state
