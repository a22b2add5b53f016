"""Fencing per job partition: a member's writes to a partition's jobs pass only while it owns it.

With all-active job managers (docs/design/all-active-jobmgr.md) each job partition has one
owner at a time, and a partition's epoch is kept in the store exactly as a leader role's is
(peloton/storage/leader_store.py), under the fence name `jobmgr/partition/<n>`
(`peloton.core.partitions.fence_name`): the owner claims its epoch (ZooKeeper's zxid of its
claim node) with `claim_leadership`, and writes the partition's jobs only through
`with_fencing(name, epoch)`, so the store refuses, in the write's own transaction, a
write of a member whose claim a newer owner has superseded, even if that member still
believes it owns the partition (paused, cut off from ZooKeeper, slow to notice).

`PartitionFences` is one member's set of held partitions.  Each claim starts a
`PartitionTerm` with its own fenced store view; a term's view refuses writes in process as
soon as the term ends (`release`, a newer claim of the same partition here, or the member's
`live()` turning false, e.g. its ZooKeeper connection suspended), and in the store once
another member claimed a newer epoch.  Objects of an ended term keep a view that never
writes again, even if the member later takes the partition back: the new term has a new
view (as a new leadership term builds new objects).

Each term also knows the epoch it took over from (`after`: the partition's epoch stored
just before this claim, None if never claimed), read while this member holds the
partition's ZooKeeper node, so no other claim can come between (a stale claimer's late
claim landing between the read and this claim is fenced out by it within that moment).
A Watch of one job that follows the job's owners checks it: a new owner that took over
from an epoch other than the owner it last read means someone drove the job in between
(peloton/jobmgr/servicers/watch_fanin.py).

`PartitionFences.routed()` is the store a member's job manager writes through: every
write goes to the fenced view of the partition it belongs to (PartitionNotHeld if this
member does not hold it), so no code path can write a job under another partition's
fence or under none.  Where a write's partition comes from is a table (`JOB_WRITES`, by
`By`), checked total over the Store's write methods by a test:

* a write of one job (its runtime, tasks, workflows, pod events, secrets, volumes): the
  job's partition, found from the job id, the item's `job_id`, the update's job or the
  volume's job (`delete_volume` names only the volume: its job is read once);
* a cron job's writes (`create_cron_job`, `update_cron_job`, `delete_cron_job`): the
  partition of the cron job's name (`peloton.core.cron.model.schedule_partition`), where
  its runs' job ids are drawn too, so one owner advances a schedule and creates its runs;
* a cluster-wide chore of the job managers (`expire_pod_events`): partition
  `CHORE_PARTITION`'s (0) fence, whose owner alone runs the chores
  (`peloton.jobmgr.ownership.Ownership.runs_chores`).

A batch (`write_task_runtimes`, `add_pod_events`) must stay within one partition: each
partition has its own fence, and one transaction checks one fence.

Writes the job manager never makes are refused through it (`CLUSTER_WRITES`, NotRoutable):
resource pools (the resource manager's), hosts and the framework registration (the host
manager's), bulk copies and their checkpoints (the migration tool, migrations/copy.py),
and `delete_secret` (the job manager writes no secret today; `create_secret` and
`update_secret` are routed by their item's job all the same, should it start).
A member's job manager calling one of these is a bug to find, not a write to fence.

Every call is made on the member's hub (one greenlet at a time); nothing here blocks
except the store calls.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from enum import Enum
from typing import Any, cast

from peloton.common.fencing import READ_PREFIXES
from peloton.core.errors import FailedPrecondition, InvalidArgument, NotFound, Unavailable
from peloton.core.partitions import (
    CHORE_PARTITION,
    DEFAULT_PARTITIONS,
    fence_name,
    partition_of,
)
from peloton.storage.leader_store import FencedOut
from peloton.storage.store import Store

log = logging.getLogger(__name__)


class PartitionNotHeld(Unavailable):
    """This member does not hold the partition of the job it was asked to write."""

    kind = "partition_not_held"


class PartitionTerm:
    """One member's hold on one partition, from its claim in the store until it ends.

    `store` writes only while the term is current (and, in the store, while no newer
    claim of the partition exists); reads always pass.
    """

    def __init__(self, store: Store, partition: int, count: int, epoch: int,
                 live: Callable[[], bool], after: int | None = None) -> None:
        self.partition = partition
        self.count = count
        self.epoch = epoch
        #: The partition's epoch stored before this claim (module docstring).
        self.after = after
        self._live = live
        self._ended = False
        self.store: Store = store.with_fencing(fence_name(partition), self._current_epoch)

    @property
    def current(self) -> bool:
        """The term has not ended and the member is live (its claim may still be refused
        by the store if a newer owner claimed; only a write can find that out)."""
        return not self._ended and self._live()

    def _current_epoch(self) -> int | None:
        return self.epoch if self.current else None

    def owns(self, job_id: str) -> bool:
        """`job_id` is in this term's partition (a writer checks it before writing a job
        through `store`, so no job is written under another partition's fence)."""
        return partition_of(job_id, self.count) == self.partition

    def end(self) -> None:
        """End the term: `store` refuses every write from now on.  Idempotent."""
        self._ended = True


