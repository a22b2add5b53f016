"""When a cron job runs, and what a run does when the previous one is still active.

Due times (Aurora's rules, with one documented addition):

* a due time runs at most once: it must be later than the job's
  `last_due_ms`, which a run claims by compare-and-set before it starts;
* runs missed while no scheduler was leading are not caught up (Aurora:
  "no failover recovery"; Quartz starts each trigger from now) - except a
  due time at most `grace_ms` before this leader began watching the job
  (Quartz's misfire threshold, 60 s by default), so a quick failover or
  restart does not lose the run that fell into it;
* while a leader watches, a late tick runs the latest due time once, even if
  several passed (Quartz's fire-once-now misfire policy), never each of them.

Collisions: with an active previous run, KILL_EXISTING kills it and starts
the new run once it has no active task; CANCEL_NEW skips the new run;
RUN_OVERLAP starts the new run beside it (each run is its own job).
"""

from __future__ import annotations

from enum import Enum

from peloton.core.cron.model import CollisionPolicy
from peloton.core.cron.schedule import CronSchedule

#: Quartz's default misfire threshold.
DEFAULT_GRACE_MS = 60_000


class Collision(Enum):
    """What to do with a due run."""

    START = "start"  # create the run now
    KILL_FIRST = "kill_first"  # kill the active run, create this one when it is gone
    SKIP = "skip"  # do not run this time


def due_run(schedule: CronSchedule, last_due_ms: int, watching_since_ms: int, now_ms: int,
            grace_ms: int = DEFAULT_GRACE_MS) -> int | None:
    """The due time to run now, or None (see the module docstring)."""
    latest = schedule.at_or_before(now_ms)
    if latest is None:
        return None
    return latest if latest > last_due_ms and latest >= watching_since_ms - grace_ms else None


def collision(policy: CollisionPolicy, previous_active: bool) -> Collision:
    """What a run does given the previous run's state."""
    if not previous_active or policy is CollisionPolicy.RUN_OVERLAP:
        return Collision.START
    if policy is CollisionPolicy.CANCEL_NEW:
        return Collision.SKIP
    return Collision.KILL_FIRST


def next_run_ms(schedule: CronSchedule, last_due_ms: int, now_ms: int) -> int | None:
    """When the job runs next on its schedule (for getJobSummary's nextCronRunMs)."""
    return schedule.next_after(max(last_due_ms, now_ms))
