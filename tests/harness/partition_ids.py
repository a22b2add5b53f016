"""Job ids of a chosen partition, for tests of partitioned job managers.

Which partition a job belongs to is a hash of its id (`peloton.core.partitions.partition_of`),
so a test that needs "a job of partition 2" draws ids until one lands there.
"""

from __future__ import annotations

from peloton.core.model.ids import new_id
from peloton.core.partitions import partition_of

#: Draws before giving up: a partition of `count` is hit with probability 1/count a draw.
MAX_DRAWS = 100_000


def job_in(partition: int, count: int) -> str:
    """A fresh job id (a UUID, as run ids need) in `partition` of `count` partitions."""
    for _ in range(MAX_DRAWS):
        job_id = new_id()
        if partition_of(job_id, count) == partition:
            return job_id
    raise ValueError(f"no job id of partition {partition} of {count} in {MAX_DRAWS} draws")
