"""The job aggregate: every change to a job happens in this module.

A `CachedJob` is the job manager's copy of one active job: its config versions,
runtime, task runtimes and workflow.  Storage is the truth; the cached copy is
what this job manager last wrote or read there, so decisions need no database
round trip and every write is a compare-and-set against the revision it holds.
One exception: a host report core/lifecycle/store_later.py lets wait (a run's STARTING)
is *kept*: in the cache at the stored revision, unstored, and stored with its pod event
by the task's next write, whoever makes it (`keep_tasks`, `store_kept`).
The functions at the end write jobs that are not cached (creating and
deleting one); `JobCache` (cache.py) is the set of cached jobs and calls them.

Nothing outside this module changes a job: no other module calls a store write
method or assigns a cached job's fields (tests/unit/jobmgr/test_one_writer.py
fails the build if one does).  A workflow's state changes only in `move_workflow`,
which checks the move against core/lifecycle/workflow_transitions.py; `save_workflow`
refuses a state changed by hand.  Every change takes the same steps (the rule of each,
with the goal-state work it schedules, is in peloton/jobmgr/README.md): compute the new
value from the current one (callers pass `current -> new`, so a lost compare-and-set is
redone on the reloaded value, never a stale one); write it (a task write reports how it
ended, task_writes.py, and its caller must act on a conflict); put what was stored in the
cache and tell the listeners; schedule the goal-state work the change calls for (callers
never enqueue for a change they made).

Locking: `CachedJob.lock` serialises job-level changes (runtime, configs,
workflow) and the multi-step operations callers build from them; task
runtimes are per-task compare-and-sets under the task's write lock
(task_locks.py), never the job lock.  A job has one object at a time (see
`retire`).  Task state
counts are kept incrementally (O(1) per change): a job's state is derived
from them after every batch of events.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence

import gevent.lock

from peloton.core.errors import Conflict, NotFound
from peloton.core.lifecycle.workflow_transitions import (
    IllegalWorkflowTransition,
    check_workflow_start,
    moved_workflow,
)
from peloton.core.model.events import PodEvent
from peloton.core.model.evolve import constructor, evolve
from peloton.core.model.job import JobRuntime, JobSpec
from peloton.core.model.task import TaskRuntime, TaskSpec
from peloton.core.model.update import UpdateInfo, WorkflowEvent
from peloton.core.states import TaskState, WorkflowState
from peloton.jobmgr.goalstate.queue import wants_look
from peloton.jobmgr.job_deps import JobDeps
from peloton.jobmgr.runs import pod_event
from peloton.jobmgr.task_configs import held_lightly
from peloton.jobmgr.task_writes import TaskWriteOutcome
from peloton.storage import RuntimeWrite, Store

log = logging.getLogger(__name__)
#: Builds a RuntimeWrite without the frozen `__init__`: one per task state change.
_new_write = constructor(RuntimeWrite)

#: A change to one task: current runtime -> new runtime, or None for "nothing to write".
TaskChange = Callable[[TaskRuntime], TaskRuntime | None]
#: A change to the job runtime: current -> new, or None for "nothing to write".
RuntimeChange = Callable[[JobRuntime], JobRuntime | None]

#: Compare-and-set rounds of a task write (each reloads the losers and derives their change
#: again) before the outcome reports them unwritten (CONFLICT) to the caller.
TASK_ROUNDS = 5
#: Compare-and-set rounds of a job runtime change before it fails with Conflict.
RUNTIME_ROUNDS = 3
#: Task writes at least this many go straight to storage, smaller ones through group commit.
DIRECT_BATCH = 64


@dataclasses.dataclass(frozen=True, slots=True)
class _Kept:
    """A task change in the cache only (`CachedJob.keep_tasks`): how to derive it again
    from a reloaded runtime, the pod events its store owes, and since when (monotonic)."""

    change: TaskChange
    events: tuple[PodEvent, ...]
    since: float


class CachedJob:
    """One job: its config versions, runtime, task runtimes and workflow; the only writer."""

    __slots__ = ("__weakref__", "_counts", "_deps", "_kept", "_retired", "_runtime", "_spec",
                 "_specs", "_tasks", "_update", "job_id", "lock")

    def __init__(self, deps: JobDeps, job_id: str, spec: JobSpec, runtime: JobRuntime, *,
                 tasks: Mapping[int, TaskRuntime] | None = None,
                 specs: Mapping[int, JobSpec] | None = None,
                 update: UpdateInfo | None = None) -> None:
        self._deps = deps
        self.job_id = job_id
        spec = self._light(spec)
        self._spec = spec
        self._runtime = runtime
        self._specs: dict[int, JobSpec] = {
            **{v: self._light(s) for v, s in (specs or {}).items()}, spec.version: spec}
        self._tasks: dict[int, TaskRuntime] = dict(tasks or {})
        self._counts: Counter[TaskState] = Counter(rt.state for rt in self._tasks.values())
        self._update = update
        #: Instances whose cached runtime is a change not stored yet (module docstring).
        self._kept: dict[int, _Kept] = {}
        #: Serialises job-level changes and the multi-step operations built from them.
        self.lock = gevent.lock.RLock()
        #: Set while the job is out of the cache (untracked): how it gets back in.
        self._retired: Callable[[CachedJob], None] | None = None

    # -- reading -----------------------------------------------------------------------
    @property
    def spec(self) -> JobSpec:
        """The current config."""
        return self._spec

    @property
    def specs(self) -> Mapping[int, JobSpec]:
        """Config versions loaded so far (the current one, tasks' and workflows' versions)."""
        return self._specs

    @property
    def runtime(self) -> JobRuntime:
        """The job runtime as last stored."""
        return self._runtime

    @property
    def update(self) -> UpdateInfo | None:
        """The job's current workflow (active or finished), if it has one."""
        return self._update

    @property
    def counts(self) -> Mapping[TaskState, int]:
        """Tasks per state (entries may be zero)."""
        return self._counts

    def task(self, instance: int) -> TaskRuntime:
        """The cached runtime of one instance; NotFound if it has none."""
        try:
            return self._tasks[instance]
        except KeyError:
            raise NotFound(f"instance {instance} of job {self.job_id} not found") from None

    def get_task(self, instance: int) -> TaskRuntime | None:
        """The cached runtime of one instance, or None."""
        return self._tasks.get(instance)

    def tasks(self) -> Iterator[tuple[int, TaskRuntime]]:
        """(instance, runtime) pairs in instance order."""
        for inst in sorted(self._tasks):
            yield inst, self._tasks[inst]

    def instances(self) -> list[int]:
        """Instance ids that have a runtime."""
        return sorted(self._tasks)

    def __len__(self) -> int:
        return len(self._tasks)

    def task_spec(self, instance: int, version: int | None = None) -> TaskSpec:
        """The spec an instance runs with at `version` (default: the current config)."""
        spec = self._specs.get(version, self._spec) if version is not None else self._spec
        return spec.task_spec(instance)

    def state_counts(self) -> dict[TaskState, int]:
        """Task count per state (only non-zero entries)."""
        return {state: n for state, n in self._counts.items() if n > 0}

    def check_version(self, version: str) -> None:
        """Reject a stale entity version `<config>-<desired state>-<workflow>` ("" = any)."""
        if version and version != self._runtime.entity_version():
            raise Conflict(f"unexpected entity version {version!r}: job {self.job_id} is at "
                           f"{self._runtime.entity_version()}")

    # -- leaving and re-entering the cache ---------------------------------------------
    def retire(self, back_in: Callable[[CachedJob], None] | None) -> None:
        """The job left the cache; `back_in(self)` puts it back before its next write
        (None: nothing to do, it is cached again or dropped for good).

        Whoever still holds this object (a call that read it from the cache just before
        the job engine untracked it) writes through it: the write brings the job back
        into the cache and the active set, so the engines see it, and no second object
        of the same job ever exists to go stale (JobCache keeps retired ones weakly)."""
        self._retired = back_in

    def _back_in(self) -> None:
        back_in, self._retired = self._retired, None
        if back_in is not None:
            back_in(self)

    # -- the job runtime and its configs ----------------------------------------------
    def change_runtime(self, change: RuntimeChange, *, spec: JobSpec | None = None,
                       workflow: UpdateInfo | None = None) -> JobRuntime:
        """Compare-and-set the job runtime to `change(current)`, stamped with the wall time.

        With `spec` (from `new_config`) the job moves to that config version in the same
        write; with `workflow` (from `create_workflow`) the runtime points at it and it
        becomes the job's workflow.  A lost compare-and-set reloads the runtime and applies
        `change` again; after RUNTIME_ROUNDS losses it raises Conflict.  The job is then
        evaluated (and the workflow, if one was given).
        """
        store = self._deps.store
        self._back_in()
        with self.lock:
            now = self._deps.clock.wall()
            for _ in range(RUNTIME_ROUNDS):
                new = change(self._runtime)
                if new is None:
                    return self._runtime
                new = dataclasses.replace(new, update_time=now)
                if spec is not None:
                    new = dataclasses.replace(new, config_version=spec.version)
                if workflow is not None:
                    new = dataclasses.replace(new, update_id=workflow.update_id)
                try:
                    stored = store.update_job_runtime(self.job_id, new)
                except Conflict:
                    self._runtime = store.get_job_runtime(self.job_id)
                    continue
                if spec is not None:
                    self._spec = self._specs[spec.version] = self._light(spec)
                if workflow is not None:
                    self._update = workflow
                self._set_runtime(stored)
                self._deps.queue.enqueue_job(self.job_id)
                if workflow is not None:
                    self._deps.queue.enqueue_update(self.job_id)
                return stored
        raise Conflict(f"job {self.job_id}: runtime changed under {RUNTIME_ROUNDS} writes in a "
                       "row; retry")

    def reload_runtime(self) -> JobRuntime:
        """Re-read the job runtime from storage (someone else may have written it)."""
        with self.lock:
            self._set_runtime(self._deps.store.get_job_runtime(self.job_id))
        self._deps.queue.enqueue_job(self.job_id)
        return self._runtime

    def new_config(self, spec: JobSpec) -> JobSpec:
        """Store `spec` as the job's next config version; returns it numbered and stamped.

        The one place config versions are made.  Versions only grow, so an entity version a
        client saw never matches again.  The job moves to the new version with
        `change_runtime(..., spec=new)`; a version stored but never moved to is harmless.
        """
        store = self._deps.store
        with self.lock:
            version = store.get_max_job_config_version(self.job_id) + 1
            new = dataclasses.replace(spec, version=version, created_at=self._deps.clock.wall())
            store.create_task_configs(self.job_id, version, new.default_task,
                                      dict(new.instance_tasks))
            store.add_job_config(self.job_id, new)
            new = self._specs[version] = self._light(new)
            return new

    def load_config(self, version: int) -> JobSpec:
        """A config version, read from storage if it is not loaded yet."""
        spec = self._specs.get(version)
        if spec is None:
            spec = self._specs[version] = self._light(
                self._deps.store.get_job_config(self.job_id, version))
        return spec

    def _light(self, spec: JobSpec) -> JobSpec:
        # What the cache keeps of a stored version: per-instance specs within the job
        # manager's budget (task_configs.py), the rest read back from storage on demand.
        return held_lightly(spec, self.job_id, self._deps.task_configs, self._deps.store)

    def activate(self) -> None:
        """Join the active-job set (recovered on restart)."""
        self._deps.store.add_active_job(self.job_id)

    def deactivate(self) -> None:
        """Leave the active-job set (not recovered on restart); the job may stay cached."""
        self._deps.store.delete_active_job(self.job_id)

    # -- task runtimes -----------------------------------------------------------------
    def write_tasks(self, changes: Mapping[int, TaskChange], *,
                    passed_through: Mapping[int, Sequence[TaskRuntime]] | None = None
                    ) -> TaskWriteOutcome:
        """Apply `changes` to the named instances; returns what was stored and what was not.

        Instances whose change returns None or that have no runtime need no write.  A lost
        compare-and-set reloads the runtime and derives the change again, for TASK_ROUNDS
        rounds; an instance that loses every one is in the outcome's `unwritten`
        (CONFLICT), and the caller must act on it (task_writes.py: retry, re-queue or
        raise).  A write that changes a task's state, run or health leaves a pod event;
        `passed_through` (read after the change ran: the runtimes it went through, the
        written one last) adds one for each step before the last.  A task whose cached
        runtime is kept (`keep_tasks`) has the kept change's pod events stored first.
        """
        deps = self._deps
        self._back_in()
        pending = dict(changes)
        written: dict[int, TaskRuntime] = {}
        replaced: dict[int, TaskRuntime] = {}
        job_id = self.job_id
        # One writer per task at a time in this process: a change is computed from the
        # runtime the previous writer stored, so it wins its compare-and-set.  Without this,
        # a write (a kill's goal) kept losing to the run's own progress (a new run queued,
        # placed, launched), each reload a step behind, and was given up.
        held = deps.task_locks.hold(job_id, pending)
        try:
            unwritten, rounds = self._write_rounds(pending, passed_through, written, replaced)
        finally:
            deps.task_locks.release(held)
        if written:
            deps.queue.tasks_changed(self.job_id)
            for inst, rt in written.items():
                if wants_look(replaced[inst], rt):
                    deps.queue.enqueue_task(self.job_id, inst)
        if unwritten:
            log.info("job %s: instances %s lost %d compare-and-sets in a row; the caller "
                     "retries, re-queues or raises", job_id, sorted(unwritten), rounds)
        return TaskWriteOutcome(job_id, written, unwritten, rounds)

    def _write_rounds(self, pending: dict[int, TaskChange],
                      passed_through: Mapping[int, Sequence[TaskRuntime]] | None,
                      written: dict[int, TaskRuntime], replaced: dict[int, TaskRuntime]
                      ) -> tuple[frozenset[int], int]:
        """Compare-and-set rounds; returns the instances still unwritten and the rounds taken."""
        deps = self._deps
        job_id = self.job_id
        kept = self._kept
        for rounds in range(1, TASK_ROUNDS + 1):
            writes: list[RuntimeWrite] = []
            before: dict[int, TaskRuntime] = {}
            for inst, change in pending.items():
                cur = self._tasks.get(inst)
                new = change(cur) if cur is not None else None
                if cur is None or new is None:
                    continue
                before[inst] = cur
                # The pod events go with the write: stored in its transaction, only if
                # it is applied (a wave of state changes is one commit).
                steps = passed_through.get(inst) if passed_through else None
                changed = cur.state is not new.state or cur.run_id != new.run_id or \
                    cur.healthy is not new.healthy
                if steps:
                    events = [pod_event(job_id, inst, rt) for rt in steps[:-1]]
                    if changed:
                        events.append(pod_event(job_id, inst, new))
                    history = tuple(events)
                else:
                    history = (pod_event(job_id, inst, new),) if changed else ()
                if kept and (k := kept.get(inst)) is not None:
                    history = k.events + history
                writes.append(_new_write(job_id, inst, new, history))
            if not writes:
                return frozenset(), rounds
            # A big batch is its own transaction already; only small ones (a goal-state
            # action's single task) gain from sharing one with other callers.
            result = (deps.store.write_task_runtimes(writes) if len(writes) >= DIRECT_BATCH
                      else deps.committer.write_many(writes))
            for task, stored in result.written.items():
                inst = task.instance
                if kept:
                    kept.pop(inst, None)  # stored with this write (its change came from it)
                self._put_task(inst, stored)
                written[inst], replaced[inst] = stored, before[inst]
            lost = {t.instance for t in result.conflicts | result.missing}
            if not lost:
                return frozenset(), rounds
            self.reload_tasks(lost)
            pending = {inst: pending[inst] for inst in lost if inst in pending}
        # Still losing after the last round: the reloaded runtime may not call for the
        # change any more (a run that ended meanwhile), or may be gone.
        return frozenset(inst for inst, change in pending.items()
                         if (cur := self._tasks.get(inst)) is not None
                         and change(cur) is not None), TASK_ROUNDS

    def keep_tasks(self, changes: Mapping[int, TaskChange],
                   may_keep: Callable[[TaskRuntime, TaskRuntime], bool]
                   ) -> dict[int, TaskChange]:
        """Apply `changes` in the cache only where `may_keep(before, after)` allows (the
        rest are returned, for the caller to `write_tasks`): the kept runtime stays at the
        stored revision and its pod event is stored by the task's next write, whoever makes
        it, or by `store_kept`.  A task kept already is returned too (one kept change a
        task).  Readers and the goal-state engines see a kept change as a written one."""
        deps = self._deps
        self._back_in()
        rest: dict[int, TaskChange] = {}
        kept = self._kept
        job_id = self.job_id
        now = deps.clock.monotonic()
        held = deps.task_locks.hold(job_id, changes)
        try:
            for inst, change in changes.items():
                cur = self._tasks.get(inst)
                if cur is None:
                    continue
                if inst in kept:
                    rest[inst] = change
                    continue
                new = change(cur)
                if new is None:
                    continue
                if not may_keep(cur, new):
                    rest[inst] = change
                    continue
                kept[inst] = _Kept(change, (pod_event(job_id, inst, new),), now)
                self._put_task(inst, new)
                if wants_look(cur, new):
                    deps.queue.enqueue_task(job_id, inst)
        finally:
            deps.task_locks.release(held)
        if len(rest) < len(changes):
            deps.queue.tasks_changed(job_id)
        return rest

    def kept(self, until: float | None = None) -> list[int]:
        """Instances with a kept change (`keep_tasks`); with `until`, only those kept at
        monotonic time `until` or before."""
        return [inst for inst, k in self._kept.items() if until is None or k.since <= until]

    def store_kept(self, instances: Collection[int] | None = None) -> TaskWriteOutcome:
        """Store the kept changes of `instances` (default: all) as they are cached, with
        their pod events; the caller acts on the outcome like on any `write_tasks`."""
        kept = self._kept
        todo = list(kept) if instances is None else [i for i in instances if i in kept]
        return self.write_tasks({i: _as_kept(kept, i) for i in todo})

    def write_task(self, instance: int, change: TaskChange) -> TaskWriteOutcome:
        """`write_tasks` for a single instance (`outcome.get(instance)`: what was stored)."""
        return self.write_tasks({instance: change})

    def create_tasks(self, runtimes: Mapping[int, TaskRuntime]) -> None:
        """Store runtimes of instances that have none (AlreadyExists if one has)."""
        if not runtimes:
            return
        deps = self._deps
        self._back_in()
        # Created runtimes are stored at revision 1 (the store's contract), so they are
        # stamped with it once here: the store keeps a runtime already at 1 as it is, and
        # the cache takes the same objects, with no re-read.
        stamped = {inst: rt if rt.revision == 1 else evolve(rt, revision=1)
                   for inst, rt in runtimes.items()}
        deps.store.create_task_runtimes(self.job_id, stamped)
        for inst, rt in stamped.items():
            self._put_task(inst, rt)
        deps.queue.tasks_changed(self.job_id)
        for inst, rt in runtimes.items():
            if wants_look(None, rt):
                deps.queue.enqueue_task(self.job_id, inst)

    def delete_tasks(self, instances: Collection[int]) -> None:
        """Delete the runtimes of instances (their history stays)."""
        if not instances:
            return
        self._deps.store.delete_task_runtimes(self.job_id, list(instances))
        for inst in instances:
            self._kept.pop(inst, None)
            old = self._tasks.pop(inst, None)
            if old is not None:
                self._counts[old.state] -= 1
        self._deps.queue.tasks_changed(self.job_id)

    def reload(self) -> None:
        """Re-read the runtime, every task and the workflow from storage (RefreshJob)."""
        store = self._deps.store
        with self.lock:
            self._runtime = store.get_job_runtime(self.job_id)
            if self._runtime.update_id:
                try:
                    self._update = store.get_update(self._runtime.update_id)
                except NotFound:
                    log.warning("job %s: workflow %s is gone", self.job_id,
                                self._runtime.update_id)
            self.reload_tasks(set(self._tasks) | set(store.get_task_runtimes(self.job_id)))
            self._tell_job()
        self._deps.queue.enqueue_job(self.job_id)

    def reload_tasks(self, instances: Collection[int]) -> None:
        """Re-read task runtimes from storage (an instance with none is forgotten)."""
        fresh = self._deps.store.get_task_runtimes(self.job_id, list(instances))
        kept = self._kept
        for inst in instances:
            if inst in fresh:
                self._put_task(inst, fresh[inst], force=True)
                if kept and (k := kept.pop(inst, None)) is not None:
                    self._keep_again(inst, k)
            else:
                kept.pop(inst, None)
                old = self._tasks.pop(inst, None)
                if old is not None:
                    self._counts[old.state] -= 1

    def _keep_again(self, instance: int, k: _Kept) -> None:
        """A kept change over a runtime reloaded from storage: derived again from it, so it
        is never lost nor applied to a run that has moved on (the change says None then:
        a stale report, as it would have been had it been stored at once)."""
        new = k.change(self._tasks[instance])
        if new is None:
            log.info("job %s: instance %d: a kept change no longer applies to the runtime "
                     "stored now; dropped", self.job_id, instance)
            return
        self._kept[instance] = _Kept(k.change, (pod_event(self.job_id, instance, new),),
                                     k.since)
        self._put_task(instance, new, force=True)

    def _put_task(self, instance: int, rt: TaskRuntime, force: bool = False) -> None:
        old = self._tasks.get(instance)
        if old is not None:
            if old.revision > rt.revision and not force:
                return
            self._counts[old.state] -= 1
        self._tasks[instance] = rt
        self._counts[rt.state] += 1
        for fn in self._deps.listeners.task:
            fn(self, instance, rt)

    # -- workflows -------------------------------------------------------------------
    def create_workflow(self, update: UpdateInfo) -> UpdateInfo:
        """Store a new workflow of this job and record that it started.

        It must start in one of the table's initial states (IllegalWorkflowTransition
        otherwise).  It becomes the job's workflow with the runtime change that points the
        job at it (`change_runtime(..., workflow=stored)`), never before: until then the
        job's current workflow, if active, still owns the job.
        """
        reason = check_workflow_start(update.state)
        if reason is not None:
            raise IllegalWorkflowTransition(update.update_id, None, update.state, reason)
        self._back_in()
        now = self._deps.clock.wall()
        stored = self._deps.store.create_update(
            dataclasses.replace(update, prev_state=WorkflowState.INITIALIZED,
                                creation_time=now, update_time=now))
        self.workflow_event(stored, None)
        return stored

    def move_workflow(self, update: UpdateInfo, to: WorkflowState, *,
                      message: str | None = None,
                      opaque_data: str | None = None) -> UpdateInfo:
        """Move a workflow to state `to`: the one way a workflow's state changes.

        `update` is the workflow as read, with any other fields the move changes (a
        rollback's new instance sets); its `state` and `prev_state` are left to this
        method, which checks the move against the table (core/lifecycle/
        workflow_transitions.py; IllegalWorkflowTransition if it is not allowed), sets
        `prev_state` when the state changes, and stamps `completion_time` when the
        workflow ends.  Then as `save_workflow`.
        """
        return self._write_workflow(update, to, message, opaque_data)

    def save_workflow(self, update: UpdateInfo, opaque_data: str | None = None) -> UpdateInfo:
        """Compare-and-set a workflow's progress (instance sets, opaque data, ...), its state
        unchanged: a state change is `move_workflow`'s, and one made here by hand is refused
        (IllegalWorkflowTransition), as is any write to a finished workflow.

        An active workflow is then evaluated; one that just ended has its job evaluated.
        Conflict if it changed since it was read.
        """
        return self._write_workflow(update, None, None, opaque_data)

    def _write_workflow(self, update: UpdateInfo, to: WorkflowState | None,
                        message: str | None, opaque_data: str | None) -> UpdateInfo:
        self._back_in()
        with self.lock:
            now = self._deps.clock.wall()
            current = self._stored_workflow(update)
            update = moved_workflow(current, update, to, now)  # the table's check
            if message is not None:
                update = dataclasses.replace(update, message=message)
            if opaque_data is not None:
                update = dataclasses.replace(update, opaque_data=opaque_data)
            stored = self._deps.store.update_update(dataclasses.replace(update, update_time=now))
            if self._update is None or self._update.update_id == stored.update_id:
                self._update = stored
                self._tell_job()
        if current.state is not stored.state:
            self.workflow_event(stored, None)
        if stored.state.active:
            self._deps.queue.enqueue_update(self.job_id)
        elif current.state is not stored.state:
            self._deps.queue.enqueue_job(self.job_id)  # the job may act now the workflow ended
        return stored

    def _stored_workflow(self, update: UpdateInfo) -> UpdateInfo:
        """The stored workflow `update` was read as (the cached copy when it is that one);
        Conflict if it changed since, as the compare-and-set would answer."""
        cur = self._update
        if cur is None or cur.update_id != update.update_id or cur.revision != update.revision:
            cur = self._deps.store.get_update(update.update_id)
            if cur.revision != update.revision:
                raise Conflict(f"workflow {update.update_id} changed since it was read "
                               f"(revision {update.revision}, now {cur.revision}); retry")
        return cur

    def workflow_event(self, update: UpdateInfo, instance: int | None,
                       state: WorkflowState | None = None, message: str = "") -> None:
        """Record an event of a workflow, or of one instance in it."""
        self._deps.store.add_workflow_event(WorkflowEvent(
            update_id=update.update_id, instance=instance, type=update.type,
            state=state or update.state, time=self._deps.clock.wall(),
            message=message or update.message))

    # -- notification ------------------------------------------------------------------
    def _set_runtime(self, runtime: JobRuntime) -> None:
        self._runtime = runtime
        self._tell_job()

    def _tell_job(self) -> None:
        for fn in self._deps.listeners.job:
            fn(self)


