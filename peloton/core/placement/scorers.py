"""Rankers: in which order hosts are offered to the filters for one task.

A scorer does not score every host and sort (that is O(hosts) per task);
it walks the index's sorted keys in preference order and the placer takes
the first host that passes every filter.  For the ranking to be exact, the
key order *is* the score:

* `PackScorer` (batch; best fit): ascending free cpu, starting at the
  first host with enough cpu, so a task lands on the fullest host that
  still fits and large holes stay open for large tasks.  Peloton's batch
  placer packs first-fit in offer order; best fit packs tighter.
* `SpreadScorer` (services; least loaded): descending free cpu, stopping
  at the first host without enough cpu, so instances spread over the
  emptiest hosts.  Peloton's mimir ranks by free disk, then memory, then
  cpu; free cpu is the better proxy for load and keeps one index.
* `SpreadJobScorer` (a job's placementStrategy SPREAD_JOB): hosts holding
  the fewest tasks of the same job first (counted by the job label its
  tasks carry), then least loaded.  So a job gets one task per host as far
  as the hosts go.  Peloton's batch strategy gives each host at most one of
  a job's tasks per placement round and leaves the rest for the next round,
  where they may land anywhere; here they are placed at once, on the hosts
  with the fewest of the job's tasks, which spreads at least as evenly.
  This walk sorts the candidates, O(hosts log hosts) per task, and is used
  only by jobs that ask for it.

Ties break by host position, so results are deterministic.  The desired
host, when a task names one, is tried before either walk (stack.py).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from typing import Protocol

from peloton.core.placement.filters import CompiledNeeds
from peloton.core.placement.hosts import INDEX_MASK, HostIndex, HostRecord, Partition, lower_key
from peloton.core.placement.request import JOB_LABEL_KEY, Strategy, TaskRequest


class HostScorer(Protocol):
    """Yields candidate hosts of one partition, best first."""

    def candidates(self, index: HostIndex, part: Partition, cn: CompiledNeeds,
                   req: TaskRequest) -> Iterator[HostRecord]:
        """Hosts in preference order; only hosts with enough cpu need be yielded."""


class PackScorer:
    """Best fit: the least free cpu that is still enough."""

    def candidates(self, index: HostIndex, part: Partition, cn: CompiledNeeds,
                   req: TaskRequest) -> Iterator[HostRecord]:
        """Hosts of `part` with enough cpu, best first."""
        keys = part.rcpu_keys if cn.revocable else part.cpu_keys
        hosts = index.hosts
        for i in range(bisect.bisect_left(keys, lower_key(cn.cpu)), len(keys)):
            rec = hosts[keys[i] & INDEX_MASK]
            assert rec is not None
            yield rec


class SpreadScorer:
    """Least loaded: the most free cpu first."""

    def candidates(self, index: HostIndex, part: Partition, cn: CompiledNeeds,
                   req: TaskRequest) -> Iterator[HostRecord]:
        """Hosts of `part` with enough cpu, best first."""
        keys = part.rcpu_keys if cn.revocable else part.cpu_keys
        hosts = index.hosts
        stop = bisect.bisect_left(keys, lower_key(cn.cpu))
        for i in range(len(keys) - 1, stop - 1, -1):
            rec = hosts[keys[i] & INDEX_MASK]
            assert rec is not None
            yield rec


class SpreadJobScorer:
    """Fewest tasks of the same job first, then the most free cpu."""

    def candidates(self, index: HostIndex, part: Partition, cn: CompiledNeeds,
                   req: TaskRequest) -> Iterator[HostRecord]:
        """Hosts of `part` with enough cpu, best first."""
        least_loaded = list(SpreadScorer().candidates(index, part, cn, req))
        label = next((lb for lb in req.labels if lb.key == JOB_LABEL_KEY), None)
        if label is None:
            return iter(least_loaded)
        # A stable sort: hosts with equal counts keep the least-loaded order.
        return iter(sorted(least_loaded, key=lambda h: h.task_labels.get(label, 0)))


SCORERS: dict[Strategy, HostScorer] = {Strategy.PACK: PackScorer(),
                                        Strategy.SPREAD: SpreadScorer(),
                                        Strategy.SPREAD_JOB: SpreadJobScorer()}
