"""The host maintenance tables: every (goal, state) and (request, state) pair is named, and
ending maintenance (Aurora's endMaintenance) works from every state."""

from __future__ import annotations

import pytest

from peloton.core.lifecycle.host_maintenance import (
    ACTION_STATES,
    HOST_RULES,
    INVALID_GOALS,
    REQUEST_GOALS,
    REQUESTS,
    HostAction,
    MaintenanceRequest,
    host_action,
    host_rules_dot,
)
from peloton.core.states import HostState

H = HostState
R = MaintenanceRequest


@pytest.mark.parametrize("goal", list(HOST_RULES))
def test_every_goal_row_names_every_state(goal: HostState) -> None:
    assert set(HOST_RULES[goal]) == set(HostState)
    assert all(isinstance(a, HostAction) for a in HOST_RULES[goal].values())


def test_only_up_and_down_are_goals_and_others_are_invalid() -> None:
    assert {H.UNKNOWN, H.DRAINING, H.DRAINED} == INVALID_GOALS
    for goal in INVALID_GOALS:
        for state in HostState:
            assert host_action(goal, state) is HostAction.INVALID


@pytest.mark.parametrize("request_", list(MaintenanceRequest))
def test_every_request_row_names_every_state(request_: MaintenanceRequest) -> None:
    assert set(REQUESTS[request_]) == set(HostState)
    assert REQUEST_GOALS[request_] in HOST_RULES


@pytest.mark.parametrize("state", list(HostState))
def test_end_maintenance_brings_a_host_up_from_every_state(state: HostState) -> None:
    assert REQUESTS[R.END][state] is H.UP and REQUEST_GOALS[R.END] is H.UP
    # And a record left with goal UP mid-drain (e.g. read back after a restart) is brought UP.
    if state is not H.UNKNOWN:
        action = host_action(H.UP, state)
        assert action is HostAction.UNTRACK or ACTION_STATES[action] is H.UP


def test_complete_maintenance_keeps_pelotons_rule_down_hosts_only() -> None:
    assert {s for s, to in REQUESTS[R.COMPLETE].items() if to is not None} == {H.UP, H.DOWN}


def test_start_maintenance_drains_an_up_host_and_keeps_a_host_under_maintenance() -> None:
    assert REQUESTS[R.START][H.UP] is H.DRAINING
    for state in (H.DRAINING, H.DRAINED, H.DOWN):
        assert REQUESTS[R.START][state] is state


def test_the_goal_down_row_walks_up_draining_drained_down() -> None:
    state = H.UP
    seen = [state]
    while (action := host_action(H.DOWN, state)) in ACTION_STATES:
        state = ACTION_STATES[action]
        seen.append(state)
    assert seen == [H.UP, H.DRAINING, H.DRAINED, H.DOWN]
    assert "DRAINING -> UP" in host_rules_dot()
