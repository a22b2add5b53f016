"""Core scheduling values <-> pelotonpy.internal.sched messages: the resource manager's side.

The private services (proto/pelotonpy/internal/) mirror the core dataclasses
one to one, so every function here is a plain field copy; they are named
by direction like the public converters (`*_to_pb` writes a message,
`*_from_pb` reads one).  Core enums travel as their values; a value this
process does not know is refused (InvalidArgument naming the field), never
guessed.

A job's tasks share one `PlacementNeeds` object and the resource manager's
memory budget relies on that sharing (records.py), so needs travel in a
table (`NeedsTable` when writing, `needs_from_pb` when reading) and each
TaskRequest names its entry: the receiver ends up sharing objects exactly
where the sender did.

The calls carry a thousand tasks or so each way, so the hot ones have batch forms that
write into the reply's repeated field in place (`gangs_into`, `placements_into`,
`rm_tasks_into`): a message built apart is copied again when it joins its parent, which
made the resource manager's DequeueGangs reply ~5 us a task to encode (~2 in place).
Decoders build the frozen values without their `__init__` (core/model/evolve.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from enum import StrEnum
from sys import intern
from typing import TypeVar

from google.protobuf.internal.containers import RepeatedCompositeFieldContainer as Repeated

from peloton.api.gen.pelotonpy.internal.sched import sched_pb2 as pb
from peloton.core.errors import InvalidArgument
from peloton.core.model.constraints import (
    AndConstraint,
    Condition,
    Constraint,
    Label,
    LabelConstraint,
    LabelKind,
    OrConstraint,
)
from peloton.core.model.evolve import constructor
from peloton.core.model.ids import TaskId
from peloton.core.model.resources import Resources
from peloton.core.model.sched import (
    EnqueueFailure,
    PlacedTask,
    Placement,
    PlacementFailure,
    PlacementGang,
    Victim,
    VictimReason,
)
from peloton.core.partitions import PartitionSet
from peloton.core.placement.request import GangRequest, PlacementNeeds, Strategy, TaskRequest
from peloton.core.respool.records import RmTask

E = TypeVar("E", bound=StrEnum)

_new_request = constructor(TaskRequest)
_new_rm_task = constructor(RmTask)
_new_placed_task = constructor(PlacedTask)
_new_placement = constructor(Placement)
_new_gang = constructor(PlacementGang)
_new_gang_request = constructor(GangRequest)


def enum_from_pb(kind: type[E], value: str, field: str) -> E:
    """A core enum from its value; InvalidArgument naming `field` if unknown."""
    try:
        return kind(value)
    except ValueError:
        raise InvalidArgument(f"{field}: unknown {kind.__name__} {value!r}", field=field) from None


# -- small values ---------------------------------------------------------------------------
def resources_to_pb(r: Resources) -> pb.Resources:
    """Resources -> message."""
    return pb.Resources(cpu=r.cpu, mem_mb=r.mem_mb, disk_mb=r.disk_mb, gpu=r.gpu)


def resources_from_pb(m: pb.Resources) -> Resources:
    """Message -> Resources."""
    return Resources(m.cpu, m.mem_mb, m.disk_mb, m.gpu)


def labels_to_pb(labels: Iterable[Label]) -> list[pb.Label]:
    """Labels -> messages."""
    return [pb.Label(key=lb.key, value=lb.value) for lb in labels]


def labels_from_pb(msgs: Iterable[pb.Label]) -> tuple[Label, ...]:
    """Messages -> labels."""
    return tuple(Label(m.key, m.value) for m in msgs)


def task_id_to_pb(task_id: TaskId) -> pb.TaskId:
    """TaskId -> message."""
    return pb.TaskId(job_id=task_id.job_id, instance=task_id.instance)


def task_id_from_pb(m: pb.TaskId) -> TaskId:
    """Message -> TaskId."""
    return TaskId(m.job_id, m.instance)


# -- constraints ---------------------------------------------------------------------------
def constraint_to_pb(c: Constraint) -> pb.Constraint:
    """A constraint tree -> message."""
    if isinstance(c, LabelConstraint):
        return pb.Constraint(label=pb.Constraint.LabelLeaf(
            kind=c.kind.value, condition=c.condition.value,
            label=pb.Label(key=c.label.key, value=c.label.value), requirement=c.requirement,
            domain=c.domain))
    children = pb.Constraint.Children(children=[constraint_to_pb(x) for x in c.children])
    if isinstance(c, AndConstraint):
        return pb.Constraint(all_of=children)
    return pb.Constraint(any_of=children)


def constraint_from_pb(m: pb.Constraint) -> Constraint:
    """Message -> constraint tree."""
    node = m.WhichOneof("node")
    if node == "label":
        leaf = m.label
        return LabelConstraint(enum_from_pb(LabelKind, leaf.kind, "constraint.kind"),
                               enum_from_pb(Condition, leaf.condition, "constraint.condition"),
                               Label(leaf.label.key, leaf.label.value), leaf.requirement,
                               domain=leaf.domain)
    if node == "all_of":
        return AndConstraint(tuple(constraint_from_pb(x) for x in m.all_of.children))
    if node == "any_of":
        return OrConstraint(tuple(constraint_from_pb(x) for x in m.any_of.children))
    raise InvalidArgument("constraint: empty node", field="constraint")


# -- placement needs and requests ------------------------------------------------------------
class NeedsTable:
    """Collects distinct needs values while tasks are written; `messages` is the table."""

    def __init__(self) -> None:
        self._index: dict[int, int] = {}  # id(needs) -> position (objects live as long as we do)
        self._keep: list[PlacementNeeds] = []
        self.messages: list[pb.PlacementNeeds] = []

    def ref(self, needs: PlacementNeeds) -> int:
        """The table position of `needs`, adding it on first sight."""
        pos = self._index.get(id(needs))
        if pos is None:
            pos = self._index[id(needs)] = len(self.messages)
            self._keep.append(needs)
            msg = pb.PlacementNeeds(resources=resources_to_pb(needs.resources), ports=needs.ports,
                                    revocable=needs.revocable, strategy=needs.strategy.value)
            if needs.constraint is not None:
                msg.constraint.CopyFrom(constraint_to_pb(needs.constraint))
            self.messages.append(msg)
        return pos


def needs_from_pb(msgs: Sequence[pb.PlacementNeeds]) -> list[PlacementNeeds]:
    """A needs table -> one shared PlacementNeeds per entry."""
    return [PlacementNeeds(resources_from_pb(m.resources), m.ports, m.revocable,
                           constraint_from_pb(m.constraint) if m.HasField("constraint") else None,
                           enum_from_pb(Strategy, m.strategy, "needs.strategy")) for m in msgs]


def request_to_pb(r: TaskRequest, table: NeedsTable) -> pb.TaskRequest:
    """TaskRequest -> message (its needs go to `table`)."""
    msg = pb.TaskRequest()
    _request_into(msg, r, table)
    return msg


def _request_into(msg: pb.TaskRequest, r: TaskRequest, table: NeedsTable) -> None:
    """Write `r` into the empty message `msg`, in place."""
    tid = msg.task_id
    tid.job_id, tid.instance = r.task_id
    msg.needs = table.ref(r.needs)
    if r.labels:
        msg.labels.extend(labels_to_pb(r.labels))
    msg.desired_host = r.desired_host
    msg.desired_host_only = r.desired_host_only


def request_from_pb(m: pb.TaskRequest, needs: Sequence[PlacementNeeds]) -> TaskRequest:
    """Message -> TaskRequest, its needs taken from the decoded table."""
    if m.needs >= len(needs):
        raise InvalidArgument(f"task {m.task_id.job_id}-{m.task_id.instance}: needs index "
                              f"{m.needs} outside a table of {len(needs)}", field="needs")
    tid = m.task_id
    # Every task of a job names the same job id, and each read of the message's field makes
    # a new 36-character string: one shared copy saves ~85 bytes a task held (the resource
    # manager holds every pending task of the cluster).
    return _new_request(TaskId(intern(tid.job_id), tid.instance), needs[m.needs],
                        labels_from_pb(m.labels) if m.labels else (), m.desired_host,
                        m.desired_host_only)


def rm_task_to_pb(t: RmTask, table: NeedsTable) -> pb.RmTask:
    """RmTask -> message."""
    msg = pb.RmTask(run_id=t.run_id, priority=t.priority, preemptible=t.preemptible,
                    controller=t.controller)
    _request_into(msg.request, t.request, table)
    return msg


def rm_tasks_into(out: Repeated[pb.RmTask], tasks: Iterable[RmTask], table: NeedsTable) -> None:
    """Append each RmTask to the repeated field `out` as `rm_task_to_pb` writes it, in place."""
    add = out.add
    for t in tasks:
        _request_into(add(run_id=t.run_id, priority=t.priority, preemptible=t.preemptible,
                          controller=t.controller).request, t.request, table)


def rm_task_from_pb(m: pb.RmTask, needs: Sequence[PlacementNeeds]) -> RmTask:
    """Message -> RmTask."""
    return _new_rm_task(request_from_pb(m.request, needs), m.run_id, m.priority, m.preemptible,
                        m.controller)


def gang_to_pb(g: PlacementGang, table: NeedsTable) -> pb.PlacementGang:
    """PlacementGang -> message."""
    msg = pb.PlacementGang(run_ids=g.run_ids, pool_id=g.pool_id)
    add = msg.tasks.add
    for t in g.gang.tasks:
        _request_into(add(), t, table)
    return msg


def gangs_into(out: Repeated[pb.PlacementGang], gangs: Iterable[PlacementGang],
               table: NeedsTable) -> None:
    """Append each PlacementGang to the repeated field `out` as `gang_to_pb` writes it, in
    place."""
    add = out.add
    for g in gangs:
        tasks_add = add(run_ids=g.run_ids, pool_id=g.pool_id).tasks.add
        for t in g.gang.tasks:
            _request_into(tasks_add(), t, table)


def gang_from_pb(m: pb.PlacementGang, needs: Sequence[PlacementNeeds]) -> PlacementGang:
    """Message -> PlacementGang."""
    return _new_gang(_new_gang_request(tuple([request_from_pb(t, needs) for t in m.tasks])),
                     tuple(m.run_ids), m.pool_id)


# -- placements, failures, victims --------------------------------------------------------------
def placement_to_pb(p: Placement) -> pb.Placement:
    """Placement -> message."""
    msg = pb.Placement(hostname=p.hostname, agent_id=p.agent_id)
    _placed_into(msg.tasks, p.tasks)
    return msg


def placements_into(out: Repeated[pb.Placement], placements: Iterable[Placement]) -> None:
    """Append each Placement to the repeated field `out` as `placement_to_pb` writes it, in
    place."""
    add = out.add
    for p in placements:
        _placed_into(add(hostname=p.hostname, agent_id=p.agent_id).tasks, p.tasks)


def _placed_into(out: Repeated[pb.PlacedTask], tasks: Iterable[PlacedTask]) -> None:
    add = out.add
    for t in tasks:
        tid = add(run_id=t.run_id, ports=t.ports).task_id
        tid.job_id, tid.instance = t.task_id


def placement_from_pb(m: pb.Placement) -> Placement:
    """Message -> Placement."""
    return _new_placement(m.hostname, m.agent_id, tuple([
        _new_placed_task(TaskId(t.task_id.job_id, t.task_id.instance), t.run_id,
                         tuple(t.ports)) for t in m.tasks]))


def placement_failure_to_pb(f: PlacementFailure) -> pb.PlacementFailure:
    """PlacementFailure -> message."""
    return pb.PlacementFailure(task_id=task_id_to_pb(f.task_id), run_id=f.run_id, reason=f.reason)


def placement_failure_from_pb(m: pb.PlacementFailure) -> PlacementFailure:
    """Message -> PlacementFailure."""
    return PlacementFailure(task_id_from_pb(m.task_id), m.run_id, m.reason)


def victim_to_pb(v: Victim) -> pb.Victim:
    """Victim -> message."""
    return pb.Victim(task_id=task_id_to_pb(v.task_id), run_id=v.run_id, reason=v.reason.value,
                     hostname=v.hostname)


def victim_from_pb(m: pb.Victim) -> Victim:
    """Message -> Victim."""
    return Victim(task_id_from_pb(m.task_id), m.run_id,
                  enum_from_pb(VictimReason, m.reason, "victim.reason"), m.hostname)


def enqueue_failure_to_pb(f: EnqueueFailure) -> pb.EnqueueFailure:
    """EnqueueFailure -> message."""
    return pb.EnqueueFailure(task_id=task_id_to_pb(f.task_id), reason=f.reason)


def enqueue_failure_from_pb(m: pb.EnqueueFailure) -> EnqueueFailure:
    """Message -> EnqueueFailure."""
    return EnqueueFailure(task_id_from_pb(m.task_id), m.reason)


def partitions_to_pb(partitions: PartitionSet) -> pb.PartitionSet:
    """PartitionSet -> message."""
    return pb.PartitionSet(count=partitions.count, held=sorted(partitions.held))


def partitions_from_pb(msg: pb.PartitionSet) -> PartitionSet:
    """Message -> PartitionSet (InvalidArgument "partitions" for a partition out of range)."""
    return PartitionSet(msg.count, frozenset(msg.held))
