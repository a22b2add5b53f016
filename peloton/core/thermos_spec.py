"""A Thermos task as the runner needs it: processes, `order` constraints and task limits,
parsed from Thermos JSON and checked as Thermos checks them (thermos_plan.py runs it).

Defaults are Thermos's (Process: max_failures 1, min_duration 5 s, not daemon, ephemeral
or final; Task: max_failures 1, max_concurrency 0 = no limit, finalization_wait 30 s).
Checks: at least one process, each with a cmdline and a unique name that is a valid file
name (its logs go to .logs/<name>/); counts and durations >= 0; every `order` constraint
names processes of the task (one naming none of them is ignored, as Thermos does), all
regular or all final, no process after a daemon, no non-ephemeral process after an
ephemeral one, and no cycle.

Standalone like thermos_plan.py: standard library only, Python 3.8 at run time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: Thermos's defaults (schema_base.py).
DEFAULT_MAX_FAILURES = 1
DEFAULT_MIN_DURATION = 5.0
DEFAULT_FINALIZATION_WAIT = 30.0


class ThermosConfigError(ValueError):
    """A Thermos task this module cannot run; `field` names the offending part."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class ProcessSpec:
    """One Thermos Process."""

    name: str
    cmdline: str
    max_failures: int = DEFAULT_MAX_FAILURES
    daemon: bool = False
    ephemeral: bool = False
    min_duration: float = DEFAULT_MIN_DURATION
    final: bool = False


@dataclass(frozen=True)
class TaskSpec:
    """One Thermos Task: processes, `order` constraints and the task-level limits."""

    processes: tuple[ProcessSpec, ...]
    orders: tuple[tuple[str, ...], ...] = ()
    max_failures: int = DEFAULT_MAX_FAILURES
    max_concurrency: int = 0
    finalization_wait: float = DEFAULT_FINALIZATION_WAIT

    def to_doc(self) -> dict[str, Any]:
        """The task in Thermos's JSON shape (what `parse_task` reads back)."""
        return {
            "processes": [{"name": p.name, "cmdline": p.cmdline, "max_failures": p.max_failures,
                           "daemon": p.daemon, "ephemeral": p.ephemeral,
                           "min_duration": p.min_duration, "final": p.final}
                          for p in self.processes],
            "constraints": [{"order": list(o)} for o in self.orders],
            "max_failures": self.max_failures, "max_concurrency": self.max_concurrency,
            "finalization_wait": self.finalization_wait,
        }


def _pairs(order: tuple[str, ...] | list[str]) -> list[tuple[str, str]]:
    """Successive pairs (itertools.pairwise is newer than the Pythons this must run on)."""
    return [(order[i], order[i + 1]) for i in range(len(order) - 1)]


def _number(doc: Mapping[str, Any], key: str, default: float, where: str, whole: bool) -> Any:
    value = doc.get(key)
    if value is None:
        return int(default) if whole else default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or \
            (whole and value != int(value)):
        kind = "a whole number" if whole else "a number"
        raise ThermosConfigError(f"{where}.{key} must be {kind} >= 0, got {value!r}", f"{where}.{key}")
    return int(value) if whole else float(value)


def _flag(doc: Mapping[str, Any], key: str, where: str) -> bool:
    value = doc.get(key)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise ThermosConfigError(f"{where}.{key} must be true or false, got {value!r}", f"{where}.{key}")
    return value


def _process(doc: Any, i: int) -> ProcessSpec:
    where = f"task.processes[{i}]"
    if not isinstance(doc, Mapping) or not isinstance(doc.get("cmdline"), str):
        raise ThermosConfigError(f"Thermos process {i} has no cmdline", f"{where}.cmdline")
    name = doc.get("name") or f"process{i}"
    if not isinstance(name, str) or "/" in name or "\0" in name or name.startswith("."):
        raise ThermosConfigError(f"Thermos process name {name!r} is not a valid file name "
                                 "(no slash, NUL or leading dot)", f"{where}.name")
    return ProcessSpec(
        name=name, cmdline=doc["cmdline"],
        max_failures=_number(doc, "max_failures", DEFAULT_MAX_FAILURES, where, True),
        daemon=_flag(doc, "daemon", where), ephemeral=_flag(doc, "ephemeral", where),
        min_duration=_number(doc, "min_duration", DEFAULT_MIN_DURATION, where, False),
        final=_flag(doc, "final", where))


