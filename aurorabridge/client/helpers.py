"""The helper functions `.aurora` files use besides the schema (Aurora documents them).

`order(a, b, c)` is the constraint list that runs processes a, b, c one after
another; `SequentialTask(...)` is a Task whose processes all run in the order
listed; `SimpleTask(name, command)` a one-process task with one core and 1 GB
of memory and disk; `combine_tasks` runs several tasks' processes side by side
(resources add up), `concat_tasks` runs them task after task (the largest
resources, the finalization waits add up); `java_options`/`python_options`
render command-line flags.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any

from pystachio import Empty

from aurorabridge.client.schema import GB, Constraint, Process, Resources, Task


def _name(process: Any) -> str:
    if isinstance(process, Process):
        return str(process.name().get())
    if isinstance(process, str):
        return process
    raise ValueError(f"order() takes Process objects or process names, got {process!r}")


def order(*processes: Any) -> list[Any]:
    """One Constraint running `processes` (Process objects or names) in this order."""
    return [Constraint(order=[_name(p) for p in processes])]


def SimpleTask(name: str, command: str) -> Any:
    """A task of one process named `name` running `command`, with 1 core, 1 GB ram and disk."""
    return Task(name=name, processes=[Process(name=name, cmdline=command)],
                resources=Resources(cpu=1.0, ram=1 * GB, disk=1 * GB))


def SequentialTask(*args: Any, **kw: Any) -> Any:
    """A Task whose processes run one after another, in the order listed."""
    task = Task(*args, **kw)
    existing = task.constraints()
    if existing is not Empty and len(existing.get()) > 0:
        raise ValueError("Cannot turn a Task with existing constraints into a SequentialTask!")
    if task.processes() is Empty:
        return task
    return task(constraints=order(*task.processes()))


def _value(field: Any) -> Any:
    return 0 if field is Empty else field.get()


def _resources(tasks: Iterable[Any], combine: Any) -> Any:
    total = {"cpu": 0.0, "ram": 0, "disk": 0, "gpu": 0}
    for task in tasks:
        res = task.resources()
        if res is Empty:
            continue
        for field in total:
            total[field] = combine(total[field], _value(getattr(res, field)()))
    return Resources(**total)


def _unique(items: Iterable[Any]) -> list[Any]:
    seen: list[Any] = []
    for item in items:
        if item not in seen:
            seen.append(item)
    return seen


def _merged(tasks: tuple[Any, ...]) -> tuple[Any, list[Any], list[Any]]:
    processes = _unique(p for t in tasks for p in (t.processes() if t.processes() is not Empty else []))
    constraints = _unique(c for t in tasks for c in t.constraints())
    return tasks[-1](processes=processes), processes, constraints


def combine_tasks(*tasks: Any, **kw: Any) -> Any:
    """One task running every given task's processes side by side (resources summed)."""
    if not tasks:
        return Task()
    base, _, constraints = _merged(tasks)
    wait = max([0] + [_value(t.finalization_wait()) for t in tasks])
    return base(resources=_resources(tasks, lambda a, b: a + b), constraints=constraints,
                finalization_wait=wait, **kw)


def concat_tasks(*tasks: Any, **kw: Any) -> Any:
    """One task running the given tasks one after another (the largest resources)."""
    if not tasks:
        return Task()
    base, _, constraints = _merged(tasks)
    for first, then in itertools.pairwise(tasks):
        for before in first.processes():
            for after in then.processes():
                if before != after:
                    constraints.extend(order(before, after))
    wait = sum(_value(t.finalization_wait()) for t in tasks)
    return base(resources=_resources(tasks, max), constraints=constraints,
                finalization_wait=wait, **kw)


def _render(short: str, long: str, *options: Any, **kw: Any) -> str:
    words: list[str] = []

    def flag(name: str, value: Any = None) -> None:
        text = (short if len(name) == 1 else long) + name
        words.append(f"{text} {value}" if value else text)

    for option in options:
        if isinstance(option, str):
            flag(option)
        elif isinstance(option, dict):
            for name, value in option.items():
                flag(name, value)
        else:
            raise ValueError(f"unexpected option {option!r}: give names, dicts or keywords")
    for name, value in kw.items():
        flag(name, value)
    return " ".join(words)


def java_options(*options: Any, **kw: Any) -> str:
    """`-name value` flags, e.g. java_options('server', Xmx='1g') == '-server -Xmx 1g'."""
    return _render("-", "-", *options, **kw)


def python_options(*options: Any, **kw: Any) -> str:
    """`-x value` for one-letter names, `--name value` otherwise."""
    return _render("-", "--", *options, **kw)
