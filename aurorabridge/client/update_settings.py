"""A job's UpdateConfig as the JobUpdateSettings of `aurora update start` (Aurora's mapping).

batch_size -> updateGroupSize; max_per_shard_failures -> maxPerInstanceFailures;
max_total_failures -> maxFailedInstances; watch_secs -> minWaitInInstanceRunningMs
(x1000); rollback_on_failure, wait_for_batch_completion, sla_aware as they are;
pulse_interval_secs -> blockIfNoPulsesAfterMs (x1000, when set); the instances
given on the command line -> updateOnlyTheseInstances (contiguous Ranges).
The strategy: the config's update_strategy, else BatchStrategy(batch_size)
when wait_for_batch_completion, else QueueStrategy(batch_size).  With an
explicit strategy the group size is the strategy's (the first of a variable
batch's sizes) and a batch strategy waits for batch completion.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pystachio import Empty

from aurorabridge.client import schema
from aurorabridge.thrift_api import api


def ranges(instances: Iterable[int]) -> list[Any]:
    """Sorted instance ids as closed Thrift Ranges: [0, 1, 2, 5] -> [0-2], [5-5]."""
    result: list[Any] = []
    for i in sorted(set(instances)):
        if result and result[-1].last == i - 1:
            result[-1].last = i
        else:
            result.append(api.Range(first=i, last=i))
    return result


def strategy(update: Any) -> tuple[Any, int, bool]:
    """(JobUpdateStrategy, group size, wait for batch completion) of an UpdateConfig."""
    batch = update.batch_size().get()
    wait = bool(update.wait_for_batch_completion().get())
    chosen = update.update_strategy()
    value = None if chosen is Empty else chosen.unwrap()
    if isinstance(value, schema.VariableBatchUpdateStrategy):
        sizes = list(value.batch_sizes().get())
        auto = bool(value.autopause_after_batch().get())
        return (api.JobUpdateStrategy(varBatchStrategy=api.VariableBatchJobUpdateStrategy(
            groupSizes=sizes, autopauseAfterBatch=auto)), sizes[0] if sizes else batch, wait)
    if isinstance(value, schema.BatchUpdateStrategy) or (value is None and wait):
        size = value.batch_size().get() if value is not None else batch
        auto = bool(value.autopause_after_batch().get()) if value is not None else False
        return (api.JobUpdateStrategy(batchStrategy=api.BatchJobUpdateStrategy(
            groupSize=size, autopauseAfterBatch=auto)), size, True)
    size = value.batch_size().get() if value is not None else batch
    return api.JobUpdateStrategy(queueStrategy=api.QueueJobUpdateStrategy(groupSize=size)), size, wait


def job_update_settings(update: Any, instances: Iterable[int] | None = None) -> Any:
    """The JobUpdateSettings of UpdateConfig `update`, limited to `instances` when given."""
    chosen, group, wait = strategy(update)
    pulse = update.pulse_interval_secs()
    pinned = ranges(instances) if instances else None
    return api.JobUpdateSettings(
        updateGroupSize=group,
        maxPerInstanceFailures=update.max_per_shard_failures().get(),
        maxFailedInstances=update.max_total_failures().get(),
        minWaitInInstanceRunningMs=update.watch_secs().get() * 1000,
        rollbackOnFailure=bool(update.rollback_on_failure().get()),
        waitForBatchCompletion=wait,
        updateOnlyTheseInstances=pinned,
        blockIfNoPulsesAfterMs=None if pulse is Empty else pulse.get() * 1000,
        slaAware=bool(update.sla_aware().get()),
        updateStrategy=chosen)
