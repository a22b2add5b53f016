"""The job manager's three goal-state engines, built last from the queue and the actions.

`GoalStateQueue` (built first) holds what is due; the action classes resolve a
key to actions; each `Engine` runs one schedule with one resolver.  This object
starts and stops the three together (a lifecycle component), lets the API lock
them down (AdminService GoalStateEngine), and runs them in the caller for tests
(`run_due`).

With all-active job managers each engine evaluates only the keys of jobs this job
manager owns (`owns`, ownership.py): a key of another member's job that is still
scheduled here (its partition was just released) resolves to no action.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from peloton.common.goalstate import Action, Engine
from peloton.jobmgr.config import JobManagerConfig
from peloton.jobmgr.goalstate.job import JobActions
from peloton.jobmgr.goalstate.queue import GoalStateQueue, TaskKey
from peloton.jobmgr.goalstate.task import TaskActions
from peloton.jobmgr.goalstate.update import UpdateActions

log = logging.getLogger(__name__)


class GoalStateEngines:
    """The job, task and workflow engines over one `GoalStateQueue`."""

    name = "goal-state-engines"

    def __init__(self, queue: GoalStateQueue, jobs: JobActions, tasks: TaskActions,
                 updates: UpdateActions, config: JobManagerConfig,
                 owns: Callable[[str], bool] = lambda _job_id: True) -> None:
        def owned_job(resolve: Callable[[str], Sequence[Action]]) -> Callable[[str], Sequence[Action]]:
            return lambda job_id: resolve(job_id) if owns(job_id) else ()

        def owned_task(key: TaskKey) -> Sequence[Action]:
            return tasks.resolve(key) if owns(key[0]) else ()

        self.job: Engine[str] = Engine(queue.jobs, owned_job(jobs.resolve),
                                       workers=config.job_workers)
        self.task: Engine[TaskKey] = Engine(queue.tasks, owned_task, workers=config.task_workers)
        self.update: Engine[str] = Engine(queue.updates, owned_job(updates.resolve),
                                          workers=config.update_workers)
        self._started = False
        self._locked = False

    @property
    def all(self) -> tuple[Engine[str], Engine[TaskKey], Engine[str]]:
        """The engines, in start order."""
        return self.job, self.task, self.update

    def start(self) -> None:
        """Start evaluating (unless locked down; then on `unlock`)."""
        self._started = True
        if not self._locked:
            for engine in self.all:
                engine.start()

    def stop(self) -> None:
        """Stop evaluating; what is tracked stays tracked."""
        self._started = False
        for engine in self.all:
            engine.stop()

    def lock(self) -> None:
        """AdminService Lockdown GoalStateEngine: stop evaluating until `unlock`."""
        if not self._locked:
            self._locked = True
            for engine in self.all:
                engine.stop()
            log.warning("goal-state engines locked down by AdminService.Lockdown")

    def unlock(self) -> None:
        """AdminService RemoveLockdown GoalStateEngine: resume if the job manager runs."""
        if self._locked:
            self._locked = False
            if self._started:
                for engine in self.all:
                    engine.start()
            log.warning("goal-state engines restarted by AdminService.RemoveLockdown")

    def run_due(self) -> int:
        """Evaluate every due key of the three engines once, in the caller; returns how many."""
        return sum(engine.run_due() for engine in self.all)