class PartitionFences:
    """The partitions one member (`holder`) holds, each with its term and fenced store."""

    def __init__(self, store: Store, holder: str, *, count: int = DEFAULT_PARTITIONS,
                 live: Callable[[], bool] = lambda: True) -> None:
        self._store = store
        self.holder = holder
        self.count = count
        self._live = live
        self._terms: dict[int, PartitionTerm] = {}

    @property
    def held(self) -> frozenset[int]:
        """The partitions with a term that has not ended."""
        # a copy first: with kazoo's threading handler the membership loop claims on its
        # own thread while callers read this
        return frozenset(p for p, t in list(self._terms.items()) if t.current)

    def claim(self, partition: int, epoch: int | None) -> PartitionTerm:
        """Claim `partition` in the store from `epoch` on (None: solo, the stored epoch + 1)
        and start a term with it; a term of the partition held here before ends first.
        FencedOut if the store already has a newer epoch for the partition (this member's
        view of ZooKeeper is stale): nothing is held then."""
        if not 0 <= partition < self.count:
            raise ValueError(f"partition {partition} is not in 0..{self.count - 1}")
        self.release(partition)
        after = self._store.leader_epoch(fence_name(partition))
        stored = self._store.claim_leadership(fence_name(partition), epoch, self.holder)
        term = PartitionTerm(self._store, partition, self.count, stored, self._live, after)
        self._terms[partition] = term
        log.info("%s: holds partition %d (epoch %d)", self.holder, partition, stored)
        return term

    def claim_many(self, epochs: Mapping[int, int]) -> list[int]:
        """`claim` of several partitions at their epochs, in one store call (a leaver's
        thirty partitions claimed one by one kept its successor from writing any of them
        for 0.1-0.4 s on a busy hub); returns the partitions refused (FencedOut: a newer
        epoch stored, nothing held), sorted."""
        for partition in epochs:
            if not 0 <= partition < self.count:
                raise ValueError(f"partition {partition} is not in 0..{self.count - 1}")
            self.release(partition)
        names = {fence_name(p): p for p in epochs}
        stored = self._store.leader_epochs(list(names))
        after = {p: stored.get(fence_name(p)) for p in epochs}
        refused = {names[n] for n in self._store.claim_leaderships(
            {fence_name(p): e for p, e in epochs.items()}, self.holder)}
        for partition, epoch in sorted(epochs.items()):
            if partition in refused:
                continue
            self._terms[partition] = PartitionTerm(self._store, partition, self.count, epoch,
                                                   self._live, after[partition])
            log.info("%s: holds partition %d (epoch %d)", self.holder, partition, epoch)
        return sorted(refused)

    def release(self, partition: int) -> None:
        """End this member's term of `partition`, if any (its writes stop at once)."""
        term = self._terms.pop(partition, None)
        if term is not None:
            term.end()
            log.info("%s: released partition %d (epoch %d)", self.holder, partition, term.epoch)

    def epochs(self) -> dict[int, int]:
        """Partition -> epoch of every term held here (ended ones are gone): what this
        member's calls to its peers carry (peloton/api/ports_grpc/term_fence.py), so a
        peer refuses them once a newer owner of any of these partitions has called."""
        return {p: term.epoch for p, term in list(self._terms.items())}

    def release_all(self) -> None:
        """End every term (leaving the cluster, or ZooKeeper lost)."""
        for partition in list(self._terms):
            self.release(partition)

    def term(self, partition: int) -> PartitionTerm | None:
        """The current term of `partition` here, or None."""
        term = self._terms.get(partition)
        return term if term is not None and term.current else None

    def for_job(self, job_id: str) -> Store:
        """The fenced store to write `job_id` through; PartitionNotHeld if this member does
        not hold its partition (the write belongs to the owner: forward it there)."""
        return self.for_partition(partition_of(job_id, self.count), f"job {job_id}")

    def for_partition(self, partition: int, what: str = "a write") -> Store:
        """The fenced store of `partition` (`what` it is for: the error names it);
        PartitionNotHeld if this member does not hold it."""
        term = self.term(partition)
        if term is None:
            raise PartitionNotHeld(f"{self.holder} does not hold partition {partition} of "
                                   f"{what}")
        return term.store

    def routed(self) -> Store:
        """The store with every write of a job routed to its partition's fenced view (see
        the module docstring); reads go to the plain store."""
        return cast(Store, _Routed(self, self._store))


