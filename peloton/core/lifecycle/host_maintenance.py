"""Host maintenance as tables: what the host manager's engine does for a (goal, state) pair,
and what each maintenance request writes from each state.

* `HOST_RULES` (goal -> state -> action; Peloton's hostmgr/goalstate/host.go, with the
  DRAINED step that Peloton's resource manager drove done in the host manager, where the
  runs are known)::

      goal DOWN: UP -> drain   DRAINING -> drained (once empty)   DRAINED -> down   DOWN -> untrack
      goal UP:   DOWN, DRAINING, DRAINED -> up                    UP -> untrack

  Goal UP while DRAINING or DRAINED is a maintenance ended mid-drain (Aurora's
  endMaintenance): the host comes back UP.  Peloton calls that pair invalid, as its only
  way back is CompleteMaintenance, which needs DOWN.  UNKNOWN is invalid under every goal,
  and only UP and DOWN are ever goals (`INVALID_GOALS`).

* `REQUESTS` (request -> current state -> state written, None: refused), each request
  setting the goal in `REQUEST_GOALS`:

  - START (Peloton's StartMaintenance; Aurora's drainHosts and slaDrainHosts): goal DOWN;
    an UP host starts DRAINING, a host already under maintenance keeps its state;
  - COMPLETE (Peloton's CompleteMaintenance): only a DOWN host comes back UP (an UP one is
    left as it is); a host still draining is refused;
  - END (Aurora's endMaintenance, MaintenanceController: any mode -> NONE): every host
    comes back UP at once.  A drain in progress stops there: runs not moved yet keep
    running on the host, which is offered to placement again.

Both tables name every `HostState`; a test walks every pair.
"""

from __future__ import annotations

from enum import StrEnum

from peloton.core.states import HostState

S = HostState


class HostAction(StrEnum):
    """What the host manager's engine does for a (goal, state) pair."""

    DRAIN = "drain"
    DRAINED = "drained"
    DOWN = "down"
    UP = "up"
    UNTRACK = "untrack"
    INVALID = "invalid"


#: goal -> current state -> action, for the two goals a host may have.
HOST_RULES: dict[HostState, dict[HostState, HostAction]] = {
    S.DOWN: {S.UNKNOWN: HostAction.INVALID, S.UP: HostAction.DRAIN,
             S.DRAINING: HostAction.DRAINED, S.DRAINED: HostAction.DOWN,
             S.DOWN: HostAction.UNTRACK},
    S.UP: {S.UNKNOWN: HostAction.INVALID, S.UP: HostAction.UNTRACK,
           S.DRAINING: HostAction.UP, S.DRAINED: HostAction.UP, S.DOWN: HostAction.UP},
}

#: Goals no host is ever given.
INVALID_GOALS = frozenset(HostState) - frozenset(HOST_RULES)

#: The state each moving action writes (DRAINED only once the host is empty).
ACTION_STATES: dict[HostAction, HostState] = {
    HostAction.DRAIN: S.DRAINING, HostAction.DRAINED: S.DRAINED, HostAction.DOWN: S.DOWN,
    HostAction.UP: S.UP}


def host_action(goal: HostState, state: HostState) -> HostAction:
    """The engine's action for a host with `goal` in `state`."""
    return HOST_RULES.get(goal, {}).get(state, HostAction.INVALID)


class MaintenanceRequest(StrEnum):
    """A maintenance request made through an API."""

    START = "start"
    COMPLETE = "complete"
    END = "end"


#: The goal each request sets.
REQUEST_GOALS: dict[MaintenanceRequest, HostState] = {
    MaintenanceRequest.START: S.DOWN,
    MaintenanceRequest.COMPLETE: S.UP,
    MaintenanceRequest.END: S.UP,
}

#: request -> current state -> the state written (None: refused, nothing written).
REQUESTS: dict[MaintenanceRequest, dict[HostState, HostState | None]] = {
    MaintenanceRequest.START: {S.UNKNOWN: S.DRAINING, S.UP: S.DRAINING,
                               S.DRAINING: S.DRAINING, S.DRAINED: S.DRAINED, S.DOWN: S.DOWN},
    MaintenanceRequest.COMPLETE: {S.UNKNOWN: None, S.UP: S.UP, S.DRAINING: None,
                                  S.DRAINED: None, S.DOWN: S.UP},
    MaintenanceRequest.END: {state: S.UP for state in HostState},
}


def host_rules_dot() -> str:
    """The engine's table as Graphviz text (one edge per moving action), for the docs."""
    lines = ["digraph host_maintenance {", "  rankdir=LR;"]
    for goal, row in HOST_RULES.items():
        for state, action in row.items():
            target = ACTION_STATES.get(action)
            if target is not None:
                lines.append(f'  {state.value} -> {target.value} [label="goal {goal.value}"];')
    lines.append("}")
    return "\n".join(lines)
