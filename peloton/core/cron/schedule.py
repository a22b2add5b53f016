"""Aurora's cron syntax (CrontabEntry): parse, print canonically, and find due times.

A schedule has five fields, `minute hour dayOfMonth month dayOfWeek`, each a
comma-separated list of components: `*`, `N`, `A-B`, `*/S` or `A-B/S`
(S > 0; in a range with a skip, S < B).  Months take `JAN`..`DEC`, days of
the week `SUN`..`SAT` (0 = Sunday; unlike FreeBSD, 7 is not Sunday).  At
least one of dayOfMonth and dayOfWeek must be `*` (Aurora rejects schedules
that restrict both).  `canonical` prints Aurora's form (`*` for a full
field, else merged ranges `1-5,7`), so `parse(canonical(s)) == s`.

Due times are whole minutes in UTC (Aurora's default `-cron_timezone` GMT),
as epoch milliseconds.  A schedule that names no real day (`0 0 30 2 *`)
has no due time: `next_after` and `at_or_before` return None.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from peloton.core.errors import InvalidArgument

MINUTE_MS = 60_000
#: How far `next_after` / `at_or_before` look (leap days recur within 8 years).
HORIZON_DAYS = 8 * 366
_MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_DAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
_NUMBER = re.compile(r"^\d+$")
_RANGE = re.compile(r"^(\d+)-(\d+)$")
_WILD_SKIP = re.compile(r"^\*/(\d+)$")
_RANGE_SKIP = re.compile(r"^(\d+)-(\d+)/(\d+)$")


@dataclass(frozen=True, slots=True)
class CronSchedule:
    """A parsed schedule: the allowed values of each field."""

    minutes: frozenset[int]
    hours: frozenset[int]
    days_of_month: frozenset[int]
    months: frozenset[int]
    days_of_week: frozenset[int]  # 0 = Sunday

    def canonical(self) -> str:
        """Aurora's canonical text of this schedule."""
        return " ".join(_field_text(values, low, high) for values, (low, high) in (
            (self.minutes, (0, 59)), (self.hours, (0, 23)), (self.days_of_month, (1, 31)),
            (self.months, (1, 12)), (self.days_of_week, (0, 6))))

    def matches_day(self, day: datetime) -> bool:
        """Whether the schedule runs on `day` (its month and day fields)."""
        weekday = (day.weekday() + 1) % 7  # Python: Monday = 0; cron: Sunday = 0
        return (day.month in self.months and day.day in self.days_of_month
                and weekday in self.days_of_week)

    def matches(self, at_ms: int) -> bool:
        """Whether `at_ms` is a due time (a whole minute the schedule names)."""
        if at_ms % MINUTE_MS:
            return False
        t = _utc(at_ms)
        return self.matches_day(t) and t.hour in self.hours and t.minute in self.minutes

    def next_after(self, after_ms: int) -> int | None:
        """The first due time strictly after `after_ms`, or None within the horizon."""
        t = _utc(after_ms - after_ms % MINUTE_MS) + timedelta(minutes=1)
        end = t + timedelta(days=HORIZON_DAYS)
        while t < end:
            if t.month not in self.months:
                t = _first_of_next_month(t)
            elif not self.matches_day(t):
                t = datetime(t.year, t.month, t.day, tzinfo=UTC) + timedelta(days=1)
            elif t.hour not in self.hours:
                t = datetime(t.year, t.month, t.day, t.hour, tzinfo=UTC) + timedelta(hours=1)
            elif t.minute not in self.minutes:
                t += timedelta(minutes=1)
            else:
                return _ms(t)
        return None

    def at_or_before(self, at_ms: int) -> int | None:
        """The last due time at or before `at_ms`, or None within the horizon."""
        t = _utc(at_ms - at_ms % MINUTE_MS)
        end = t - timedelta(days=HORIZON_DAYS)
        while t > end:
            if t.month not in self.months:
                t = datetime(t.year, t.month, 1, tzinfo=UTC) - timedelta(minutes=1)
            elif not self.matches_day(t):
                t = datetime(t.year, t.month, t.day, tzinfo=UTC) - timedelta(minutes=1)
            elif t.hour not in self.hours:
                t = datetime(t.year, t.month, t.day, t.hour, tzinfo=UTC) - timedelta(minutes=1)
            elif t.minute not in self.minutes:
                t -= timedelta(minutes=1)
            else:
                return _ms(t)
        return None


