"""Peloton update workflows as Aurora JobUpdateSummary and JobUpdateDetails.

Only workflows of type UPDATE whose opaque data carries an update id are
Aurora updates.  A rollback is a second workflow with the same update id
(rollbackJobUpdate replays the opaque data with a `rollback` action);
`join_rollback` presents the pair as one update, as Peloton's bridge does:
the forward workflow's key, settings and creation time, the rollback's
state, and both event streams (the forward one without its terminal and
rollback events).  Peloton lists workflow events newest first; Aurora wants
them oldest first.
"""

from __future__ import annotations

from typing import Any

from aurorabridge import update_settings as stored_settings
from aurorabridge.opaque_data import OpaqueData
from aurorabridge.ptoa import basics, states
from aurorabridge.thrift_api import api

_U = api.JobUpdateStatus
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


def update_summary(key: Any, workflow: Any, data: OpaqueData) -> Any:
    """The JobUpdateSummary of one workflow."""
    created, modified = _times(workflow)
    return api.JobUpdateSummary(
        key=api.JobUpdateKey(job=key, id=data.update_id), user="",
        state=api.JobUpdateState(status=states.update_status(workflow.status.state, data),
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
    events = []
    for event in reversed(workflow.events):
        status = states.update_status(event.state, data)
        forward = status in (_U.ROLLING_FORWARD, _U.ROLL_FORWARD_AWAITING_PULSE)
        events.append(api.JobUpdateEvent(status=status, timestampMs=basics.timestamp_ms(event.timestamp),
                                          message=data.message if forward and data.message else None))
    instance_events = [
        api.JobInstanceUpdateEvent(instanceId=ie.instance_id, timestampMs=basics.timestamp_ms(e.timestamp),
                                   action=states.instance_action(e.state, data))
        for ie in workflow.instance_events for e in reversed(ie.events)]
    instance_events.sort(key=lambda e: e.timestampMs)
    return api.JobUpdateDetails(update=api.JobUpdate(summary=update_summary(key, workflow, data),
                                                     instructions=instructions),
                                updateEvents=events, instanceEvents=instance_events)


def join_rollback(forward: Any, back: Any) -> Any:
    """One JobUpdateDetails for an update (`forward`) and its rollback (`back`)."""
    fs, bs = forward.update.summary, back.update.summary
    summary = api.JobUpdateSummary(
        key=fs.key, user=fs.user, metadata=fs.metadata,
        state=api.JobUpdateState(status=bs.state.status, createdTimestampMs=fs.state.createdTimestampMs,
                                 lastModifiedTimestampMs=bs.state.lastModifiedTimestampMs))
    events = [e for e in forward.updateEvents if e.status not in _ROLLBACK_OR_TERMINAL] + back.updateEvents
    update = api.JobUpdate(summary=summary, instructions=forward.update.instructions)
    return api.JobUpdateDetails(update=update, updateEvents=events,
                                instanceEvents=forward.instanceEvents + back.instanceEvents)
