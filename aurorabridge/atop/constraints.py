"""Aurora placement constraints as one Peloton pod constraint.

* `limit` on attribute `host` (at most N tasks of this job per host) ->
  "fewer than N pods labelled aurora_job_key=<key> on the host" (pod-label
  LESS_THAN), as Peloton's bridge does.
* `limit` on any other attribute (rack, zone: at most N tasks of this job per
  value of the attribute) -> our per-domain limit leaf (a pod-label LESS_THAN
  whose label key is `peloton.limit-per/<attribute>|aurora_job_key`, see
  peloton/api/convert/constraints.py), which the placement engine's
  DOMAIN-limit filter enforces over all hosts sharing the value; hosts
  without the attribute are not used (Aurora vetoes them too).  Peloton's
  bridge rejected these.
* `value` (host attribute in a set) -> OR of host-label EQUAL constraints.
* negated `value` (host attribute in none of the values) -> AND of host-label
  "fewer than 1" constraints.  Peloton's bridge rejected these; a LESS_THAN 1
  label constraint says exactly "the host lacks this label".
* several constraints -> AND.
Values are sorted, so equal configs yield equal specs (and no spurious update diffs).
"""

from __future__ import annotations

from typing import Any

from aurorabridge.labels import label
from peloton.api.convert.constraints import domain_label_key
from peloton.api.gen.peloton.api.v1alpha.pod import pod_pb2
from peloton.core.errors import InvalidArgument

HOST_ATTRIBUTE = "host"
_LC = pod_pb2.LabelConstraint
_C = pod_pb2.Constraint
_HOST, _POD = _LC.LABEL_CONSTRAINT_KIND_HOST, _LC.LABEL_CONSTRAINT_KIND_POD
_LESS, _EQUAL = _LC.LABEL_CONSTRAINT_CONDITION_LESS_THAN, _LC.LABEL_CONSTRAINT_CONDITION_EQUAL


def _label_constraint(kind: Any, condition: Any, key: str, value: str, requirement: int) -> Any:
    return _C(type=_C.CONSTRAINT_TYPE_LABEL, label_constraint=_LC(
        kind=kind, condition=condition, label=label(key, value), requirement=requirement))


def join(constraints: list[Any], conjunction: bool) -> Any | None:
    """AND (or OR) of `constraints`; the single constraint itself; None for none."""
    if not constraints:
        return None
    if len(constraints) == 1:
        return constraints[0]
    if conjunction:
        return _C(type=_C.CONSTRAINT_TYPE_AND, and_constraint=pod_pb2.AndConstraint(constraints=constraints))
    return _C(type=_C.CONSTRAINT_TYPE_OR, or_constraint=pod_pb2.OrConstraint(constraints=constraints))


def _one(constraint: Any, job_key_label: Any) -> Any | None:
    name = constraint.name
    if not isinstance(name, str) or not name:
        raise InvalidArgument("constraint name must be a non-empty string", field="constraints")
    inner = constraint.constraint
    if inner is None or (inner.limit is None) == (inner.value is None):
        raise InvalidArgument(f"constraint {name}: set exactly one of limit or value", field="constraints")
    if inner.limit is not None:
        limit = inner.limit.limit
        if limit is None or limit <= 0:
            raise InvalidArgument(f"constraint {name}: limit must be positive", field="constraints")
        if name != HOST_ATTRIBUTE:
            return _label_constraint(_POD, _LESS, domain_label_key(name, job_key_label.key),
                                     job_key_label.value, limit)
        return _label_constraint(_POD, _LESS, job_key_label.key, job_key_label.value, limit)
    values = sorted(set(inner.value.values or ()))
    if not values or not all(isinstance(v, str) and v for v in values):
        raise InvalidArgument(f"constraint {name}: value constraints need non-empty values",
                              field="constraints")
    if inner.value.negated:
        return join([_label_constraint(_HOST, _LESS, name, v, 1) for v in values], conjunction=True)
    return join([_label_constraint(_HOST, _EQUAL, name, v, 1) for v in values], conjunction=False)


def pod_constraint(constraints: Any, job_key_label: Any) -> Any | None:
    """The Peloton constraint for a TaskConfig's `constraints` (None when there are none)."""
    ordered = sorted(constraints or (), key=lambda c: str(c.name))
    parts = [c for c in (_one(c, job_key_label) for c in ordered) if c is not None]
    return join(parts, conjunction=True)


def check_dedicated(constraints: Any, role: str) -> None:
    """Aurora's rule: a `dedicated` constraint has one value, `<role>/...` or `*/...`."""
    for c in constraints or ():
        if c.name != "dedicated":
            continue
        inner = c.constraint
        if inner is None or inner.value is None:
            raise InvalidArgument("a dedicated constraint must be of value type", field="constraints")
        values = list(inner.value.values or ())
        if len(values) != 1:
            raise InvalidArgument("a dedicated constraint must have exactly one value", field="constraints")
        owner = values[0].split("/", 1)[0]
        if owner not in ("*", role):
            raise InvalidArgument(f"only {owner} may use hosts dedicated for that role", field="constraints")
