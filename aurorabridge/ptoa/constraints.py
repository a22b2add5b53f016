"""A Peloton pod constraint read back as Aurora constraints (inverse of atop.constraints).

Used only for pods without a stored TaskConfig (jobs not written by a bridge).
Shapes that did not come from an Aurora constraint are skipped.
"""

from __future__ import annotations

from typing import Any

from aurorabridge.labels import JOB_KEY
from aurorabridge.thrift_api import api
from peloton.api.gen.peloton.api.v1alpha.pod import pod_pb2

_LC = pod_pb2.LabelConstraint
_C = pod_pb2.Constraint
_HOST, _POD = _LC.LABEL_CONSTRAINT_KIND_HOST, _LC.LABEL_CONSTRAINT_KIND_POD
_LESS, _EQUAL = _LC.LABEL_CONSTRAINT_CONDITION_LESS_THAN, _LC.LABEL_CONSTRAINT_CONDITION_EQUAL


def _leaves(c: Any) -> list[Any]:
    if c.type == _C.CONSTRAINT_TYPE_LABEL:
        return [c.label_constraint]
    if c.type == _C.CONSTRAINT_TYPE_AND:
        return [lc for sub in c.and_constraint.constraints for lc in _leaves(sub)]
    if c.type == _C.CONSTRAINT_TYPE_OR:
        return [lc for sub in c.or_constraint.constraints for lc in _leaves(sub)]
    return []


def aurora_constraints(spec: Any) -> list[Any]:
    """Aurora Constraints equivalent to `spec.constraint`."""
    if not spec.HasField("constraint"):
        return []
    out: list[Any] = []
    values: dict[tuple[str, bool], list[str]] = {}
    for lc in _leaves(spec.constraint):
        if lc.kind == _POD and lc.label.key == JOB_KEY:
            out.append(api.Constraint(name="host", constraint=api.TaskConstraint(
                limit=api.LimitConstraint(limit=lc.requirement))))
        elif lc.kind == _HOST and lc.condition == _EQUAL:
            values.setdefault((lc.label.key, False), []).append(lc.label.value)
        elif lc.kind == _HOST and lc.requirement == 1 and lc.condition == _LESS:
            values.setdefault((lc.label.key, True), []).append(lc.label.value)
    for (name, negated), vals in sorted(values.items()):
        out.append(api.Constraint(name=name, constraint=api.TaskConstraint(
            value=api.ValueConstraint(negated=negated, values=sorted(vals)))))
    return out
