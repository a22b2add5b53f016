"""Pure changes to a task runtime: start a run, place it, apply a host event, stop it.

Every function takes the current runtime (and the facts of the change)
and returns the new runtime, or None when the change does not apply
(a duplicate or stale event, a write the run-id rules forbid).  Nothing
here performs I/O; the writer persists what these functions return.

Texts that come with a placement or a host event (host, agent id, message, reason) are
interned: the cache keeps every active task's runtime, and each event brings its own copy
of the same few hosts and messages (codec_rows.py does the same for runtimes read back).
"""

from __future__ import annotations

from sys import intern

from peloton.core.lifecycle.run_end import counts_as_failure, end_reason
from peloton.core.lifecycle.task_transitions import check_runtime_write
from peloton.core.model.events import PodEvent
from peloton.core.model.evolve import constructor, evolve, evolver
from peloton.core.model.task import TaskRuntime, TerminationReason
from peloton.core.ports import HostEvent
from peloton.core.states import HealthState, TaskState

S = TaskState
_HEALTH = {h.value: h for h in HealthState}
#: Builds a TaskRuntime without the frozen `__init__` (one per task a job creates).
_new_runtime = constructor(TaskRuntime)
#: `evolve` for runtimes without its dispatch (several per task: every status update).
_evolve_runtime = evolver(TaskRuntime)


def _shared(text: str) -> str:
    """`text`, interned (module docstring); a str subclass (an enum) is kept as it is."""
    return intern(text) if type(text) is str else text


def initial(goal: TaskState, config_version: int, now: float, *,
            health_check: bool = False, waiting: bool = False, after_run: int = 0,
            stopped: bool = False) -> TaskRuntime:
    """The runtime of a brand-new task: run 1, PENDING (it is queued at once), or
    INITIALIZED when it must `wait` for room under its job's maximumRunningInstances;
    at revision 1, as `CachedJob.create_tasks` stores it (so it is stored without a copy).

    `after_run`: the last run of an instance that existed before (removed by an update,
    now added back); the new runtime goes on from the next run.  `stopped`: created
    KILLED with goal KILLED (added by a workflow of a job that was stopped), never run.
    """
    run = after_run + 1
    if stopped:
        return TaskRuntime(state=S.KILLED, goal_state=S.KILLED, run_id=run,
                           desired_run_id=run, prev_run_id=after_run,
                           config_version=config_version,
                           desired_config_version=config_version,
                           healthy=HealthState.DISABLED, update_time=now,
                           message="added while the job is stopped", revision=1)
    return _new_runtime(state=S.INITIALIZED if waiting else S.PENDING, goal_state=goal,
                        run_id=run, desired_run_id=run, prev_run_id=after_run,
                        config_version=config_version, desired_config_version=config_version,
                        healthy=HealthState.HEALTH_UNKNOWN if health_check
                        else HealthState.DISABLED,
                        update_time=now, revision=1)


def new_run(rt: TaskRuntime, now: float, *, health_check: bool = False,
            message: str = "") -> TaskRuntime:
    """Start the next run (run ids only grow), on the desired config, INITIALIZED."""
    run = max(rt.run_id + 1, rt.desired_run_id)
    return evolve(
        rt, state=S.INITIALIZED, run_id=run, prev_run_id=rt.run_id, desired_run_id=run,
        config_version=rt.desired_config_version, host="", agent_id="", ports=(),
        start_time=0.0, completion_time=0.0, exit_code=None, reason="", message=message,
        termination=TerminationReason.NONE,
        healthy=HealthState.HEALTH_UNKNOWN if health_check else HealthState.DISABLED,
        healthy_time=0.0, update_time=now)


def queued(rt: TaskRuntime, now: float) -> TaskRuntime:
    """Handed to the resource manager."""
    return evolve(rt, state=S.PENDING, message="", update_time=now)


def launched(rt: TaskRuntime, hostname: str, agent_id: str, ports: tuple[tuple[str, int], ...],
             now: float) -> TaskRuntime:
    """Placed on a host and handed to it."""
    # The desired host stays: it is cleared once the run is RUNNING, unless the task is
    # pinned to it (a daemon instance, a stateful task), see apply_event.
    return _evolve_runtime(rt, state=S.LAUNCHED, host=_shared(hostname),
                           agent_id=_shared(agent_id),
                               ports=ports, message="", reason="", update_time=now)


def desired_host_for_update(rt: TaskRuntime, *, in_place: bool, pinned: bool) -> str:
    """The desired host a workflow gives an instance it moves to a new config (Peloton's
    goalstate/update_run.go getDesiredHostField).

    In place: the host the instance already has a claim on (an earlier in-place run still
    waiting), else the host its run is on; a run that has ended is on no host (a killed
    job released it, and instances waiting for that room come first).  Otherwise none.
    A `pinned` task (daemon instance, stateful task) keeps its host whatever the update.
    """
    if pinned:
        return rt.desired_host
    if not in_place:
        return ""
    if rt.desired_host:
        return rt.desired_host
    return "" if rt.state.terminal else rt.host


