"""Peloton update workflows as Aurora JobUpdateSummary and JobUpdateDetails.

Only workflows of type UPDATE whose opaque data carries an update id are
Aurora updates.  A rollback is a second workflow with the same update id
(rollbackJobUpdate replays the opaque data with a `rollback` action);
`join_rollback` presents the pair as one update, as Peloton's bridge does:
the forward workflow's key, settings and creation time, the rollback's
state, and both event streams (the forward one without its terminal and
rollback events).  Peloton lists workflow events newest first; Aurora wants
them oldest first.  Peloton's events carry a state and a time only: who asked
for a change and why come from the requests the bridge recorded in the opaque
data (update_events).
"""

from __future__ import annotations

from typing import Any

from aurorabridge import opaque_data
from aurorabridge import update_settings as stored_settings
from aurorabridge.opaque_data import OpaqueData
from aurorabridge.ptoa import basics, states
from aurorabridge.thrift_api import api
from peloton.api.gen.peloton.api.v1alpha.job.stateless import stateless_pb2

_U = api.JobUpdateStatus
_W = stateless_pb2
_RESUMED = frozenset({_W.WORKFLOW_STATE_INITIALIZED, _W.WORKFLOW_STATE_ROLLING_FORWARD,
                      _W.WORKFLOW_STATE_ROLLING_BACKWARD})
_STARTED = frozenset({_W.WORKFLOW_STATE_INITIALIZED, _W.WORKFLOW_STATE_PAUSED})
#: The workflow states the event of each recorded request can have (opaque_data.Asked):
#: a start or a rollback makes a workflow (paused when it waits for a first pulse), a
#: resume or a pulse resumes one where it was, a pause or a missed pulse pauses it.
ASKED_SHOWS_AS: dict[str, frozenset[int]] = {
    opaque_data.START: _STARTED,
    opaque_data.ROLLBACK: _STARTED,
    opaque_data.PAUSE: frozenset({_W.WORKFLOW_STATE_PAUSED}),
    opaque_data.PULSE_TIMEOUT: frozenset({_W.WORKFLOW_STATE_PAUSED}),
    opaque_data.RESUME: _RESUMED,
    opaque_data.PULSE: _RESUMED,
    opaque_data.ABORT: frozenset({_W.WORKFLOW_STATE_ABORTED}),
}
#: Requests whose pause waits for a pulse (a coordinated start or rollback, a missed pulse).
AWAITS_PULSE = frozenset({opaque_data.START, opaque_data.ROLLBACK, opaque_data.PULSE_TIMEOUT})
_ROLLBACK_OR_TERMINAL = frozenset({_U.ROLLING_BACK, _U.ROLL_BACK_PAUSED, _U.ROLL_BACK_AWAITING_PULSE,
                                   _U.ROLLED_BACK, _U.ABORTED, _U.ERROR, _U.FAILED})


def _times(workflow: Any) -> tuple[int, int]:
    """(created, last modified) in ms: oldest and newest event, else the status times."""
    stamps = [basics.timestamp_ms(e.timestamp) for e in workflow.events]
    stamps = [s for s in stamps if s]
    if stamps:
        return min(stamps), max(stamps)
    created = basics.timestamp_ms(workflow.status.creation_time)
    return created, basics.timestamp_ms(workflow.status.update_time) or created


def _turned_around(workflow: Any) -> bool:
    """The job manager is rolling the workflow back (its rollback on failure), or paused it
    while doing so."""
    status = workflow.status
    return bool(status.state == _W.WORKFLOW_STATE_ROLLING_BACKWARD or (
        status.state == _W.WORKFLOW_STATE_PAUSED and status.prev_state == _W.WORKFLOW_STATE_ROLLING_BACKWARD))


def workflow_status(workflow: Any, data: OpaqueData) -> int:
    """The JobUpdateStatus a workflow is in now."""
    return states.update_status(workflow.status.state, data, _turned_around(workflow))


def update_summary(key: Any, workflow: Any, data: OpaqueData) -> Any:
    """The JobUpdateSummary of one workflow."""
    created, modified = _times(workflow)
    return api.JobUpdateSummary(
        key=api.JobUpdateKey(job=key, id=data.update_id), user=data.started_by,
        state=api.JobUpdateState(status=workflow_status(workflow, data),
                                 createdTimestampMs=created, lastModifiedTimestampMs=modified),
        metadata=[api.Metadata(key=k, value=v) for k, v in data.metadata])


