"""Turning tasks of a job into what the resource manager queues (RmTask gangs).

Peloton's `ConvertToResMgrGangs`: instances 0..minimumRunningInstances-1
of a non-service, non-revocable job form one gang (placed all or
nothing); every other task is a gang of its own.  Tasks that share a spec
share one `PlacementNeeds` value, which keeps a million queued tasks small
and lets the placer cache its verdicts per needs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from peloton.core.model.constraints import Label
from peloton.core.model.evolve import constructor
from peloton.core.model.ids import TaskId
from peloton.core.model.job import JobSpec, PlacementStrategy
from peloton.core.model.task import TaskRuntime, TaskSpec
from peloton.core.placement.request import PlacementNeeds, Strategy, TaskRequest, job_label
from peloton.core.respool.records import RmTask
from peloton.core.states import JobType


def strategy_for(job_type: JobType,
                 placement: PlacementStrategy = PlacementStrategy.UNSET) -> Strategy:
    """The job's placementStrategy when set; else batch work is packed, long-running spread."""
    if placement is PlacementStrategy.SPREAD_JOB:
        return Strategy.SPREAD_JOB
    if placement is PlacementStrategy.PACK_HOST:
        return Strategy.PACK
    return Strategy.PACK if job_type is JobType.BATCH else Strategy.SPREAD


class NeedsCache:
    """One PlacementNeeds per distinct (needs-relevant part of a task spec, strategy).

    Keyed by value, not by the spec: an identity cache kept up to 50,000 task specs alive,
    so per-instance specs the job cache had let go (jobmgr/task_configs.py) stayed."""

    def __init__(self) -> None:
        self._by_value: dict[tuple[object, ...], PlacementNeeds] = {}

    def needs(self, job_type: JobType, spec: TaskSpec,
              placement: PlacementStrategy = PlacementStrategy.UNSET) -> PlacementNeeds:
        """The placement needs of `spec` (shared between specs that need the same)."""
        strategy = strategy_for(job_type, placement)
        key = (spec.footprint, spec.dynamic_port_count, spec.revocable, spec.constraint,
               strategy)
        needs = self._by_value.get(key)
        if needs is not None:
            return needs
        needs = PlacementNeeds(resources=spec.footprint, ports=spec.dynamic_port_count,
                               revocable=spec.revocable, constraint=spec.constraint,
                               strategy=strategy)
        if len(self._by_value) > 50_000:
            self._by_value.clear()
        self._by_value[key] = needs
        return needs


#: What an RmTask takes from its task spec alone: needs, labels, whether a desired host
#: is binding (a stateful task, a daemon instance), preemptible, controller.
_SpecPart = tuple[PlacementNeeds, tuple[Label, ...], bool, bool, bool]
#: Requests and RmTasks are built by the hundred thousand: without the frozen `__init__`.
_new_request = constructor(TaskRequest)
_new_rm_task = constructor(RmTask)


def rm_task(job_id: str, spec: JobSpec, instance: int, rt: TaskRuntime, cache: NeedsCache) -> RmTask:
    """The resource manager's view of one task run; `spec` is the config version it runs."""
    return _rm_task(job_id, spec, instance, rt,
                    _spec_part(job_id, spec, spec.task_spec(instance), cache))


def _spec_part(job_id: str, spec: JobSpec, task_spec: TaskSpec, cache: NeedsCache) -> _SpecPart:
    labels = task_spec.labels
    if spec.placement_strategy is PlacementStrategy.SPREAD_JOB:
        labels = (*labels, job_label(job_id))  # what hosts count to spread the job
    return (cache.needs(spec.type, task_spec, spec.placement_strategy), labels,
            task_spec.stateful or spec.type is JobType.DAEMON,
            spec.sla.preemptible and task_spec.preemptible, task_spec.controller)


def _rm_task(job_id: str, spec: JobSpec, instance: int, rt: TaskRuntime,
             part: _SpecPart) -> RmTask:
    needs, labels, pinned, preemptible, controller = part
    req = _new_request(TaskId(job_id, instance), needs, labels, rt.desired_host,
                       bool(rt.desired_host) and pinned)
    return _new_rm_task(req, rt.run_id, spec.sla.priority, preemptible, controller)


def gangs(job_id: str, spec: JobSpec, runtimes: Iterable[tuple[int, TaskRuntime]],
          cache: NeedsCache) -> list[Sequence[RmTask]]:
    """Gangs for the given (instance, runtime) pairs, in instance order."""
    # What depends on the task spec alone is worked out once per distinct spec (every
    # instance without an override shares the default one), not once per task.  Keyed by
    # identity; the spec is kept in the value so its id is not reused meanwhile.
    parts: dict[int, tuple[TaskSpec, _SpecPart]] = {}
    tasks = []
    for inst, rt in sorted(runtimes, key=lambda p: p[0]):
        task_spec = spec.task_spec(inst)
        got = parts.get(id(task_spec))
        if got is None:
            got = parts[id(task_spec)] = (task_spec, _spec_part(job_id, spec, task_spec, cache))
        tasks.append(_rm_task(job_id, spec, inst, rt, got[1]))
    gang_size = spec.sla.minimum_running_instances
    if (spec.type is JobType.BATCH and gang_size > 1 and not spec.sla.revocable):
        head = [t for t in tasks if t.task_id.instance < gang_size]
        rest = [t for t in tasks if t.task_id.instance >= gang_size]
        out: list[Sequence[RmTask]] = [tuple(head)] if head else []
        out.extend((t,) for t in rest)
        return out
    return [(t,) for t in tasks]
