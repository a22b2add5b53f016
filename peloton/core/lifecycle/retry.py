"""Retry and backoff rules as pure functions of counts and times (no clocks here).

* Service restarts are throttled exponentially: a task that failed n times
  waits min(30 s x 2^(n-1), 60 min) after its last update before it is
  restarted (Peloton's `task_terminated_retry.go`).
* Batch tasks retry while their failure count is below the restart
  policy's `max_failures`; failures caused by the system (launch failed,
  invalid offer, executor gone) always get at least 4 tries.
* The goal-state engine backs off linearly, 10 s per consecutive failure,
  capped at 60 min (Peloton's comments say exponential; its code is linear).
* Placement backoff (`resmgr/task/backoffpolicy.go`): attempts run in cycles
  of 3; each dequeue's placing timeout grows by 5 min per attempt in the
  cycle; at the end of a cycle a task that was not placed goes back to
  PENDING (and is admitted again) instead of READY; after 3 cycles it may
  ask for a host reservation, when that feature is on.
"""

from __future__ import annotations

SERVICE_BACKOFF_BASE_S = 30.0
SERVICE_BACKOFF_CAP_S = 3600.0
ENGINE_BACKOFF_STEP_S = 10.0
ENGINE_BACKOFF_CAP_S = 3600.0
MIN_SYSTEM_FAILURE_RETRIES = 4
PLACING_TIMEOUT_S = 600.0
PLACEMENT_RETRY_BACKOFF_S = 300.0
PLACEMENT_ATTEMPTS_PER_CYCLE = 3
PLACEMENT_RETRY_CYCLES = 3


def service_restart_delay(failure_count: int, base: float = SERVICE_BACKOFF_BASE_S,
                          cap: float = SERVICE_BACKOFF_CAP_S) -> float:
    """Seconds a failed service task waits, after its last update, before restarting."""
    if failure_count <= 0:
        return 0.0
    # Compare exponents, not values, so huge failure counts cannot overflow.
    if failure_count - 1 >= 64:
        return cap
    return min(base * 2.0 ** (failure_count - 1), cap)


def service_restart_due(failure_count: int, last_update: float, now: float) -> bool:
    """True once the throttle delay has passed (else the task shows "throttled")."""
    return now >= last_update + service_restart_delay(failure_count)


def batch_retry_allowed(failure_count: int, max_failures: int, *,
                        system_failure: bool = False) -> bool:
    """May a failed batch task run again?"""
    limit = max(max_failures, MIN_SYSTEM_FAILURE_RETRIES) if system_failure else max_failures
    return failure_count < limit


def engine_backoff(consecutive_failures: int, step: float = ENGINE_BACKOFF_STEP_S,
                   cap: float = ENGINE_BACKOFF_CAP_S) -> float:
    """Delay before the goal-state engine re-evaluates an entity whose action failed."""
    if consecutive_failures <= 0:
        return 0.0
    return min(step * consecutive_failures, cap)


def placing_timeout(attempt: int, base: float = PLACING_TIMEOUT_S,
                    backoff: float = PLACEMENT_RETRY_BACKOFF_S,
                    per_cycle: int = PLACEMENT_ATTEMPTS_PER_CYCLE) -> float:
    """How long dequeue number `attempt` (1-based) may stay PLACING."""
    return base + (attempt % per_cycle) * backoff


def cycle_ended(attempt: int, per_cycle: int = PLACEMENT_ATTEMPTS_PER_CYCLE) -> bool:
    """After this attempt an unplaced task goes back to PENDING rather than READY."""
    return attempt > 0 and attempt % per_cycle == 0


def wants_host_reservation(attempt: int, *, enabled: bool,
                           per_cycle: int = PLACEMENT_ATTEMPTS_PER_CYCLE,
                           cycles: int = PLACEMENT_RETRY_CYCLES) -> bool:
    """After `cycles` full cycles without a placement, reserve a host (if enabled)."""
    return enabled and attempt >= per_cycle * cycles