class By(Enum):
    """Where a write method's partition comes from."""

    JOB_ID = "the first argument, a job id"
    ITEM = "the first argument's job_id (UpdateInfo, SecretInfo, VolumeInfo)"
    BATCH = "each item's job_id (RuntimeWrite, PodEvent); one partition per batch"
    UPDATE = "the job of the update: the event's or the id's (read once, then remembered)"
    VOLUME = "the job of the volume id (read from the store; none: nothing to delete)"
    CRON = "the cron job's name (a CronJob's, or the name itself): its schedule's partition"
    CHORE = "no job: a cluster-wide chore, fenced by the chore partition (0)"


#: Every write a member's job manager makes, and where its partition comes from.
JOB_WRITES: dict[str, By] = {
    **{name: By.JOB_ID for name in (
        "add_active_job", "add_job_config", "create_job", "create_job_with_tasks",
        "create_task_configs", "create_task_runtimes", "delete_active_job", "delete_job",
        "delete_job_configs", "delete_pod_events", "delete_task_runtimes",
        "update_job_runtime", "update_task_runtime")},
    **{name: By.ITEM for name in (
        "create_update", "update_update", "create_secret", "update_secret", "create_volume",
        "update_volume")},
    **{name: By.CRON for name in ("create_cron_job", "delete_cron_job", "update_cron_job")},
    "write_task_runtimes": By.BATCH,
    "add_pod_events": By.BATCH,
    "add_workflow_event": By.UPDATE,
    "delete_update": By.UPDATE,
    "delete_volume": By.VOLUME,
    "expire_pod_events": By.CHORE,
}
#: Writes a job manager never makes (see the module docstring): refused through a routed
#: store.
CLUSTER_WRITES = frozenset({
    "clear_checkpoints", "create_resource_pool", "delete_host", "delete_records",
    "delete_resource_pool", "delete_secret", "put_checkpoint", "put_framework_info",
    "put_host", "put_records", "update_resource_pool"})
#: Methods about fencing itself: passed through.
META = frozenset({"claim_leadership", "claim_leaderships", "leader_epoch", "leader_epochs",
                  "with_fencing"})


class NotRoutable(FailedPrecondition):
    """A write no job manager makes (`CLUSTER_WRITES`), sent through a member's
    partition-routed store."""

    kind = "not_routable"


class _Routed:
    """Attribute proxy: reads pass through, writes go to their partition's fenced view."""

    def __init__(self, fences: PartitionFences, store: Store) -> None:
        self._fences = fences
        self._store = store
        self._job_of_update: dict[str, str] = {}  # an update's job never changes

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._store, name)
        if (not callable(value) or name.startswith(READ_PREFIXES) or name.startswith("_")
                or name in META):
            return value
        by = JOB_WRITES.get(name)
        if by is None:
            raise NotRoutable(f"{name} is not a job manager's write; a partition-routed "
                              "store cannot fence it")

        @functools.wraps(value)
        def write(*args: Any, **kwargs: Any) -> Any:
            if by is By.CHORE:
                return getattr(self._fences.for_partition(CHORE_PARTITION, f"chore {name}"),
                               name)(*args, **kwargs)
            first = args[0] if args else next(iter(kwargs.values()))
            if by is By.BATCH and not first:
                return value(*args, **kwargs)  # nothing to write, nothing to fence
            job_id = self._job_id(by, first)
            if job_id is None:
                return None  # a volume already gone: its delete has nothing to do
            return getattr(self._fences.for_job(job_id), name)(*args, **kwargs)

        self.__dict__[name] = write
        return write

    def _job_id(self, by: By, first: Any) -> str | None:
        """The job (or, for a cron job, the name) whose partition fences the write."""
        if by is By.JOB_ID:
            return str(first)
        if by is By.ITEM:
            return str(first.job_id)
        if by is By.CRON:  # partition_of(name) is the schedule's partition (see above)
            return str(first if isinstance(first, str) else first.name)
        if by is By.BATCH:
            return self._one_partition(first)
        if by is By.VOLUME:
            return self._job_of_volume_id(str(first))
        update_id = str(first if isinstance(first, str) else first.update_id)
        job_id = self._job_of_update.get(update_id)
        if job_id is None:
            job_id = self._job_of_update[update_id] = self._store.get_update(update_id).job_id
        return job_id

    def _job_of_volume_id(self, volume_id: str) -> str | None:
        # Not remembered (unlike an update's job): a volume is deleted once, so a memo
        # would only grow.
        try:
            return self._store.get_volume(volume_id).job_id
        except NotFound:
            return None

    def _one_partition(self, items: Sequence[Any]) -> str:
        count = self._fences.count
        first = str(items[0].job_id)
        partition = partition_of(first, count)
        # A batch is ~1,000 runs of a few jobs: each distinct job is asked once.
        if any(partition_of(job_id, count) != partition
               for job_id in {str(item.job_id) for item in items}):
            raise InvalidArgument("a batch of writes spans job partitions; each partition "
                                  "has its own fence, so write one partition per batch")
        return first


__all__ = ["CLUSTER_WRITES", "JOB_WRITES", "By", "FencedOut", "NotRoutable", "PartitionFences",
           "PartitionNotHeld", "PartitionTerm"]
