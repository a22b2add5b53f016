"""The job managers' cluster-wide chores: work of no one job, run by exactly one of them.

Today one chore: expiring pod events past their retention (`expire_pod_events`; SQL
stores keep an expiry column that nothing else sweeps, Cassandra's TTL makes it a no-op).

A lone job manager holds every partition and runs the chores.  Among all-active members
only the holder of `CHORE_PARTITION` (partition 0) runs them (`Ownership.runs_chores`,
the one place the rule is kept), and its chore writes go through that partition's fence
(storage/partition_fences.py, `By.CHORE`): a member that still believes it holds
partition 0 after a new owner claimed it is refused by the store, so two members never
run a chore's write at once.  Chores are idempotent sweeps, so one skipped while
partition 0 moves is simply done at the next round.
"""

from __future__ import annotations

import logging

from peloton.common.loop import Loop
from peloton.jobmgr.ownership import Ownership
from peloton.storage.history_store import PodEventStore
from peloton.storage.leader_store import FencedOut
from peloton.storage.partition_fences import PartitionNotHeld

log = logging.getLogger(__name__)
#: Seconds between rounds of chores (retention is counted in days: no hurry).
INTERVAL = 600.0


class Chores:
    """Runs the cluster-wide chores every `interval` seconds while this job manager is
    their runner; `start()` / `stop()` like every component."""

    name = "chores"

    def __init__(self, store: PodEventStore, ownership: Ownership, *,
                 interval: float = INTERVAL) -> None:
        self.store = store
        self.ownership = ownership
        self._loop = Loop("chores", self.run_once, interval=interval, delay_first=True,
                          log=log)

    def start(self) -> None:
        """Begin the rounds (the first one after `interval`: a start has more urgent work)."""
        self._loop.start()

    def stop(self) -> None:
        """Stop the rounds."""
        self._loop.stop()

    def run_once(self) -> int:
        """One round: the chores, if this job manager runs them (else nothing).  Returns
        the pod events expired."""
        if not self.ownership.runs_chores:
            return 0
        try:
            expired = self.store.expire_pod_events()
        except (FencedOut, PartitionNotHeld) as exc:
            # Partition 0 moved under the round: its new owner runs the next one.
            log.info("chores: partition 0 moved to another member: %s", exc)
            return 0
        if expired:
            log.info("chores: expired %d pod events", expired)
        return expired
