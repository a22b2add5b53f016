"""How amounts, resources and constraints read to people.

Every sentence a user reads about resources (why a task waits, why a job
is refused, what a host holds) formats its numbers here, so they read the
same everywhere: cpu and gpu with at most two decimals and no float noise
("0.1", "2", never "2.77556e-17"), memory and disk in MiB, GiB or TiB.
Constraints read as what a host has or lacks ("has label zone=mars")
rather than as their wire form ("host:zone=mars == 1").
"""

from __future__ import annotations

import re

from peloton.core.model.constraints import (
    AndConstraint,
    Condition,
    Constraint,
    LabelConstraint,
    LabelKind,
)
from peloton.core.model.resources import ResourceKind, Resources

_UNITS = (("TiB", 1024.0 * 1024.0), ("GiB", 1024.0), ("MiB", 1.0))


def number(value: float, decimals: int = 2) -> str:
    """`value` rounded to `decimals`, without trailing zeros ("0.1", "2", "1.25")."""
    text = f"{value:.{decimals}f}"
    if "." in text:  # only a fraction's zeros trail: "1000" keeps its own
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("", "-0") else text


def size_mb(mb: float) -> str:
    """A size given in MB (as Peloton counts memory and disk) in MiB, GiB or TiB."""
    for unit, scale in _UNITS:
        if abs(mb) >= scale or unit == "MiB":
            return f"{number(mb / scale, 2 if unit != 'MiB' else 0)} {unit}"
    return f"{number(mb)} MiB"  # pragma: no cover - the loop always returns


def value(kind: ResourceKind, amount_: float) -> str:
    """An amount without its kind's name: "2" (cpu, gpu), "512 MiB" (memory, disk)."""
    if kind in (ResourceKind.MEMORY, ResourceKind.DISK):
        return size_mb(amount_)
    return number(amount_)


def amount(kind: ResourceKind, value: float) -> str:
    """One kind's amount with its unit: "2 cpu", "512 MiB memory", "1 gpu"."""
    if kind is ResourceKind.MEMORY:
        return f"{size_mb(value)} memory"
    if kind is ResourceKind.DISK:
        return f"{size_mb(value)} disk"
    return f"{number(value)} {kind.value}"


def resources(res: Resources, *, skip_zero: bool = True) -> str:
    """"2 cpu, 4 GiB memory, 10 GiB disk" (kinds at zero left out unless asked)."""
    parts = [amount(kind, value) for kind, value in res.items()
             if value > 0.0005 or not skip_zero]
    return ", ".join(parts) if parts else "nothing"


def plural(n: int, word: str) -> str:
    """"1 host", "3 hosts"."""
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


def _times(n: int) -> str:
    return "once" if n == 1 else f"{n} times"


def _leaf_met(leaf: LabelConstraint) -> str:
    label, n = leaf.label, leaf.requirement
    if leaf.kind is LabelKind.HOST:
        if leaf.condition is Condition.EQUAL:
            return (f"has no label {label}" if n == 0 else
                    f"has label {label}" if n == 1 else f"has label {label} exactly {_times(n)}")
        if leaf.condition is Condition.GREATER_THAN:
            return (f"has label {label}" if n == 0 else
                    f"has label {label} more than {_times(n)}")
        return (f"has no label {label}" if n <= 1 else
                f"has label {label} fewer than {_times(n)}")
    if leaf.condition is Condition.LESS_THAN:
        return (f"runs no task labelled {label}" if n <= 1 else
                f"runs fewer than {n} tasks labelled {label}")
    if leaf.condition is Condition.GREATER_THAN:
        return f"runs more than {plural(n, 'task')} labelled {label}"
    return f"runs exactly {plural(n, 'task')} labelled {label}"


def _leaf_unmet(leaf: LabelConstraint) -> str:
    label, n = leaf.label, leaf.requirement
    if leaf.kind is LabelKind.HOST:
        if leaf.condition is Condition.EQUAL and n in (0, 1):
            return f"has label {label}" if n == 0 else f"lacks label {label}"
        if leaf.condition is Condition.GREATER_THAN and n == 0:
            return f"lacks label {label}"
        if leaf.condition is Condition.LESS_THAN and n <= 1:
            return f"has label {label}"
        return f"does not satisfy: {_leaf_met(leaf)}"
    if leaf.condition is Condition.LESS_THAN:
        return (f"already runs a task labelled {label}" if n <= 1 else
                f"already runs {n} or more tasks labelled {label}")
    return f"does not satisfy: {_leaf_met(leaf)}"


_PLURAL_VERBS = {"lacks": "lack", "has": "have", "runs": "run", "does": "do"}
_VERB = re.compile(r"(^|\(|\band |\bor |already )(lacks|has|runs|does)\b")


def for_many(phrase: str) -> str:
    """A host phrase ("lacks label a") with its verbs for several hosts ("lack label a")."""
    return _VERB.sub(lambda m: m.group(1) + _PLURAL_VERBS[m.group(2)], phrase)


def met(constraint: Constraint) -> str:
    """The constraint as what a host that satisfies it does ("has label zone=mars")."""
    if isinstance(constraint, LabelConstraint):
        return _leaf_met(constraint)
    joiner = " and " if isinstance(constraint, AndConstraint) else " or "
    inner = joiner.join(met(c) for c in constraint.children)
    return f"({inner})" if len(constraint.children) > 1 else inner


def unmet(constraint: Constraint) -> str:
    """What a host that fails the constraint is like ("lacks label zone=mars")."""
    if isinstance(constraint, LabelConstraint):
        return _leaf_unmet(constraint)
    # A host fails an AND by failing one child, and an OR by failing every child.
    joiner = " or " if isinstance(constraint, AndConstraint) else " and "
    inner = joiner.join(unmet(c) for c in constraint.children)
    return f"({inner})" if len(constraint.children) > 1 else inner
