"""Knobs of the resource manager (Peloton's config/resmgr/base.yaml, with shorter periods).

Peloton recomputes entitlements every 60 s and checks for preemption every
60 s with 5 sustained cycles, because its cycle walked a large tree while
holding locks.  Ours is a pure computation of microseconds over the tree's
running totals, so it runs every second and on every pool change; the
preemptor runs every 2 s and acts after 3 sustained cycles (Peloton's
development values), so a reserved pool gets its room back in ~6 s.

The placement timeouts follow Peloton's development config: a task the
placement engine took but never reported on (the engine died) comes back
after 20 s (plus the per-attempt backoff).  Unlike Peloton, a placement
that *failed* is not retried at once: the task waits `retry_delay`,
doubling per attempt up to `retry_delay_max`, so an unplaceable task does
not spin the placement loop.
"""

from __future__ import annotations

from dataclasses import dataclass

from peloton.core.errors import InvalidArgument


@dataclass(frozen=True, slots=True)
class ResourceManagerConfig:
    """Timing, batching and policy switches of the resource manager."""

    #: Admission runs this often (seconds) and whenever gangs are enqueued or freed.
    scheduling_period: float = 0.1
    #: Gangs admitted per leaf pool per admission pass.
    admit_per_pool: int = 1000
    #: Backfill (core/respool/admission.py, README.md here): refused gangs of distinct shapes
    #: admission checks per queue and pass (0: Peloton's strict FIFO), and seconds a refused gang waits
    #: before it holds a reservation that later gangs must fit beside.
    backfill_depth: int = 1000
    backfill_reserve_after: float = 30.0
    #: Entitlements are recomputed from fresh cluster capacity this often (seconds);
    #: also at once on any pool change, and after new demand at most every `entitlement_min_interval`.
    entitlement_period: float = 1.0
    entitlement_min_interval: float = 0.2
    #: Preemption (Peloton: enabled, 60 s, 5 cycles; development: 10 s, 3 cycles).
    preemption_enabled: bool = True
    preemption_period: float = 2.0
    sustained_over_allocation_count: int = 3
    #: State timeouts (seconds).  PLACING: Peloton's development value (the engine answers
    #: in milliseconds unless it died).  LAUNCHING: longer than the job manager's own launch
    #: timeout (180 s), which restarts a stuck launch as a new run; this one only catches
    #: placements taken and never launched, and a shorter one would place a slow starter again.
    placing_timeout: float = 20.0
    launching_timeout: float = 300.0
    preempting_timeout: float = 60.0
    #: Added to the placing timeout per attempt within a cycle (Peloton's placement_retry_backoff).
    placement_retry_backoff: float = 10.0
    #: Attempts per placement cycle; an unplaced task returns to PENDING after each full cycle.
    placement_attempts_per_cycle: int = 3
    #: Wait before a task whose placement failed is offered to placement again (doubles per
    #: attempt in the cycle, capped at `retry_delay_max`).
    retry_delay: float = 0.2
    retry_delay_max: float = 2.0
    #: Status events read per poll of the host manager's stream.
    event_batch: int = 4000
    #: How long loops that poll another daemon wait for work (seconds).
    poll_timeout: float = 0.5
    #: Name under which the resource manager reads the host manager's status stream.
    stream_consumer: str = "resmgr"

    def __post_init__(self) -> None:
        for name in ("scheduling_period", "entitlement_period", "preemption_period",
                     "placing_timeout", "launching_timeout", "preempting_timeout",
                     "poll_timeout"):
            if getattr(self, name) <= 0:
                raise InvalidArgument(f"{name} must be > 0", field=name)
        for name in ("entitlement_min_interval", "placement_retry_backoff", "retry_delay",
                     "retry_delay_max", "backfill_reserve_after", "backfill_depth"):
            if getattr(self, name) < 0:
                raise InvalidArgument(f"{name} must be >= 0", field=name)
        for name in ("admit_per_pool", "sustained_over_allocation_count",
                     "placement_attempts_per_cycle", "event_batch"):
            if getattr(self, name) < 1:
                raise InvalidArgument(f"{name} must be >= 1", field=name)
