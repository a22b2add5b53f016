"""Thermos's process scheduling as a pure state machine: which process runs next, when a
failed one is retried, when the task is done and how it ended.

Aurora ships a task as Thermos processes; the bridge runs them with a small runner
(aurorabridge/thermos_runner.py) that spawns, watches and stops processes and asks this
module everything else.  The rules below restate Thermos's (Apache Aurora's runner and
planner) as tables:

Process life, `PROCESS_RULES[(state, how the run ended, guard)] -> (state, counter)`:

    PENDING  --start-->  RUNNING
    RUNNING  --exit 0, daemon-->                          PENDING   (again after min_duration)
    RUNNING  --exit 0-->                                  FINISHED
    RUNNING  --exit != 0, failures < max_failures
                         (or max_failures 0: forever)-->  PENDING   (retried after min_duration)
    RUNNING  --exit != 0, out of tries, ephemeral-->      FINISHED  (never fails its task)
    RUNNING  --exit != 0, out of tries-->                 FAILED
    RUNNING  --killed by a signal nobody here sent-->     PENDING   (Thermos's "lost": not counted)
    RUNNING  --ended after the runner stopped it-->       KILLED

A PENDING process starts once every process ordered before it (`order` constraints) is
FINISHED, min_duration seconds after its previous run ended, while fewer than
max_concurrency (0: no limit) processes of its group run; ready processes start in the
order they are declared.  Regular processes run in the ACTIVE stage, `final` ones in
FINALIZING.

Task life, `STAGE_RULES[stage]`: the first condition that holds moves the task on:

    ACTIVE      kill requested                                -> CLEANING, KILLED
                task max_failures processes FAILED (0: never) -> CLEANING, FAILED
                every non-ephemeral regular process FINISHED
                or FAILED                                     -> CLEANING, SUCCEEDED
                nothing running and nothing that can ever run -> CLEANING, FAILED
    CLEANING    (what runs was told to stop on entry)
                finalization deadline passed                  -> DONE (what runs is killed)
                nothing running                               -> FINALIZING
    FINALIZING  deadline passed                               -> DONE (what runs is killed)
                every non-ephemeral final process ended       -> DONE
                nothing running and nothing that can ever run -> DONE

The deadline is finalization_wait seconds after the task left ACTIVE.  A kill while
CLEANING or FINALIZING makes the outcome KILLED and keeps the earlier deadline.

Standalone on purpose: standard library and thermos_spec.py only, nothing newer than
Python 3.8 at run time, because the bridge ships both files' source to tasks whose
machines have only their own `python3` (aurorabridge/atop/thermos.py).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import NamedTuple

from peloton.core.thermos_spec import ProcessSpec, TaskSpec, dependencies


class Proc(enum.Enum):
    """Where one process is."""

    PENDING = "pending"
    RUNNING = "running"
    FINISHED = "finished"
    FAILED = "failed"
    KILLED = "killed"


class Exit(enum.Enum):
    """How a run ended, as the runner saw it."""

    SUCCESS = "exited 0"
    FAILURE = "exited non-zero"
    SIGNALED = "killed by a signal"
    STOPPED = "stopped by the runner"


class Guard(enum.Enum):
    """What else decides the next state of a run that ended."""

    DAEMON = "daemon"
    ONCE = "not a daemon"
    RETRY = "tries left"
    SPENT_EPHEMERAL = "out of tries, ephemeral"
    SPENT = "out of tries"
    ANY = "always"


class Tally(enum.Enum):
    """Which counter of the process a transition adds one to."""

    SUCCESS = "successes"
    FAILURE = "failures"
    LOSS = "losses"
    NONE = "none"


class Stage(enum.Enum):
    """Where the task is."""

    ACTIVE = "active"
    CLEANING = "cleaning"
    FINALIZING = "finalizing"
    DONE = "done"


class Outcome(enum.Enum):
    """How the task ended."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    KILLED = "killed"


class Cond(enum.Enum):
    """Task-level conditions the stage rules test, on the stage's group of processes."""

    KILL_REQUESTED = "kill requested"
    TOO_MANY_FAILED = "task max_failures processes failed"
    COMPLETE = "every non-ephemeral process ended"
    STUCK = "nothing running and nothing that can ever run"
    DEADLINE = "finalization deadline passed"
    IDLE = "nothing running"


#: (state, how the run ended, guard) -> (next state, counter).  Anything else is an error.
PROCESS_RULES: dict[tuple[Proc, Exit, Guard], tuple[Proc, Tally]] = {
    (Proc.RUNNING, Exit.SUCCESS, Guard.DAEMON): (Proc.PENDING, Tally.SUCCESS),
    (Proc.RUNNING, Exit.SUCCESS, Guard.ONCE): (Proc.FINISHED, Tally.SUCCESS),
    (Proc.RUNNING, Exit.FAILURE, Guard.RETRY): (Proc.PENDING, Tally.FAILURE),
    (Proc.RUNNING, Exit.FAILURE, Guard.SPENT_EPHEMERAL): (Proc.FINISHED, Tally.FAILURE),
    (Proc.RUNNING, Exit.FAILURE, Guard.SPENT): (Proc.FAILED, Tally.FAILURE),
    (Proc.RUNNING, Exit.SIGNALED, Guard.ANY): (Proc.PENDING, Tally.LOSS),
    (Proc.RUNNING, Exit.STOPPED, Guard.ANY): (Proc.KILLED, Tally.NONE),
}