def stopped_desired_host(rt: TaskRuntime, *, pinned: bool) -> str:
    """The desired host of a task stopped on request (Peloton's job kill and StopPod): none,
    so the host is free for others and the task, started again, queues like any other;
    a `pinned` task keeps its host."""
    return rt.desired_host if pinned else ""


def killing(rt: TaskRuntime, now: float, reason: TerminationReason) -> TaskRuntime:
    """Asked the host to stop the run."""
    return evolve(rt, state=S.KILLING, termination=reason, update_time=now,
                               message="killing")


def killed(rt: TaskRuntime, now: float, reason: TerminationReason, message: str) -> TaskRuntime:
    """Stopped before it reached a host (or the host is gone)."""
    return evolve(rt, state=S.KILLED, termination=reason, completion_time=now,
                               message=message, update_time=now)


def failed_launch(rt: TaskRuntime, now: float, message: str) -> TaskRuntime:
    """The host manager could not hand the run to its host."""
    return evolve(rt, state=S.FAILED, completion_time=now, message=message,
                               reason="REASON_LAUNCH_FAILED", update_time=now,
                               failure_count=rt.failure_count + 1)


def unreached_launch(rt: TaskRuntime, now: float, message: str) -> TaskRuntime:
    """The launch did not get to the host (it is gone, not yet timed out): the run is
    LOST before it started, which does not count against the task (core run_end.py)."""
    counted = 1 if counts_as_failure(rt, S.LOST) else 0
    return evolve(rt, state=S.LOST, completion_time=now, message=message,
                  reason=end_reason(rt, S.LOST, "REASON_LAUNCH_FAILED"), update_time=now,
                  failure_count=rt.failure_count + counted)


def apply_event(rt: TaskRuntime, run_id: int, event: HostEvent, *,
                pinned: bool = False) -> TaskRuntime | None:
    """The runtime after a host status event for run `run_id`, or None to drop the event.

    A `pinned` task (daemon instance, stateful task) keeps its desired host for good;
    any other task's desired host is only a hint for its first placement.
    """
    if run_id != rt.run_id:
        return None
    state = event.state
    health = _HEALTH.get(event.healthy) if event.healthy else None
    if state is rt.state and health is None:
        return None  # a re-delivered event
    # The changed fields are gathered first and the runtime built once: this runs for
    # every status update of every task.
    changed: dict[str, object] = {"state": state, "update_time": event.timestamp}
    if event.hostname:
        changed["host"] = _shared(event.hostname)
    if event.agent_id:
        changed["agent_id"] = _shared(event.agent_id)
    if state in (S.STARTING, S.RUNNING):
        if state is S.RUNNING and not rt.start_time:
            changed["start_time"] = event.timestamp
            changed["desired_host"] = rt.desired_host if pinned else ""
        if health is not None:
            # The watch time of an update counts from when the run turned HEALTHY.
            changed["healthy"] = health
            changed["healthy_time"] = ((rt.healthy_time or event.timestamp)
                                       if health is HealthState.HEALTHY else 0.0)
        if event.message:
            changed["message"] = _shared(event.message)
    elif state.terminal:
        # Which ends count against maxFailures is the core's table (run_end.py): a run
        # lost before it started (a launch in flight through an outage) does not.
        failed = counts_as_failure(rt, state)
        changed.update(
            completion_time=event.timestamp, message=_shared(event.message),
            reason=_shared(end_reason(rt, state, event.reason)),
            exit_code=event.exit_code,
            healthy=HealthState.INVALID if rt.healthy is not HealthState.DISABLED else rt.healthy,
            healthy_time=0.0,
            failure_count=rt.failure_count + (1 if failed else 0),
            desired_host="" if state in (S.FAILED, S.LOST) and not pinned else rt.desired_host)
    new = _evolve_runtime(rt, **changed)
    if check_runtime_write(rt, new) is not None:
        return None
    return new


_new_pod_event = constructor(PodEvent)


def pod_event(job_id: str, instance: int, rt: TaskRuntime) -> PodEvent:
    """The history record of a task runtime."""
    # Positional, in PodEvent's field order (keywords cost a third more; one per write;
    # tests/unit/jobmgr/test_runs.py checks every field against the keyword form).
    return _new_pod_event(job_id, instance, rt.run_id, rt.state, rt.goal_state,
                          rt.update_time, rt.prev_run_id, rt.desired_run_id, rt.host,
                          rt.agent_id, rt.config_version, rt.desired_config_version,
                          rt.message, rt.reason, rt.healthy)
