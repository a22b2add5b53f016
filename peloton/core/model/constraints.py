"""Placement constraints, as Peloton expresses them.

A constraint is a tree: leaves compare a *count of labels* with a
requirement, inner nodes are AND / OR.  A HOST leaf counts the host's own
attributes equal to the label (so `zone=a EQUAL 1` means "host is in zone
a"); a TASK leaf counts tasks already on (or being placed on) the host
that carry the label (so `job=<id> LESS_THAN 1` is "at most one instance of
this job per host").  A DOMAIN leaf (our extension; Aurora's limit on any
attribute) counts the tasks carrying the label on every host that shares this
host's value of the host attribute `domain` (so `domain=rack, job=<id>
LESS_THAN 2` is "at most two instances of this job per rack"); a host without
that attribute does not satisfy it.  When a leaf of another kind is evaluated
it is "not applicable" and neutral inside AND / OR, exactly as Peloton
evaluates them.
"""

from __future__ import annotations

from collections.abc import Callable
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
    #: Tasks on all hosts sharing the host's value of an attribute (see the module docstring).
    DOMAIN = "DOMAIN"


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
    #: The host attribute whose value groups hosts (DOMAIN leaves only).
    domain: str = ""

    def __post_init__(self) -> None:
        if self.requirement < 0:
            raise InvalidArgument("label constraint requirement must be >= 0",
                                  field="constraint.requirement")
        if (self.kind is LabelKind.DOMAIN) != bool(self.domain):
            raise InvalidArgument("a DOMAIN label constraint (and only one) names a host attribute "
                                  "as its domain", field="constraint.domain")
        if self.kind is LabelKind.DOMAIN and self.condition is not Condition.LESS_THAN:
            raise InvalidArgument("a DOMAIN label constraint is a limit: its condition is LESS_THAN",
                                  field="constraint.condition")

    def holds(self, count: int) -> bool:
        """Apply the comparison to an observed label count."""
        if self.condition is Condition.LESS_THAN:
            return count < self.requirement
        if self.condition is Condition.EQUAL:
            return count == self.requirement
        return count > self.requirement

    def __str__(self) -> str:
        op = {"LESS_THAN": "<", "EQUAL": "==", "GREATER_THAN": ">"}[self.condition.value]
        if self.kind is LabelKind.DOMAIN:
            return f"per {self.domain}: task:{self.label} {op} {self.requirement}"
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


class Verdict(StrEnum):
    """Outcome of evaluating a constraint for one kind of label."""

    MATCH = "MATCH"
    MISMATCH = "MISMATCH"
    #: Only leaves of the other kind were seen; neutral inside AND / OR.
    NOT_APPLICABLE = "NOT_APPLICABLE"


def evaluate(constraint: Constraint, kind: LabelKind, count: Callable[[Label], int],
             leaf_count: Callable[[LabelConstraint], int] | None = None) -> Verdict:
    """Evaluate the leaves of `kind`, with `count(label)` giving the observed count
    (`leaf_count(leaf)` instead when given: DOMAIN leaves need their domain too).

    Leaves of the other kind are NOT_APPLICABLE.  AND is a MISMATCH as soon as one
    child mismatches, else MATCH if any child matched; OR is a MATCH as soon as one
    child matches, else MISMATCH if any child mismatched (Peloton's evaluator).
    Callers treat NOT_APPLICABLE like MATCH: a host is only rejected on MISMATCH.
    """
    if isinstance(constraint, LabelConstraint):
        if constraint.kind is not kind:
            return Verdict.NOT_APPLICABLE
        n = leaf_count(constraint) if leaf_count is not None else count(constraint.label)
        return Verdict.MATCH if constraint.holds(n) else Verdict.MISMATCH
    if isinstance(constraint, AndConstraint):
        result = Verdict.NOT_APPLICABLE
        for child in constraint.children:
            sub = evaluate(child, kind, count, leaf_count)
            if sub is Verdict.MISMATCH:
                return sub
            if sub is Verdict.MATCH:
                result = sub
        return result
    result = Verdict.NOT_APPLICABLE
    for child in constraint.children:
        sub = evaluate(child, kind, count, leaf_count)
        if sub is Verdict.MATCH:
            return sub
        if sub is Verdict.MISMATCH:
            result = sub
    return result


def explain_mismatch(constraint: Constraint, kind: LabelKind, count: Callable[[Label], int],
                     leaf_count: Callable[[LabelConstraint], int] | None = None) -> Constraint:
    """The smallest sub-constraint that makes `constraint` a MISMATCH (for reason reports).

    For an AND that is its first mismatching child (recursively); for an OR or a
    leaf it is the node itself.  Only meaningful when `evaluate` gave MISMATCH.
    """
    if isinstance(constraint, AndConstraint):
        for child in constraint.children:
            if evaluate(child, kind, count, leaf_count) is Verdict.MISMATCH:
                return explain_mismatch(child, kind, count, leaf_count)
    return constraint


def has_kind(constraint: Constraint | None, kind: LabelKind) -> bool:
    """True if some leaf of the tree is of `kind` (else evaluating that kind is a no-op)."""
    return any(leaf.kind is kind for leaf in leaves(constraint))


def names_host_label_key(constraint: Constraint | None, key: str) -> bool:
    """True if a HOST leaf anywhere in the tree is about label key `key`.

    Placement uses it for exclusive hosts: a task may only land on a host
    labelled `peloton/exclusive` if its constraint talks about that label.
    """
    return any(leaf.kind is LabelKind.HOST and leaf.label.key == key
               for leaf in leaves(constraint))
