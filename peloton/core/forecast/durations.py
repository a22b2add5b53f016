"""How long tasks are expected to run: a given estimate, the job's history, or a default.

Batch work ends; how long it takes is what the forecast most needs and least knows.
In order of trust: an estimate the user gives for the job (`given`), the median of the
job's finished runs (`history`, varied between the forecast's runs), a default
(`DEFAULT_DURATION`, varied widely).  Services never end (`unbounded`).

A running task's remaining time is its expected duration minus the time it has run;
one that has already run longer than expected is taken to end soon, after a tenth of
its expected duration (`OVERDUE_FRACTION`), not at once: overdue work is rarely done.
"""

from __future__ import annotations

from collections.abc import Iterable

from peloton.core.forecast.model import DurationSource

#: Seconds a batch task is taken to run when nothing better is known.
DEFAULT_DURATION = 3600.0
#: What is left of an overdue run, as a fraction of its expected duration.
OVERDUE_FRACTION = 0.1


def median(values: Iterable[float]) -> float | None:
    """The median (the lower middle for an even count: one of the values); None if empty."""
    ordered = sorted(values)
    if not ordered:
        return None
    return ordered[(len(ordered) - 1) // 2]


def expected(*, service: bool, given: float | None = None,
             history: Iterable[float] = ()) -> tuple[float | None, DurationSource]:
    """A task's expected duration and where it comes from (None: a service, unbounded)."""
    if service:
        return None, DurationSource.UNBOUNDED
    if given is not None and given > 0:
        return given, DurationSource.GIVEN
    past = median(d for d in history if d > 0)
    if past is not None:
        return past, DurationSource.HISTORY
    return DEFAULT_DURATION, DurationSource.DEFAULT


def remaining(duration: float | None, elapsed: float) -> float | None:
    """Seconds left of a run expected to last `duration` that has run `elapsed`."""
    if duration is None:
        return None
    left = duration - max(elapsed, 0.0)
    return left if left > 0 else duration * OVERDUE_FRACTION
