"""What the job manager's three goal-state engines should look at next, and when.

`GoalStateQueue` is built before anything that acts: it holds only ids and
deadlines (one `Schedule` per engine), so the aggregate, the actions and the
API operations can all schedule work without knowing the engines that run it
(peloton.jobmgr.goalstate.engines builds those last, from this queue and the
actions).  Keys: a job id (job engine), (job id, instance) (task engine), and a
job id for the job's workflow (workflow engine: one workflow per job at a time).

Debounce: `tasks_changed` asks for the job's evaluation `runtime_update_interval`
from now; the schedule keeps the earlier of two deadlines, so however many task
changes arrive meanwhile, the job's runtime is derived from its tasks once per
interval (the job goal-state's RUNTIME_UPDATE follow-up does it).
"""

from __future__ import annotations

from collections.abc import Collection

from peloton.common.clock import Clock
from peloton.common.goalstate import Schedule
from peloton.core.lifecycle.task_goalstate import TaskAction, action_for
from peloton.core.model.task import TaskRuntime

#: A task's key in the task schedule.
TaskKey = tuple[str, int]
#: Task decisions a write never schedules: nothing to do; waiting for an event or a timeout
#: that an action schedules itself (a launch or a kill in flight); or work the bulk paths
#: already did (an INITIALIZED run is queued by whoever created it).
_PASSIVE = frozenset({TaskAction.NOOP, TaskAction.START, TaskAction.LAUNCH_RETRY,
                      TaskAction.EXECUTOR_SHUTDOWN})


def _decision_inputs(rt: TaskRuntime) -> tuple[object, ...]:
    return (rt.goal_state, rt.state, rt.run_id, rt.desired_run_id, rt.config_version,
            rt.desired_config_version, rt.healthy)


def wants_look(old: TaskRuntime | None, new: TaskRuntime) -> bool:
    """Whether a write of `new` over `old` asks the task goal-state engine for a decision:
    the inputs of its decision changed and the decision is one the engine takes."""
    if old is not None and _decision_inputs(old) == _decision_inputs(new):
        return False
    return action_for(new) not in _PASSIVE


class GoalStateQueue:
    """Three schedules: jobs, tasks and workflows."""

    def __init__(self, clock: Clock, runtime_update_interval: float = 0.2) -> None:
        self.jobs: Schedule[str] = Schedule(name="job", clock=clock)
        self.tasks: Schedule[TaskKey] = Schedule(name="task", clock=clock)
        self.updates: Schedule[str] = Schedule(name="update", clock=clock)
        self.runtime_update_interval = runtime_update_interval

    def enqueue_job(self, job_id: str, delay: float = 0.0) -> None:
        """Evaluate the job within `delay` seconds."""
        self.jobs.enqueue_after(job_id, delay)

    def enqueue_task(self, job_id: str, instance: int, delay: float = 0.0) -> None:
        """Evaluate one task within `delay` seconds."""
        self.tasks.enqueue_after((job_id, instance), delay)

    def enqueue_update(self, job_id: str, delay: float = 0.0) -> None:
        """Evaluate the job's workflow within `delay` seconds."""
        self.updates.enqueue_after(job_id, delay)

    def tasks_changed(self, job_id: str) -> None:
        """Tasks of the job changed: evaluate the job within the runtime update interval."""
        self.jobs.enqueue_after(job_id, self.runtime_update_interval)

    def forget_job(self, job_id: str, instances: Collection[int]) -> None:
        """Stop tracking a job, its tasks and its workflow (it left the cache)."""
        for inst in instances:
            self.tasks.delete((job_id, inst))
        self.jobs.delete(job_id)
        self.updates.delete(job_id)

    def forget_update(self, job_id: str) -> None:
        """Stop tracking the job's workflow (it finished)."""
        self.updates.delete(job_id)