def _utc(ms: int) -> datetime:
    return datetime.fromtimestamp(ms // 1000, tz=UTC)


def _ms(t: datetime) -> int:
    return calendar.timegm(t.utctimetuple()) * 1000


def _first_of_next_month(t: datetime) -> datetime:
    return datetime(t.year + (t.month == 12), t.month % 12 + 1, 1, tzinfo=UTC)


def _field_text(values: frozenset[int], low: int, high: int) -> str:
    if values == frozenset(range(low, high + 1)):
        return "*"
    parts: list[str] = []
    ordered = sorted(values)
    start = prev = ordered[0]
    for v in [*ordered[1:], None]:
        if v is not None and v == prev + 1:
            prev = v
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if v is not None:
            start = prev = v
    return ",".join(parts)


def _component(text: str, low: int, high: int, what: str) -> set[int]:
    def bounded(a: int, b: int) -> None:
        if not (low <= a <= b <= high):
            raise InvalidArgument(f"cron schedule {what} {text!r} is outside {low}-{high}",
                                  field="cronSchedule")

    if text == "*":
        return set(range(low, high + 1))
    if _NUMBER.match(text):
        bounded(int(text), int(text))
        return {int(text)}
    m = _RANGE.match(text)
    if m:
        a, b = int(m[1]), int(m[2])
        bounded(a, b)
        return set(range(a, b + 1))
    m = _WILD_SKIP.match(text)
    if m:
        skip = int(m[1])
        if skip <= 0:
            raise InvalidArgument(f"cron schedule {what} {text!r}: the skip must be > 0",
                                  field="cronSchedule")
        return set(range(low, high + 1, skip))
    m = _RANGE_SKIP.match(text)
    if m:
        a, b, skip = int(m[1]), int(m[2]), int(m[3])
        bounded(a, b)
        if not 0 < skip < b:
            raise InvalidArgument(f"cron schedule {what} {text!r}: the skip must be > 0 and < {b}",
                                  field="cronSchedule")
        return set(range(a, b + 1, skip))
    raise InvalidArgument(f"cron schedule {what} component {text!r} matches no known pattern "
                          "(*, N, A-B, */S, A-B/S)", field="cronSchedule")


def _names(text: str, names: tuple[str, ...], base: int) -> str:
    out = text.upper()
    for i, name in enumerate(names):
        out = out.replace(name, str(i + base))
    return out


def _field(text: str, low: int, high: int, what: str, names: tuple[str, ...] = (),
           base: int = 0) -> frozenset[int]:
    values: set[int] = set()
    parts = [p for p in text.split(",") if p]
    if not parts:
        raise InvalidArgument(f"cron schedule {what} is empty", field="cronSchedule")
    for part in parts:
        values |= _component(_names(part, names, base) if names else part, low, high, what)
    return frozenset(values)


def parse(text: str) -> CronSchedule:
    """Parse an Aurora cron schedule; InvalidArgument (field `cronSchedule`) naming the problem."""
    fields = text.split() if isinstance(text, str) else []
    if len(fields) != 5 or text != text.strip():
        raise InvalidArgument(f"invalid cron schedule {text!r}: expected 5 fields "
                              "(minute hour dayOfMonth month dayOfWeek)", field="cronSchedule")
    schedule = CronSchedule(
        minutes=_field(fields[0], 0, 59, "minute"), hours=_field(fields[1], 0, 23, "hour"),
        days_of_month=_field(fields[2], 1, 31, "dayOfMonth"),
        months=_field(fields[3], 1, 12, "month", _MONTHS, 1),
        days_of_week=_field(fields[4], 0, 6, "dayOfWeek", _DAYS, 0))
    if schedule.days_of_month != frozenset(range(1, 32)) and schedule.days_of_week != frozenset(range(7)):
        raise InvalidArgument(f"invalid cron schedule {text!r}: specifying both dayOfWeek and dayOfMonth "
                              "is not supported", field="cronSchedule")
    return schedule
