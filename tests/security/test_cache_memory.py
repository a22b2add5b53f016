"""The job manager's cache keeps per-instance configs within its budget (issue 23 item 10).

An attack run created three jobs of 800 per-instance configs of 60 KiB each (within the
maxima): the job manager went from 140 to 877 MB and stayed there, because every cached
config version kept every instance's spec.  Cached jobs now hold their per-instance specs
through one least-recently-used cache bounded by `JobManagerConfig.task_config_cache_bytes`
(peloton/jobmgr/task_configs.py) and read the others back from storage.

Deterministic (tests/unit/jobmgr/harness.py: fake clock, in-memory SQLite, whose pages
tracemalloc does not count): the three jobs are created and run to RUNNING, then the
cache's accounted bytes are under the cap, the Python memory the job manager still holds
is bounded by the cap (not by the jobs' size), and every instance still runs with its own
config.
"""

from __future__ import annotations

import dataclasses
import gc
import tracemalloc
from collections.abc import Iterator

import pytest

from peloton.core.model.job import JobSpec
from peloton.core.states import TaskState
from peloton.jobmgr.config import JobManagerConfig
from tests.unit.jobmgr.harness import Harness, job_spec

pytestmark = pytest.mark.timeout(300)
JOBS = 3
INSTANCES = 800
#: 15 environment variables of 4,000 characters: a 60 KiB per-instance config.  (Not labels:
#: the fake resource and host managers keep every task's labels, as the real ones do in
#: their own processes, and this measures the job manager.)
VARIABLES = 15
VALUE_BYTES = 4000
CAP = 56 * 1024 * 1024
#: What else the job manager may keep per job (runtimes, queues, the fakes' records).
SLACK = 24 * 1024 * 1024


def big_spec(n: int) -> JobSpec:
    spec = job_spec(INSTANCES, name=f"test/big-{n}")
    task = spec.default_task
    own = {i: dataclasses.replace(task, command=dataclasses.replace(task.command, environment=tuple(
        (f"V{j}", f"{n}-{i}-" + "x" * VALUE_BYTES) for j in range(VARIABLES))))
        for i in range(INSTANCES)}
    return dataclasses.replace(spec, instance_tasks=own)


@pytest.fixture
def harness() -> Iterator[Harness]:
    h = Harness(config=JobManagerConfig(task_config_cache_bytes=CAP))
    try:
        yield h
    finally:
        h.close()


def test_three_jobs_of_big_instance_configs_stay_within_the_cache_budget(
        harness: Harness) -> None:
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        ids = []
        for n in range(JOBS):
            ids.append(harness.create(big_spec(n)))
            harness.run_due()
            # The fake host manager records every launch with its spec; the real one is
            # another process.  What is measured is what the job manager holds.
            harness.hosts.launches.clear()
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()

    wire = JOBS * INSTANCES * VARIABLES * VALUE_BYTES
    assert held < CAP + SLACK, (
        f"the job manager holds {held / 2**20:.0f} MiB after {JOBS} jobs of "
        f"{wire / 2**20:.0f} MiB of per-instance configs (cap {CAP / 2**20:.0f} MiB)")
    configs = harness.jm.cache.deps.task_configs
    assert 0 < configs.bytes <= CAP, configs.bytes

    for n, job_id in enumerate(ids):
        assert set(harness.states(job_id)) == {TaskState.RUNNING}
        job = harness.job(job_id)
        for i in (0, 399, 799):
            assert job.task_spec(i).command.environment[0][1].startswith(f"{n}-{i}-"), \
                (job_id, i)
    assert configs.bytes <= CAP
