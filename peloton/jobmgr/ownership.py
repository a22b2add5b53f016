"""Which jobs this job manager drives: the job partitions it holds.

With all-active job managers (docs/design/all-active-jobmgr.md) each member runs the
goal-state engines, recovery and status handling only for the jobs of the partitions it
holds (`peloton.core.partitions.partition_of`).  A job manager alone holds every
partition (`Ownership()`), which is today's behaviour: nothing is filtered.

`JobManager.acquire_partition` / `release_partition` (app.py) change it; the components
ask `owns(job_id)`, and the loops that take work from the resource manager (placements,
preemption victims) ask it for `asked()`'s partitions only, so the work of a job reaches
its owner and no one else.  Everything runs on the job manager's hub, so the set needs no
lock.

Work that belongs to no one job is of two kinds, each with one owner:

* a cron job's schedule belongs to the partition of its name (`owns_schedule`), where its
  runs' job ids are drawn too (peloton/core/cron/model.py): its owner advances it and
  creates its runs;
* a cluster-wide chore (expiring old pod events) is run by the holder of partition
  `CHORE_PARTITION` (0) only (`runs_chores`), and written under that partition's fence
  (storage/partition_fences.py), so while partition 0 moves no two members run it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from peloton.core.cron.model import schedule_partition
from peloton.core.model.ids import new_id
from peloton.core.partitions import (
    CHORE_PARTITION,
    DEFAULT_PARTITIONS,
    PartitionSet,
    partition_of,
)


class Ownership:
    """The partitions this job manager holds (by default: all of them)."""

    def __init__(self, count: int = DEFAULT_PARTITIONS, held: Iterable[int] | None = None) -> None:
        self.count = count
        self._held: set[int] = set(range(count)) if held is None else set(held)
        if any(not 0 <= p < count for p in self._held):
            raise ValueError(f"partitions must be in 0..{count - 1}: {sorted(self._held)}")

    @property
    def held(self) -> frozenset[int]:
        """The partitions held now."""
        return frozenset(self._held)

    @property
    def everything(self) -> bool:
        """Every partition is held (a lone job manager): no job is filtered out."""
        return len(self._held) == self.count

    def partition(self, job_id: str) -> int:
        """The partition of `job_id`."""
        return partition_of(job_id, self.count)

    def owns(self, job_id: str) -> bool:
        """This job manager drives `job_id` (holds its partition)."""
        return self.everything or partition_of(job_id, self.count) in self._held

    def holds_none(self) -> bool:
        """This member holds no partition now (joined and not yet assigned any, or between
        giving its partitions up and claiming others)."""
        return not self.everything and not self._held

    def owns_schedule(self, name: str) -> bool:
        """This job manager advances the cron job `name` (holds its partition)."""
        return self.everything or schedule_partition(name, self.count) in self._held

    @property
    def runs_chores(self) -> bool:
        """This job manager runs the cluster-wide chores: it holds `CHORE_PARTITION` (a
        lone job manager holds it; among members exactly its owner does)."""
        return CHORE_PARTITION in self._held

    def asked(self) -> PartitionSet | None:
        """What to ask the resource manager for: None (every job) while every partition is
        held, so a lone job manager's calls are what they were before partitions; else
        the partitions held now (none: ask for nothing)."""
        return None if self.everything else PartitionSet(self.count, frozenset(self._held))

    def new_job_id(self, draw: Callable[[], str] = new_id) -> str:
        """A fresh job id this job manager drives (so a create needs no forwarding): ids
        are drawn until one falls in a held partition (any id while all or none are
        held).  A member holding h of P partitions draws P/h ids on average."""
        if self.everything or not self._held:
            return draw()
        while not self.owns(job_id := draw()):
            pass
        return job_id

    def acquire(self, partition: int) -> None:
        """Hold `partition` from now on."""
        if not 0 <= partition < self.count:
            raise ValueError(f"partition {partition} is not in 0..{self.count - 1}")
        self._held.add(partition)

    def release(self, partition: int) -> None:
        """Hold `partition` no more."""
        self._held.discard(partition)
