"""Peloton jobs as Aurora JobSummary, JobConfiguration and JobStats.

Task counts come from the job status' per-state pod counts, bucketed as
Peloton's bridge did (ptoa/job_summary.go).  getJobs reports as instance
count the number of active tasks (Aurora derives JobConfiguration from live
tasks); getJobSummary reports the configured count.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aurorabridge.ptoa import states
from aurorabridge.thrift_api import api


def job_stats(pod_stats: Mapping[str, int]) -> Any:
    """JobStats from `{pod state name: count}`."""
    def total(names: tuple[str, ...]) -> int:
        return sum(int(pod_stats.get(n, 0)) for n in names)

    return api.JobStats(activeTaskCount=total(states.ACTIVE_PODS),
                        finishedTaskCount=total(states.FINISHED_PODS),
                        failedTaskCount=total(states.FAILED_PODS),
                        pendingTaskCount=total(states.PENDING_PODS))


def active_count(pod_stats: Mapping[str, int]) -> int:
    """Number of active tasks."""
    return sum(int(pod_stats.get(n, 0)) for n in states.ACTIVE_PODS)


def job_configuration(key: Any, owner: str, task_config: Any, instance_count: int,
                      cron_schedule: str | None = None,
                      cron_policy: int = api.CronCollisionPolicy.KILL_EXISTING) -> Any:
    """A JobConfiguration (a cron job's when `cron_schedule` is given)."""
    return api.JobConfiguration(key=key, owner=api.Identity(user=owner), cronSchedule=cron_schedule,
                                cronCollisionPolicy=cron_policy,
                                taskConfig=task_config, instanceCount=instance_count)


def job_summary(key: Any, owner: str, task_config: Any, instance_count: int,
                pod_stats: Mapping[str, int], cron_schedule: str | None = None,
                cron_policy: int = api.CronCollisionPolicy.KILL_EXISTING,
                next_cron_run_ms: int | None = None) -> Any:
    """A JobSummary."""
    return api.JobSummary(job=job_configuration(key, owner, task_config, instance_count, cron_schedule,
                                                cron_policy),
                          stats=job_stats(pod_stats), nextCronRunMs=next_cron_run_ms)
