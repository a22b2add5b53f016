"""Persistent volumes as tables: what the job manager does for a volume's (goal, state) pair,
what each event moves it to, and the few rules around them (Peloton's volume life cycle).

A volume belongs to one instance of a stateful job on one host.  Its record is written
INITIALIZED (goal CREATED) when the job manager launches the instance's first run there; the
host creates the directory with that launch.  The first run seen RUNNING there makes it
CREATED (Peloton's `updatePersistentVolumeState`: not when already CREATED or when the goal
is DELETED).  Later runs of the instance (restarts, job updates, an agent restart) go back to
the same host and find it.  Deleting the job, or DeleteVolume on a volume no live run uses,
sets the goal DELETED; the host removes the directory and the record becomes DELETED.

* `VOLUME_RULES` (goal -> state -> action)::

      goal CREATED:  INITIALIZED -> wait (for a run to start)   CREATED -> keep
                     DELETED -> invalid (an id is never used again)
      goal DELETED:  INITIALIZED, CREATED -> destroy            DELETED -> done

* `EVENTS` (event -> state -> state written, None: nothing to write)::

      run started:  INITIALIZED -> CREATED
      destroyed:    INITIALIZED, CREATED -> DELETED

Both tables name every `VolumeState`; a test walks every pair.  A new volume id is minted
when an instance first launches on a host (`volume_id`), so a volume that moved hosts (its
old host was lost) is a new volume, as Peloton's launcher did.
"""

from __future__ import annotations

import posixpath
import uuid
from enum import StrEnum

from peloton.core.errors import InvalidArgument
from peloton.core.model.storage_records import VolumeState
from peloton.core.states import TaskState

V = VolumeState


class VolumeAction(StrEnum):
    """What the job manager does for a volume in a (goal, state) pair."""

    WAIT = "wait"          # created with its first run; nothing to do until that runs
    KEEP = "keep"          # in place; nothing to do
    DESTROY = "destroy"    # ask its host to remove it
    DONE = "done"          # removed; the record stays until its job is gone
    INVALID = "invalid"    # a pair no writer produces


class VolumeEvent(StrEnum):
    """What happens to a volume from outside the job manager's engine."""

    RUN_STARTED = "run started"
    DESTROYED = "destroyed"


#: goal -> current state -> action.
VOLUME_RULES: dict[VolumeState, dict[VolumeState, VolumeAction]] = {
    V.CREATED: {V.INITIALIZED: VolumeAction.WAIT, V.CREATED: VolumeAction.KEEP,
                V.DELETED: VolumeAction.INVALID},
    V.DELETED: {V.INITIALIZED: VolumeAction.DESTROY, V.CREATED: VolumeAction.DESTROY,
                V.DELETED: VolumeAction.DONE},
}

#: Goals no volume is ever given.
INVALID_GOALS = frozenset(VolumeState) - frozenset(VOLUME_RULES)

#: event -> current state -> state written (None: the event changes nothing).
EVENTS: dict[VolumeEvent, dict[VolumeState, VolumeState | None]] = {
    VolumeEvent.RUN_STARTED: {V.INITIALIZED: V.CREATED, V.CREATED: None, V.DELETED: None},
    VolumeEvent.DESTROYED: {V.INITIALIZED: V.DELETED, V.CREATED: V.DELETED, V.DELETED: None},
}


def volume_action(goal: VolumeState, state: VolumeState) -> VolumeAction:
    """The action for a volume's (goal, state); INVALID for a goal no volume has."""
    return VOLUME_RULES.get(goal, {}).get(state, VolumeAction.INVALID)


def on_event(event: VolumeEvent, goal: VolumeState, state: VolumeState) -> VolumeState | None:
    """The state a volume moves to on `event`, None if it stays.  A run starting on a volume
    whose goal is DELETED does not make it CREATED (Peloton's rule)."""
    if event is VolumeEvent.RUN_STARTED and goal is V.DELETED:
        return None
    return EVENTS[event][state]


def delete_refusal(task_state: TaskState, task_goal: TaskState) -> str | None:
    """Why DeleteVolume must refuse while the owning task is in (state, goal), or None.

    Peloton's rule: a volume is in use unless both the task's state and its goal state
    are terminal (its run ended and nothing will start another)."""
    if task_state.terminal and task_goal.terminal:
        return None
    return "volume is being used"


def volume_id(job_id: str, instance: int, hostname: str, run: int) -> str:
    """The id of the volume an instance creates on `hostname` with run `run`: a name-based
    UUID, so a retried launch of the same run names the same volume."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"peloton-volume:{job_id}/{instance}/"
                                              f"{hostname}/{run}"))


def sandbox_relative(container_path: str) -> str:
    """Where a volume appears inside a run's sandbox: `container_path` made relative.

    Our agent has no mount namespace, so `/data` and `data` are both the sandbox's
    `data` (Mesos took persistent-volume paths relative to the sandbox too).  Raises
    InvalidArgument for an empty path or one that leaves the sandbox."""
    rel = posixpath.normpath(container_path.strip().lstrip("/"))
    if not container_path.strip() or rel in (".", "") or rel == ".." or rel.startswith("../"):
        raise InvalidArgument(f"volume container path {container_path!r} must name a "
                              "directory inside the sandbox", field="volume.containerPath")
    return rel


def volume_rules_dot() -> str:
    """The goal-state table as a Graphviz digraph (for the docs)."""
    lines = ["digraph volume {"]
    for goal, row in VOLUME_RULES.items():
        for state, action in row.items():
            lines.append(f'  "{state.value}" -> "goal {goal.value}" [label="{action.value}"];')
    for event, moves in EVENTS.items():
        for state, to in moves.items():
            if to is not None:
                lines.append(f'  "{state.value}" -> "{to.value}" [label="{event.value}"];')
    lines.append("}")
    return "\n".join(lines)
