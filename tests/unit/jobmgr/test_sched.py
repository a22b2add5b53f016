"""What the job manager hands the resource manager: placement strategy and the job label."""

from __future__ import annotations

from dataclasses import replace

import pytest

from peloton.core.model.constraints import Label
from peloton.core.model.job import PlacementStrategy
from peloton.core.model.task import TaskRuntime
from peloton.core.placement.request import JOB_LABEL_KEY, Strategy, job_label
from peloton.core.states import JobType
from peloton.jobmgr.sched import NeedsCache, rm_task
from tests.contract import factories as f


@pytest.mark.parametrize(("job_type", "placement", "strategy"), [
    (JobType.BATCH, PlacementStrategy.UNSET, Strategy.PACK),
    (JobType.SERVICE, PlacementStrategy.UNSET, Strategy.SPREAD),
    (JobType.SERVICE, PlacementStrategy.PACK_HOST, Strategy.PACK),
    (JobType.BATCH, PlacementStrategy.SPREAD_JOB, Strategy.SPREAD_JOB),
])
def test_the_jobs_placement_strategy_picks_the_ranking(job_type: JobType,
                                                      placement: PlacementStrategy,
                                                      strategy: Strategy) -> None:
    spec = replace(f.job_spec(), type=job_type, placement_strategy=placement)
    task = rm_task("job-1", spec, 0, TaskRuntime(), NeedsCache())
    assert task.request.needs.strategy is strategy
    spread = placement is PlacementStrategy.SPREAD_JOB
    assert (job_label("job-1") in task.request.labels) is spread
    assert all(lb.key != JOB_LABEL_KEY for lb in task.request.labels) is not spread


def test_needs_are_shared_per_spec_and_strategy() -> None:
    cache = NeedsCache()
    spec = replace(f.job_spec(), labels=(Label("a", "b"),))
    spread = replace(spec, placement_strategy=PlacementStrategy.SPREAD_JOB)
    one = rm_task("j", spec, 0, TaskRuntime(), cache).request.needs
    assert rm_task("j", spec, 2, TaskRuntime(), cache).request.needs is one
    assert rm_task("j", spread, 0, TaskRuntime(), cache).request.needs.strategy is \
        Strategy.SPREAD_JOB
