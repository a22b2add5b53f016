"""Could any host ever hold this task?  The check behind "refuse what can never run".

Placement asks "which host has room *now*"; this asks "which UP host could
hold the task if it were empty": the host's total capacity against the
task's resources, and its labels against the task's HOST constraints, with
the same static rules placement applies (hosts labelled `peloton/exclusive`
take only tasks that name that label; GPU hosts are kept for GPU tasks).
TASK constraints ("at most one per host") depend on what else runs and are
not judged here.  Like Peloton's constraint evaluator, every host also
carries the implicit label `hostname=<its name>`.

The job manager runs it at create and update (refusing with
InvalidArgument unless the job asks to be queued anyway), and when it
explains a waiting task (a cluster that shrank after admission makes a
task "unplaceable").  A cluster with no UP host at all is not judged: it is
starting, or every host is in maintenance, and the task waits.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from peloton.core import words
from peloton.core.model.constraints import (
    Constraint,
    Label,
    LabelKind,
    Verdict,
    evaluate,
    explain_mismatch,
    has_kind,
    names_host_label_key,
)
from peloton.core.model.host import EXCLUSIVE_ATTRIBUTE
from peloton.core.model.job import JobSpec
from peloton.core.model.resources import EPSILON, KINDS, ResourceKind, Resources
from peloton.core.model.task import TaskSpec
from peloton.core.respool.records import gang_instances

#: The label that asks for a job to be queued even though no host could hold it now
#: (for hosts that will join later, or a pool limit that will be raised).  On the job,
#: or on a task; Aurora clients set it as task Metadata (the bridge prefixes it).
QUEUE_ANYWAY = "peloton/queue-anyway"
_AURORA_METADATA = "org.apache.aurora.metadata."
#: The implicit host label every host carries (Peloton's common.HostNameKey).
HOSTNAME_KEY = "hostname"
#: Resource kinds in the order a refusal names them (GPUs first, as placement checks).
_ORDER = (ResourceKind.GPU, ResourceKind.CPU, ResourceKind.MEMORY, ResourceKind.DISK)


@dataclass(frozen=True, slots=True)
class HostShape:
    """What a host could ever offer one task: its total capacity and labels, if it is UP."""

    hostname: str
    capacity: Resources
    labels: tuple[Label, ...] = ()
    up: bool = True


@dataclass(frozen=True, slots=True)
class Infeasible:
    """Why no host (or pool) could ever hold a task: a sentence and the field it is about."""

    message: str
    field: str


def asks_to_queue(labels: Iterable[Label]) -> bool:
    """The labels carry `peloton/queue-anyway=true` (directly or as Aurora Metadata)."""
    for label in labels:
        key = label.key.removeprefix(_AURORA_METADATA)
        if key == QUEUE_ANYWAY and label.value.strip().lower() in ("true", "1", "yes", ""):
            return True
    return False


def job_asks_to_queue(spec: JobSpec) -> bool:
    """The job, or any of its task configs, asks to be queued anyway."""
    return (asks_to_queue(spec.labels) or asks_to_queue(spec.default_task.labels)
            or any(asks_to_queue(t.labels) for t in spec.instance_tasks.values()))


def distinct_tasks(spec: JobSpec) -> list[tuple[int, TaskSpec]]:
    """(first instance, spec) for each distinct task config the job's instances run."""
    out: list[tuple[int, TaskSpec]] = []

    def add(inst: int, task: TaskSpec) -> None:
        if all(task != seen for _, seen in out):
            out.append((inst, task))

    overridden = sorted(i for i in spec.instance_tasks if 0 <= i < spec.instance_count)
    if len(overridden) < spec.instance_count:
        # The first instance without its own config runs the default one.
        first = next(i for i, o in enumerate([*overridden, spec.instance_count]) if i != o)
        add(first, spec.default_task)
    for inst in overridden:
        add(inst, spec.instance_tasks[inst])
    return out


def admission_need(spec: JobSpec) -> Resources:
    """The most one admission of this job asks of its pool: its largest gang, or task."""
    instances = range(spec.instance_count)
    best = Resources()
    for gang in gang_instances(instances, job_type=spec.type,
                               revocable=spec.default_task.revocable,
                               minimum_running_instances=spec.sla.minimum_running_instances):
        need = Resources()
        for inst in gang:
            need = need + spec.task_spec(inst).footprint
        best = best.max(need)
        if len(gang) == 1 and not spec.instance_tasks:
            break  # every other gang is the same single default task
    return best