def update_settings(spec: Any, data: OpaqueData) -> Any:
    """The update's JobUpdateSettings: as stored in its opaque data, else (an update started by
    an older bridge or by Peloton's) read back from the Peloton UpdateSpec with Aurora's
    default strategy; always with a strategy (update_settings.py)."""
    if data.settings is not None:
        return stored_settings.from_doc(data.settings)
    return stored_settings.effective(api.JobUpdateSettings(
        updateGroupSize=spec.batch_size, maxPerInstanceFailures=max(0, spec.max_instance_retries - 1),
        maxFailedInstances=max(0, spec.max_tolerable_instance_failures - 1), minWaitInInstanceRunningMs=0,
        rollbackOnFailure=spec.rollback_on_failure, updateOnlyTheseInstances=[],
        waitForBatchCompletion=False, blockIfNoPulsesAfterMs=data.pulse_timeout_ms or None))


def update_details(key: Any, workflow: Any, data: OpaqueData, desired: Any = None,
                   initial: Any = None) -> Any:
    """JobUpdateDetails of one workflow; `desired`/`initial` are TaskConfigs when known."""
    updated = basics.ids_of_ranges(workflow.instances_updated)
    added = basics.ids_of_ranges(workflow.instances_added)
    removed = basics.ids_of_ranges(workflow.instances_removed)
    initial_state = []
    if updated or removed:
        initial_state.append(api.InstanceTaskConfig(task=initial, instances=basics.ranges(updated + removed)))
    instructions = api.JobUpdateInstructions(
        initialState=initial_state,
        desiredState=api.InstanceTaskConfig(task=desired, instances=basics.ranges(updated + added)),
        settings=update_settings(workflow.update_spec, data))
    instance_events = [event for ie in workflow.instance_events
                       for event in _instance_events(ie.instance_id, ie.events, data.rollback)]
    instance_events.sort(key=lambda e: e.timestampMs)
    return api.JobUpdateDetails(update=api.JobUpdate(summary=update_summary(key, workflow, data),
                                                     instructions=instructions),
                                updateEvents=update_events(workflow.events, data),
                                instanceEvents=instance_events)


def _instance_events(instance: int, events: Any, rollback: bool) -> list[Any]:
    """One instance's JobInstanceUpdateEvents, oldest first (`events` newest first); from its
    first ROLLING_BACKWARD event on, the instance is being rolled back."""
    out = []
    for event in reversed(events):
        rollback = rollback or event.state == _W.WORKFLOW_STATE_ROLLING_BACKWARD
        out.append(api.JobInstanceUpdateEvent(
            instanceId=instance, timestampMs=basics.timestamp_ms(event.timestamp),
            action=states.instance_action(event.state, rollback)))
    return out


def update_events(events: Any, data: OpaqueData) -> list[Any]:
    """A workflow's JobUpdateEvents, oldest first (`events`: Peloton's, newest first).

    Each Peloton event is either the change a recorded request asked for (the next one not
    yet seen, if the event's state is one that request shows as: ASKED_SHOWS_AS), which
    gives it its user and message, or one the job manager made by itself.  As Aurora
    records a status only when it changes, an event whose status is the previous one's is
    left out."""
    rollback = data.rollback
    pending = list(data.asked_of(rollback))
    out: list[Any] = []
    for event in reversed(events):
        state = event.state
        rollback = rollback or state == _W.WORKFLOW_STATE_ROLLING_BACKWARD
        asked = pending[0] if pending and state in ASKED_SHOWS_AS.get(pending[0].action, ()) else None
        if asked is not None:
            pending.pop(0)
            awaiting = asked.action in AWAITS_PULSE
        else:  # an older bridge's update keeps no requests: its pulse state says
            awaiting = not data.asked and data.awaiting_pulse
        status = states.workflow_update_status(state, rollback, awaiting)
        if out and out[-1].status == status:
            continue
        out.append(api.JobUpdateEvent(status=status, timestampMs=basics.timestamp_ms(event.timestamp),
                                      user=(asked.user or None) if asked else None,
                                      message=(asked.message or None) if asked else None))
    return out


def join_rollback(forward: Any, back: Any) -> Any:
    """One JobUpdateDetails for an update (`forward`) and its rollback (`back`)."""
    fs, bs = forward.update.summary, back.update.summary
    summary = api.JobUpdateSummary(
        key=fs.key, user=fs.user, metadata=fs.metadata,
        state=api.JobUpdateState(status=bs.state.status, createdTimestampMs=fs.state.createdTimestampMs,
                                 lastModifiedTimestampMs=bs.state.lastModifiedTimestampMs))
    events = [e for e in forward.updateEvents if e.status not in _ROLLBACK_OR_TERMINAL]
    events += [e for e in back.updateEvents if not events or e.status != events[-1].status]
    update = api.JobUpdate(summary=summary, instructions=forward.update.instructions)
    return api.JobUpdateDetails(update=update, updateEvents=events,
                                instanceEvents=forward.instanceEvents + back.instanceEvents)
