"""How many instances a rolling workflow may start now: Aurora's update strategies.

Pure rules over counts, used by the planner (`update_plan.py`):

* QUEUE (Peloton's batch size, Aurora's queueStrategy): keep up to the batch
  size in flight; another starts as soon as one is done or failed;
* BATCH (Aurora's batchStrategy): start a group of the batch size only when
  nothing is in flight, so each group finishes before the next begins;
* VAR_BATCH (Aurora's varBatchStrategy): as BATCH, the group sizes taken in
  turn by how many instances were already touched, the last size repeating.
  Rolling back, the groups are walked from the end (Aurora's reverse rule): the
  first group undone is the last one done, which may have been cut short.

A batch size of 0 (and an empty size list) means every instance at once.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from peloton.core.model.update import Strategy, UpdateSpec


def batch_limit(spec: UpdateSpec, total: int) -> int:
    """The batch size of `spec` over `total` instances; 0 means no limit."""
    if spec.batch_size > 0:
        return spec.batch_size
    if spec.batch_percentage > 0:
        return max(1, math.ceil(total * spec.batch_percentage / 100.0))
    return 0


def var_group_size(sizes: Sequence[int], *, total: int, idle: int, rolling_back: bool) -> int:
    """The size of the next VAR_BATCH group when `idle` of `total` instances are untouched."""
    if not sizes:
        return idle
    if not rolling_back:
        touched = total - idle
        reached = 0
        for size in sizes:
            reached += size
            if reached > touched:
                return size
        return sizes[-1]
    # Undo from the last group done: `idle` is what rolling forward had touched.
    left = idle
    for size in sizes:
        if left <= size:
            return left
        left -= size
    tail = left % sizes[-1]
    return tail or sizes[-1]


def is_batched(spec: UpdateSpec) -> bool:
    """Whether groups wait for each other (BATCH, VAR_BATCH), so a batch boundary exists."""
    return spec.strategy is not Strategy.QUEUE


def startable(spec: UpdateSpec, *, total: int, idle: int, active: int,
              rolling_back: bool = False) -> int:
    """How many of the `idle` (untouched) instances may start now, with `active` in flight."""
    if idle <= 0:
        return 0
    if spec.strategy is Strategy.QUEUE:
        limit = batch_limit(spec, total)
        return idle if limit == 0 else max(0, min(idle, limit - active))
    if active > 0:
        return 0
    if spec.strategy is Strategy.BATCH:
        limit = batch_limit(spec, total)
        return idle if limit == 0 else min(idle, limit)
    return min(idle, var_group_size(spec.group_sizes, total=total, idle=idle,
                                    rolling_back=rolling_back))