def over_limit(need: Resources, limit: Resources, pool_path: str) -> Infeasible | None:
    """Why `need` could never be admitted under a pool's effective `limit`, if it could not."""
    for kind in _ORDER:
        if need.get(kind) > limit.get(kind) + EPSILON:
            return Infeasible(
                f"it asks for {words.amount(kind, need.get(kind))} at once, more than pool "
                f"{pool_path} may ever use ({words.amount(kind, limit.get(kind))}, its limit)",
                f"resources.{kind.value}")
    return None


def _labels(host: HostShape) -> dict[Label, int]:
    counts: dict[Label, int] = {}
    for label in host.labels:
        counts[label] = counts.get(label, 0) + 1
    implicit = Label(HOSTNAME_KEY, host.hostname)
    counts[implicit] = max(counts.get(implicit, 0), 1)
    return counts


def _host_constraint_ok(constraint: Constraint | None, counts: dict[Label, int]) -> bool:
    if constraint is None or not has_kind(constraint, LabelKind.HOST):
        return True
    return evaluate(constraint, LabelKind.HOST,
                    lambda lb: counts.get(lb, 0)) is not Verdict.MISMATCH


def never_fits(task: TaskSpec, hosts: Sequence[HostShape]) -> Infeasible | None:
    """Why no UP host among `hosts` could ever hold `task`, or None if one could.

    None too when no host is UP (the cluster is starting or in maintenance).
    """
    up = [h for h in hosts if h.up]
    if not up:
        return None
    res = task.footprint
    constraint = task.constraint
    names_exclusive = names_host_label_key(constraint, EXCLUSIVE_ATTRIBUTE)
    matching: list[HostShape] = []
    for host in up:
        counts = _labels(host)
        if not names_exclusive and any(lb.key == EXCLUSIVE_ATTRIBUTE for lb in counts):
            continue
        if not _host_constraint_ok(constraint, counts):
            continue
        matching.append(host)
    if not matching:
        if constraint is not None and has_kind(constraint, LabelKind.HOST):
            culprit = explain_mismatch(constraint, LabelKind.HOST,
                                       lambda lb: _labels(up[0]).get(lb, 0))
            return Infeasible(f"no UP host {words.met(culprit)} "
                              f"({words.plural(len(up), 'host')} checked)", "constraint")
        return Infeasible(f"every UP host is labelled {EXCLUSIVE_ATTRIBUTE} and the task's "
                          f"constraint does not name that label "
                          f"({words.plural(len(up), 'host')} checked)", "constraint")
    if res.gpu <= EPSILON:
        plain = [h for h in matching if h.capacity.gpu <= EPSILON]
        if not plain:
            return Infeasible("every UP host that matches has GPUs, which are kept for tasks "
                              "that ask for GPUs", "resources.gpu")
        matching = plain
    if any(res.fits_in(h.capacity) for h in matching):
        return None
    for kind in _ORDER:
        largest = max(matching, key=lambda h: (h.capacity.get(kind), h.hostname))
        if res.get(kind) > largest.capacity.get(kind) + EPSILON:
            return Infeasible(
                f"it asks for {words.amount(kind, res.get(kind))}; the largest UP host, "
                f"{largest.hostname}, has {words.amount(kind, largest.capacity.get(kind))} "
                f"in all ({words.plural(len(matching), 'host')} checked)",
                f"resources.{kind.value}")
    # Each kind fits some host, but no host has all of them together.
    largest = max(matching, key=lambda h: (h.capacity.cpu, h.capacity.mem_mb, h.hostname))
    return Infeasible(
        f"no UP host has {words.resources(res)} together; the largest, {largest.hostname}, "
        f"has {words.resources(largest.capacity)} "
        f"({words.plural(len(matching), 'host')} checked)",
        f"resources.{KINDS[0].value}")


def job_never_fits(spec: JobSpec, hosts: Sequence[HostShape]) -> Infeasible | None:
    """The first task config of the job that no UP host could ever hold, with its instance."""
    for inst, task in distinct_tasks(spec):
        why = never_fits(task, hosts)
        if why is not None:
            which = "its tasks" if not spec.instance_tasks else f"instance {inst}"
            return Infeasible(f"{which} can never run: {why.message}", why.field)
    return None
