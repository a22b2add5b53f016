"""Placement constraints, as Peloton expresses them.

A constraint is a tree: leaves compare a *count of labels* with a
requirement, inner nodes are AND / OR.  A HOST leaf counts the host's own
attributes equal to the label (so `zone=a EQUAL 1` means "host is in zone
a"); a TASK leaf counts tasks already on (or being placed on) the host
that carry the label (so `job=<id> LESS_THAN 1` is "at most one instance of
this job per host").  When a leaf of the other kind is evaluated it is "not
applicable" and neutral inside AND / OR, exactly as Peloton evaluates them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from peloton.core.errors import InvalidArgument


@dataclass(frozen=True, slots=True, order=True)
class Label:
    """A key/value pair attached to a job, task or host."""

    key: str
    value: str = ""

    def __str__(self) -> str:
        return f"{self.key}={self.value}"


class LabelKind(StrEnum):
    """Whose labels a leaf counts."""

    TASK = "TASK"
    HOST = "HOST"


class Condition(StrEnum):
    """How the label count is compared with the requirement."""

    LESS_THAN = "LESS_THAN"
    EQUAL = "EQUAL"
    GREATER_THAN = "GREATER_THAN"


@dataclass(frozen=True, slots=True)
class LabelConstraint:
    """count(label on host or its tasks) <condition> requirement."""

    kind: LabelKind
    condition: Condition
    label: Label
    requirement: int

    def __post_init__(self) -> None:
        if self.requirement < 0:
            raise InvalidArgument("label constraint requirement must be >= 0",
                                  field="constraint.requirement")

    def holds(self, count: int) -> bool:
        """Apply the comparison to an observed label count."""
        if self.condition is Condition.LESS_THAN:
            return count < self.requirement
        if self.condition is Condition.EQUAL:
            return count == self.requirement
        return count > self.requirement

    def __str__(self) -> str:
        op = {"LESS_THAN": "<", "EQUAL": "==", "GREATER_THAN": ">"}[self.condition.value]
        return f"{self.kind.value.lower()}:{self.label} {op} {self.requirement}"


@dataclass(frozen=True, slots=True)
class AndConstraint:
    """Every child must hold."""

    children: tuple[Constraint, ...]

    def __str__(self) -> str:
        return "(" + " AND ".join(str(c) for c in self.children) + ")"


@dataclass(frozen=True, slots=True)
class OrConstraint:
    """At least one child must hold."""

    children: tuple[Constraint, ...]

    def __str__(self) -> str:
        return "(" + " OR ".join(str(c) for c in self.children) + ")"


Constraint = LabelConstraint | AndConstraint | OrConstraint


def leaves(constraint: Constraint | None) -> list[LabelConstraint]:
    """All label leaves of a constraint tree, depth first."""
    if constraint is None:
        return []
    if isinstance(constraint, LabelConstraint):
        return [constraint]
    out: list[LabelConstraint] = []
    for child in constraint.children:
        out.extend(leaves(child))
    return out