def _orders(found: Any, by_name: Mapping[str, ProcessSpec]) -> tuple[tuple[str, ...], ...]:
    orders = []
    for i, constraint in enumerate(found if isinstance(found, list) else []):
        where = f"task.constraints[{i}].order"
        order = constraint.get("order") if isinstance(constraint, Mapping) else None
        if order is None:
            continue
        if not isinstance(order, list) or not all(isinstance(n, str) for n in order):
            raise ThermosConfigError("an order constraint must be a list of process names", where)
        known = [n for n in order if n in by_name]
        if not known:
            continue  # names no process of the task at all: Thermos ignores it
        if len(known) != len(order):
            missing = sorted(set(order) - set(known))
            raise ThermosConfigError(f"order constraint {order} names unknown processes {missing}", where)
        if len({by_name[n].final for n in order}) > 1:
            raise ThermosConfigError(f"order constraint {order} mixes final and regular processes", where)
        for before, later in _pairs(order):
            if by_name[before].daemon:
                raise ThermosConfigError(f"process {later} may not depend upon daemon process {before}",
                                         where)
            if by_name[before].ephemeral and not by_name[later].ephemeral:
                raise ThermosConfigError(f"non-ephemeral process {later} may not depend upon "
                                         f"ephemeral process {before}", where)
        orders.append(tuple(order))
    return tuple(orders)


def _check_acyclic(spec: TaskSpec) -> None:
    after = dependencies(spec)
    done: set[str] = set()
    pending = [p.name for p in spec.processes]
    while pending:
        ready = [n for n in pending if after[n] <= done]
        if not ready:
            raise ThermosConfigError(f"Thermos process order constraints form a cycle among {pending}",
                                     "task.constraints")
        done.update(ready)
        pending = [n for n in pending if n not in done]


def dependencies(spec: TaskSpec) -> dict[str, frozenset[str]]:
    """Process name -> the processes its `order` constraints put right before it."""
    after: dict[str, set[str]] = {p.name: set() for p in spec.processes}
    for order in spec.orders:
        for before, later in _pairs(order):
            after[later].add(before)
    return {name: frozenset(names) for name, names in after.items()}


def parse_task(doc: Any) -> TaskSpec:
    """A TaskSpec from Thermos JSON: the executor's document ({"task": {...}}) or the task
    itself; ThermosConfigError names what is wrong (Thermos's own checks, plus file-safe names)."""
    task = doc.get("task") if isinstance(doc, Mapping) and isinstance(doc.get("task"), Mapping) else doc
    if not isinstance(task, Mapping):
        raise ThermosConfigError("Thermos task is not a JSON object", "task")
    processes = task.get("processes")
    if not isinstance(processes, list) or not processes:
        raise ThermosConfigError("Thermos task has no processes (task.processes is empty)", "task.processes")
    specs = tuple(_process(p, i) for i, p in enumerate(processes))
    by_name = {p.name: p for p in specs}
    if len(by_name) != len(specs):
        raise ThermosConfigError("Thermos process names must be unique", "task.processes")
    spec = TaskSpec(
        processes=specs, orders=_orders(task.get("constraints"), by_name),
        max_failures=_number(task, "max_failures", DEFAULT_MAX_FAILURES, "task", True),
        max_concurrency=_number(task, "max_concurrency", 0, "task", True),
        finalization_wait=_number(task, "finalization_wait", DEFAULT_FINALIZATION_WAIT, "task", False))
    _check_acyclic(spec)
    return spec
