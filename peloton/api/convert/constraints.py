"""Placement constraint trees: v0 task.Constraint and v1alpha pod.Constraint <-> core.

The two wire shapes are the same tree under different names (`labelConstraint`
vs `label_constraint`, kind TASK vs POD), so one walker reads both through a
small table of names.  Unlike Peloton, which evaluates an unknown constraint
type as "no match" at placement time, an incomplete tree is rejected when the
job is submitted, naming the node at fault.

Our extension for per-domain limits (Aurora's `limit` on any attribute; the
wire has no field for a domain): a TASK / POD leaf whose label key is
`peloton.limit-per/<attribute>|<label key>` is the core DOMAIN leaf "fewer
than N tasks with label <label key>=<value> per value of host attribute
<attribute>" (LESS_THAN only), and is written back the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from peloton.api.gen.peloton.api.v0.task import task_pb2
from peloton.api.gen.peloton.api.v1alpha.pod import pod_pb2
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

#: Deeper trees are refused (they are a mistake, and would exhaust the recursion limit).
MAX_DEPTH = 32
#: Label-key prefix of a per-domain limit leaf (see the module docstring).
DOMAIN_PREFIX = "peloton.limit-per/"


def domain_label_key(attribute: str, label_key: str) -> str:
    """The wire label key of a DOMAIN leaf limiting tasks with `label_key` per `attribute` value."""
    return f"{DOMAIN_PREFIX}{attribute}|{label_key}"


def _domain_leaf(kind: LabelKind, condition: Condition, label: Label, requirement: int,
                 path: str) -> LabelConstraint:
    attribute, _, key = label.key[len(DOMAIN_PREFIX):].rpartition("|")
    if kind is not LabelKind.TASK or not attribute or not key or condition is not Condition.LESS_THAN:
        raise InvalidArgument(f"{path}.label.key: a {DOMAIN_PREFIX}<attribute>|<label key> limit must "
                              "be a TASK/POD leaf with condition LESS_THAN", field=f"{path}.label.key")
    return LabelConstraint(LabelKind.DOMAIN, condition, Label(key, label.value), requirement,
                           domain=attribute)


@dataclass(frozen=True, slots=True)
class _Dialect:
    label_type: int
    and_type: int
    or_type: int
    label_field: str
    and_field: str
    or_field: str
    kinds: dict[int, LabelKind]
    conditions: dict[int, Condition]


_V0 = _Dialect(
    label_type=task_pb2.Constraint.LABEL_CONSTRAINT, and_type=task_pb2.Constraint.AND_CONSTRAINT,
    or_type=task_pb2.Constraint.OR_CONSTRAINT, label_field="labelConstraint",
    and_field="andConstraint", or_field="orConstraint",
    kinds={task_pb2.LabelConstraint.TASK: LabelKind.TASK,
           task_pb2.LabelConstraint.HOST: LabelKind.HOST},
    conditions={task_pb2.LabelConstraint.CONDITION_LESS_THAN: Condition.LESS_THAN,
                task_pb2.LabelConstraint.CONDITION_EQUAL: Condition.EQUAL,
                task_pb2.LabelConstraint.CONDITION_GREATER_THAN: Condition.GREATER_THAN})

_V1 = _Dialect(
    label_type=pod_pb2.Constraint.CONSTRAINT_TYPE_LABEL,
    and_type=pod_pb2.Constraint.CONSTRAINT_TYPE_AND, or_type=pod_pb2.Constraint.CONSTRAINT_TYPE_OR,
    label_field="label_constraint", and_field="and_constraint", or_field="or_constraint",
    kinds={pod_pb2.LabelConstraint.LABEL_CONSTRAINT_KIND_POD: LabelKind.TASK,
           pod_pb2.LabelConstraint.LABEL_CONSTRAINT_KIND_HOST: LabelKind.HOST},
    conditions={
        pod_pb2.LabelConstraint.LABEL_CONSTRAINT_CONDITION_LESS_THAN: Condition.LESS_THAN,
        pod_pb2.LabelConstraint.LABEL_CONSTRAINT_CONDITION_EQUAL: Condition.EQUAL,
        pod_pb2.LabelConstraint.LABEL_CONSTRAINT_CONDITION_GREATER_THAN: Condition.GREATER_THAN})


def _read(node: Any, d: _Dialect, path: str, depth: int) -> Constraint:
    # `node` is a v0 or v1 Constraint message; the dialect names its fields.
    if depth > MAX_DEPTH:
        raise InvalidArgument(f"{path}: constraint tree deeper than {MAX_DEPTH}", field=path)
    if node.type == d.label_type:
        leaf_path = f"{path}.{d.label_field}"
        if not node.HasField(d.label_field):
            raise InvalidArgument(f"{leaf_path} is required for a label constraint", field=leaf_path)
        leaf = getattr(node, d.label_field)
        if leaf.kind not in d.kinds:
            raise InvalidArgument(f"{leaf_path}.kind must be TASK/POD or HOST", field=f"{leaf_path}.kind")
        if leaf.condition not in d.conditions:
            raise InvalidArgument(f"{leaf_path}.condition must be LESS_THAN, EQUAL or GREATER_THAN",
                                  field=f"{leaf_path}.condition")
        if not leaf.label.key:
            raise InvalidArgument(f"{leaf_path}.label.key is required", field=f"{leaf_path}.label.key")
        label = Label(leaf.label.key, leaf.label.value)
        if label.key.startswith(DOMAIN_PREFIX):
            return _domain_leaf(d.kinds[leaf.kind], d.conditions[leaf.condition], label,
                                leaf.requirement, leaf_path)
        return LabelConstraint(d.kinds[leaf.kind], d.conditions[leaf.condition], label, leaf.requirement)
    if node.type in (d.and_type, d.or_type):
        name = d.and_field if node.type == d.and_type else d.or_field
        children = getattr(node, name).constraints
        if not children:
            raise InvalidArgument(f"{path}.{name}.constraints must not be empty",
                                  field=f"{path}.{name}.constraints")
        kids = tuple(_read(child, d, f"{path}.{name}.constraints[{i}]", depth + 1)
                     for i, child in enumerate(children))
        return AndConstraint(kids) if node.type == d.and_type else OrConstraint(kids)
    raise InvalidArgument(f"{path}.type must be a label, AND or OR constraint", field=f"{path}.type")


def _write(constraint: Constraint, out: Any, d: _Dialect) -> None:
    if isinstance(constraint, LabelConstraint):
        out.type = d.label_type
        leaf = getattr(out, d.label_field)
        domain = constraint.kind is LabelKind.DOMAIN
        kind = LabelKind.TASK if domain else constraint.kind
        leaf.kind = next(k for k, v in d.kinds.items() if v is kind)
        leaf.condition = next(k for k, v in d.conditions.items() if v is constraint.condition)
        leaf.label.key = (domain_label_key(constraint.domain, constraint.label.key) if domain
                          else constraint.label.key)
        leaf.label.value = constraint.label.value
        leaf.requirement = constraint.requirement
        return
    is_and = isinstance(constraint, AndConstraint)
    out.type = d.and_type if is_and else d.or_type
    children = getattr(out, d.and_field if is_and else d.or_field).constraints
    for child in constraint.children:
        _write(child, children.add(), d)


def constraint_from_v0(msg: task_pb2.Constraint, field: str = "constraint") -> Constraint:
    """A v0 task.Constraint tree -> core constraint (InvalidArgument names the bad node)."""
    return _read(msg, _V0, field, 0)


def constraint_to_v0(constraint: Constraint) -> task_pb2.Constraint:
    """A core constraint -> v0 task.Constraint."""
    out = task_pb2.Constraint()
    _write(constraint, out, _V0)
    return out


def constraint_from_v1(msg: pod_pb2.Constraint, field: str = "constraint") -> Constraint:
    """A v1alpha pod.Constraint tree -> core constraint (kind POD is the core's TASK)."""
    return _read(msg, _V1, field, 0)


def constraint_to_v1(constraint: Constraint) -> pod_pb2.Constraint:
    """A core constraint -> v1alpha pod.Constraint."""
    out = pod_pb2.Constraint()
    _write(constraint, out, _V1)
    return out