#: stage -> ordered (condition, next stage, outcome decided then or None).
STAGE_RULES: dict[Stage, tuple[tuple[Cond, Stage, Outcome | None], ...]] = {
    Stage.ACTIVE: (
        (Cond.KILL_REQUESTED, Stage.CLEANING, Outcome.KILLED),
        (Cond.TOO_MANY_FAILED, Stage.CLEANING, Outcome.FAILED),
        (Cond.COMPLETE, Stage.CLEANING, Outcome.SUCCEEDED),
        (Cond.STUCK, Stage.CLEANING, Outcome.FAILED),
    ),
    Stage.CLEANING: (
        (Cond.DEADLINE, Stage.DONE, None),
        (Cond.IDLE, Stage.FINALIZING, None),
    ),
    Stage.FINALIZING: (
        (Cond.DEADLINE, Stage.DONE, None),
        (Cond.COMPLETE, Stage.DONE, None),
        (Cond.STUCK, Stage.DONE, None),
    ),
    Stage.DONE: (),
}


class ProcessStatus(NamedTuple):
    """A snapshot of one process in a plan."""

    state: Proc
    #: Runs started so far (the current one included): run N's logs are in .logs/<name>/<N-1>.
    runs: int
    successes: int
    failures: int
    losses: int
    last_end: float | None
    stopping: bool


class Step(NamedTuple):
    """What one ended run did: the rule's key, the new state and when the process may run again."""

    name: str
    exit: Exit
    guard: Guard
    state: Proc
    failures: int
    ready_at: float | None


class Decision(NamedTuple):
    """What the runner does now, and by when it must ask again without any event."""

    start: tuple[str, ...]
    terminate: tuple[str, ...]
    kill: tuple[str, ...]
    stage: Stage
    outcome: Outcome | None
    wake_at: float | None


def guard_for(spec: ProcessSpec, exit: Exit, failures_after: int) -> Guard:
    """The guard of a run of `spec` that ended as `exit`, its failures counted with this one."""
    if exit is Exit.SUCCESS:
        return Guard.DAEMON if spec.daemon else Guard.ONCE
    if exit is Exit.FAILURE:
        if spec.max_failures == 0 or failures_after < spec.max_failures:
            return Guard.RETRY
        return Guard.SPENT_EPHEMERAL if spec.ephemeral else Guard.SPENT
    return Guard.ANY


@dataclass
class _Record:
    spec: ProcessSpec
    after: frozenset[str]
    state: Proc = Proc.PENDING
    counts: dict[Tally, int] = field(default_factory=lambda: {t: 0 for t in Tally})
    last_end: float | None = None
    stopping: bool = False
    runs: int = 0

    def ready_at(self) -> float:
        return float("-inf") if self.last_end is None else self.last_end + self.spec.min_duration


