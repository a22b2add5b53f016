"""Checks that every goal-state action a table can name has an implementation.

Each action module (job, task, update) ends with a dict from the core table's
action Enum to its implementation and calls `require_every_action` on it, so a
new action added to a table without an implementation stops the job manager
from being imported (and every test from running), instead of being skipped
with a log line at run time.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from enum import Enum


class MissingGoalStateAction(RuntimeError):
    """A goal-state table names an action that has no implementation."""


def require_every_action(engine: str, actions: Iterable[Enum], implemented: Collection[object],
                         no_op: str = "noop") -> None:
    """Raise MissingGoalStateAction unless every action but the no-op is implemented."""
    missing = sorted(a.name for a in actions if a not in implemented and a.value != no_op)
    if missing:
        raise MissingGoalStateAction(
            f"{engine} goal-state actions without an implementation: {', '.join(missing)}")
