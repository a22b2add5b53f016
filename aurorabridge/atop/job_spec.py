"""Aurora jobs and update settings as Peloton stateless JobSpec, CreateSpec and UpdateSpec.

* JobSpec: name `role/env/name`, owner and owning team = TaskConfig.owner.user,
  the job labels, instance count, the pool, SLA {priority, preemptible and
  revocable from the tier (revocable -> both; others -> neither, as Peloton's
  bridge: its services must not be preempted), maximum unavailable =
  max(1, 10% of the instances)}, and the default pod spec.
* Update settings: batch = group size (from updateStrategy when present, the
  first batch for variable batches), retries per instance =
  maxPerInstanceFailures + 1, tolerated failed instances =
  maxFailedInstances + 1, start paused when pulses are required; and, in our
  update options (proto/pelotonpy/api/update, beside Peloton's UpdateSpec), the
  strategy with its group sizes and auto-pause, and the watch time
  (minWaitInInstanceRunningMs), which the job manager executes.
"""

from __future__ import annotations

from typing import Any

from aurorabridge import labels
from aurorabridge import update_settings as stored_settings
from aurorabridge.atop.job_key import JobKey
from peloton.api.gen.peloton.api.v1alpha import peloton_pb2
from peloton.api.gen.peloton.api.v1alpha.job.stateless import stateless_pb2
from peloton.api.gen.pelotonpy.api.update import update_pb2

REVOCABLE_TIER = "revocable"


def sla_spec(task: Any, instance_count: int) -> Any:
    """The job's SlaSpec."""
    revocable = task.tier == REVOCABLE_TIER
    return stateless_pb2.SlaSpec(priority=max(0, task.priority or 0), preemptible=revocable,
                                 revocable=revocable,
                                 maximum_unavailable_instances=max(1, int(0.1 * instance_count)))


def job_spec(task: Any, key: JobKey, instance_count: int, respool_id: str, pod: Any,
             *, queue_unfit: bool = False) -> Any:
    """The JobSpec for `instance_count` copies of `pod` (built by atop.pod_spec).

    `queue_unfit` labels the job to be queued even if no host or pool limit could hold it
    now (Aurora accepts such a job and leaves it PENDING), instead of refused at create.
    """
    owner = task.owner.user if task.owner is not None and task.owner.user else key.role
    job_labels = labels.job_labels(key.role, key.environment, key.name)
    if queue_unfit:
        job_labels.append(labels.label(labels.QUEUE_ANYWAY, "true"))
    return stateless_pb2.JobSpec(
        name=key.job_name, owner=owner, owning_team=owner, labels=job_labels,
        instance_count=instance_count, sla=sla_spec(task, instance_count), default_spec=pod,
        respool_id=peloton_pb2.ResourcePoolID(value=respool_id))


def group_size(settings: Any) -> int:
    """Instances updated at once, from the update strategy or updateGroupSize."""
    strategy = settings.updateStrategy
    if strategy is not None:
        if strategy.queueStrategy is not None:
            return int(strategy.queueStrategy.groupSize or 0)
        if strategy.batchStrategy is not None:
            return int(strategy.batchStrategy.groupSize or 0)
        if strategy.varBatchStrategy is not None:
            sizes = strategy.varBatchStrategy.groupSizes or [0]
            return int(sizes[0] or 0)
    return int(settings.updateGroupSize or 0)


def create_spec(settings: Any) -> Any:
    """CreateSpec of a job first deployed by an update."""
    return stateless_pb2.CreateSpec(
        batch_size=group_size(settings),
        max_instance_retries=(settings.maxPerInstanceFailures or 0) + 1,
        max_tolerable_instance_failures=(settings.maxFailedInstances or 0) + 1,
        start_paused=(settings.blockIfNoPulsesAfterMs or 0) > 0)


def update_spec(settings: Any, in_place: bool) -> Any:
    """UpdateSpec of an update of an existing job."""
    return stateless_pb2.UpdateSpec(
        batch_size=group_size(settings),
        rollback_on_failure=bool(settings.rollbackOnFailure),
        max_instance_retries=(settings.maxPerInstanceFailures or 0) + 1,
        max_tolerable_instance_failures=(settings.maxFailedInstances or 0) + 1,
        start_paused=(settings.blockIfNoPulsesAfterMs or 0) > 0,
        in_place=in_place, start_pods=True)


def update_options(settings: Any, *, rollback: bool = False, watch: bool = True) -> Any:
    """Our UpdateOptions for Aurora's settings (Aurora's default strategy when none is
    given).  A `rollback` never pauses itself after a batch (Aurora auto-pauses only
    updates rolling forward) and is taken in Aurora's rollback order (highest instance first).
    Without `watch` minWaitInInstanceRunningMs is ignored, as Peloton's bridge does."""
    strategy = stored_settings.effective(settings).updateStrategy
    watch_ms = int(settings.minWaitInInstanceRunningMs or 0) if watch else 0
    if strategy.varBatchStrategy is not None:
        var = strategy.varBatchStrategy
        return update_pb2.UpdateOptions(
            strategy=update_pb2.STRATEGY_VAR_BATCH, group_sizes=[int(g) for g in var.groupSizes or ()],
            autopause_after_batch=bool(var.autopauseAfterBatch) and not rollback, watch_time_ms=watch_ms,
            rollback=rollback)
    if strategy.batchStrategy is not None:
        return update_pb2.UpdateOptions(
            strategy=update_pb2.STRATEGY_BATCH,
            autopause_after_batch=bool(strategy.batchStrategy.autopauseAfterBatch) and not rollback,
            watch_time_ms=watch_ms, rollback=rollback)
    return update_pb2.UpdateOptions(strategy=update_pb2.STRATEGY_QUEUE, watch_time_ms=watch_ms,
                                    rollback=rollback)