class TaskPlan:
    """The run of one Thermos task, driven by the runner: `decide(now)` says what to start,
    stop and kill; `exited(name, exit, now)` reports each run's end; `request_kill(now)` a
    kill.  Times are numbers from one monotonic clock, never read here.

    Invariants: a process is RUNNING exactly between a `decide` that started it and its
    `exited`; `stage` only moves forward (ACTIVE, CLEANING, FINALIZING, DONE); `outcome`
    is set when the task leaves ACTIVE and only a kill changes it afterwards.
    """

    def __init__(self, spec: TaskSpec, now: float) -> None:
        after = dependencies(spec)
        self.spec = spec
        self.started_at = now
        self._records = {p.name: _Record(p, after[p.name]) for p in spec.processes}
        self.stage = Stage.ACTIVE
        self.outcome: Outcome | None = None
        self.reason = ""
        self.deadline: float | None = None
        self.kill_requested = False

    # -- reads -------------------------------------------------------------------------
    def status(self, name: str) -> ProcessStatus:
        """Where process `name` is and what it did so far."""
        r = self._records[name]
        return ProcessStatus(r.state, r.runs, r.counts[Tally.SUCCESS], r.counts[Tally.FAILURE],
                             r.counts[Tally.LOSS],
                             r.last_end, r.stopping)

    def _group(self) -> list[_Record]:
        final = self.stage is Stage.FINALIZING
        return [r for r in self._records.values() if r.spec.final == final]

    def _running(self) -> list[_Record]:
        return [r for r in self._records.values() if r.state is Proc.RUNNING]

    def _eligible(self, group: list[_Record]) -> list[_Record]:
        """PENDING processes of `group` whose predecessors all FINISHED (ready now or later)."""
        finished = {r.spec.name for r in self._records.values() if r.state is Proc.FINISHED}
        return [r for r in group if r.state is Proc.PENDING and r.after <= finished]

    def holds(self, cond: Cond, now: float) -> bool:
        """Whether task-level condition `cond` holds now, for the current stage's processes."""
        group = self._group()
        if cond is Cond.KILL_REQUESTED:
            return self.kill_requested
        if cond is Cond.TOO_MANY_FAILED:
            failed = sum(1 for r in group if r.state is Proc.FAILED)
            return self.spec.max_failures > 0 and failed >= self.spec.max_failures
        if cond is Cond.COMPLETE:
            return all(r.state in (Proc.FINISHED, Proc.FAILED) for r in group if not r.spec.ephemeral)
        if cond is Cond.STUCK:
            return not any(r.state is Proc.RUNNING for r in group) and not self._eligible(group)
        if cond is Cond.DEADLINE:
            return self.deadline is not None and now >= self.deadline
        return not self._running()  # Cond.IDLE

    # -- events ------------------------------------------------------------------------
    def request_kill(self, now: float) -> None:
        """The task is being killed: stop the regular processes, then run the final ones."""
        if self.stage is Stage.DONE or self.kill_requested:
            return
        self.kill_requested = True
        if self.stage is not Stage.ACTIVE:
            self.outcome, self.reason = Outcome.KILLED, "the task was killed"
            self.deadline = min(self.deadline if self.deadline is not None else now,
                                now + self.spec.finalization_wait)

    def exited(self, name: str, exit: Exit, now: float) -> Step:
        """A run of `name` ended as `exit` at `now` (STOPPED is implied for a run being stopped)."""
        r = self._records[name]
        if r.stopping:
            exit = Exit.STOPPED
        failures = r.counts[Tally.FAILURE] + (exit is Exit.FAILURE)
        guard = guard_for(r.spec, exit, failures)
        rule = PROCESS_RULES.get((r.state, exit, guard))
        if rule is None:
            raise ValueError(f"process {name} is {r.state.value}: it cannot have {exit.value}")
        r.state, tally = rule
        if tally is not Tally.NONE:
            r.counts[tally] += 1
        r.last_end = now
        r.stopping = False
        ready = r.ready_at() if r.state is Proc.PENDING else None
        return Step(name, exit, guard, r.state, r.counts[Tally.FAILURE], ready)

    # -- decisions ---------------------------------------------------------------------
    def decide(self, now: float) -> Decision:
        """Move the task on as far as the rules allow, then what to start, stop and kill."""
        terminate: list[str] = []
        kill: list[str] = []
        moved = True
        while moved:
            moved = False
            for cond, stage, outcome in STAGE_RULES[self.stage]:
                if self.holds(cond, now):
                    self._enter(stage, outcome, cond, now, terminate, kill)
                    moved = True
                    break
        start: list[str] = []
        wake: list[float] = []
        if self.stage in (Stage.ACTIVE, Stage.FINALIZING):
            group = self._group()
            room = self.spec.max_concurrency - sum(1 for r in group if r.state is Proc.RUNNING)
            for r in self._eligible(group):
                if r.ready_at() > now:
                    wake.append(r.ready_at())
                elif self.spec.max_concurrency == 0 or room > 0:
                    r.state = Proc.RUNNING
                    r.runs += 1
                    room -= 1
                    start.append(r.spec.name)
        if self.deadline is not None and self.stage is not Stage.DONE:
            wake.append(self.deadline)
        return Decision(tuple(start), tuple(terminate), tuple(kill), self.stage, self.outcome,
                        min(wake) if wake else None)

    def _enter(self, stage: Stage, outcome: Outcome | None, cond: Cond, now: float,
               terminate: list[str], kill: list[str]) -> None:
        if outcome is not None:
            self.outcome, self.reason = outcome, self._why(cond)
        self.stage = stage
        if stage is Stage.CLEANING:
            self.deadline = now + self.spec.finalization_wait
            for r in self._running():
                r.stopping = True
                terminate.append(r.spec.name)
        elif stage is Stage.DONE:
            for r in self._running():
                r.stopping = True
                kill.append(r.spec.name)

    def _why(self, cond: Cond) -> str:
        if cond is Cond.KILL_REQUESTED:
            return "the task was killed"
        failed = [r.spec.name for r in self._group() if r.state is Proc.FAILED]
        if cond is Cond.TOO_MANY_FAILED:
            return f"process(es) {', '.join(failed)} failed (task max_failures {self.spec.max_failures})"
        if cond is Cond.STUCK:
            waiting = [r.spec.name for r in self._group() if r.state is Proc.PENDING]
            return f"processes {', '.join(waiting)} can never run: what they are ordered after failed"
        if failed:
            return f"all processes ended; failed: {', '.join(failed)}"
        return "all processes finished"
