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

Ties break by host position, so results are deterministic.  The desired
host, when a task names one, is tried before either walk (stack.py).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from typing import Protocol

from peloton.core.placement.filters import CompiledNeeds
from peloton.core.placement.hosts import INDEX_MASK, HostIndex, HostRecord, Partition, lower_key
from peloton.core.placement.request import Strategy


class HostScorer(Protocol):
    """Yields candidate hosts of one partition, best first."""

    def candidates(self, index: HostIndex, part: Partition,
                   cn: CompiledNeeds) -> Iterator[HostRecord]:
        """Hosts in preference order; only hosts with enough cpu need be yielded."""


class PackScorer:
    """Best fit: the least free cpu that is still enough."""

    def candidates(self, index: HostIndex, part: Partition,
                   cn: CompiledNeeds) -> Iterator[HostRecord]:
        """Hosts of `part` with enough cpu, best first."""
        keys = part.rcpu_keys if cn.revocable else part.cpu_keys
        hosts = index.hosts
        for i in range(bisect.bisect_left(keys, lower_key(cn.cpu)), len(keys)):
            rec = hosts[keys[i] & INDEX_MASK]
            assert rec is not None
            yield rec


class SpreadScorer:
    """Least loaded: the most free cpu first."""

    def candidates(self, index: HostIndex, part: Partition,
                   cn: CompiledNeeds) -> Iterator[HostRecord]:
        """Hosts of `part` with enough cpu, best first."""
        keys = part.rcpu_keys if cn.revocable else part.cpu_keys
        hosts = index.hosts
        stop = bisect.bisect_left(keys, lower_key(cn.cpu))
        for i in range(len(keys) - 1, stop - 1, -1):
            rec = hosts[keys[i] & INDEX_MASK]
            assert rec is not None
            yield rec


SCORERS: dict[Strategy, HostScorer] = {Strategy.PACK: PackScorer(),
                                        Strategy.SPREAD: SpreadScorer()}