# -- jobs not (yet) cached --------------------------------------------------------------
def _as_kept(kept: Mapping[int, _Kept], instance: int) -> TaskChange:
    """The change storing `instance`'s kept runtime as it is cached (None once it is not
    kept: another writer stored it meanwhile)."""

    def change(rt: TaskRuntime) -> TaskRuntime | None:
        return rt if instance in kept else None

    return change


def create_job(deps: JobDeps, job_id: str, spec: JobSpec, runtime: JobRuntime,
               workflow: UpdateInfo | None = None) -> CachedJob:
    """Store a new job (config version 1 and its runtime, AlreadyExists if the id is taken)
    and return it, not yet cached (`JobCache.create` caches it, then has it evaluated).

    With `workflow` (a rolling create) the job starts with that workflow, which adds its
    instances batch by batch; both are stored before the job becomes visible, so the job
    engine never creates the instances itself first.
    """
    # One unit: a create that fails leaves no task config behind (storage contract).
    stored = deps.store.create_job_with_tasks(job_id, spec, runtime, spec.default_task,
                                              dict(spec.instance_tasks))
    job = CachedJob(deps, job_id, spec, stored)
    if workflow is not None:
        update = job.create_workflow(workflow)
        job.change_runtime(lambda rt: dataclasses.replace(
            rt, workflow_version=rt.workflow_version + 1), workflow=update)
    return job


def delete_job(store: Store, job_id: str) -> None:
    """Remove every trace of a job from storage (untrack it first if it is cached)."""
    store.delete_job(job_id)


def drop_active(store: Store, job_id: str) -> None:
    """Remove an id from the active set without loading it (it has no runtime)."""
    store.delete_active_job(job_id)


def delete_history(store: Store, job_id: str, instance: int, from_run: int, to_run: int) -> None:
    """Delete the pod events of runs [from_run, to_run) of an instance."""
    store.delete_pod_events(job_id, instance, from_run, to_run)
