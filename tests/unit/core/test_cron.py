"""Cron schedules (Aurora's syntax), due times and the trigger rules, mostly as properties."""

from __future__ import annotations

import calendar
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from peloton.core.cron.model import CollisionPolicy, run_job_id
from peloton.core.cron.schedule import MINUTE_MS, parse
from peloton.core.cron.trigger import Collision, collision, due_run, next_run_ms
from peloton.core.errors import InvalidArgument

T0 = calendar.timegm((2030, 1, 1, 0, 0, 0)) * 1000  # a Tuesday
MS = st.integers(min_value=T0, max_value=T0 + 400 * 86_400_000)


def ms(*parts: int) -> int:
    return calendar.timegm((*parts, 0)) * 1000 if len(parts) == 5 else calendar.timegm(parts) * 1000


def subset(low: int, high: int) -> st.SearchStrategy[list[int]]:
    return st.lists(st.integers(low, high), min_size=1, max_size=4, unique=True)


@st.composite
def schedules(draw: st.DrawFn) -> str:
    """Schedules with a due time at least every few days (so brute force can check them)."""
    minute = draw(st.one_of(st.just("*"), st.integers(1, 30).map(lambda s: f"*/{s}"),
                            subset(0, 59).map(lambda v: ",".join(map(str, v)))))
    hour = draw(st.one_of(st.just("*"), subset(0, 23).map(lambda v: ",".join(map(str, v))),
                          st.tuples(st.integers(0, 11), st.integers(12, 23)).map(lambda r: f"{r[0]}-{r[1]}")))
    dow = draw(st.one_of(st.just("*"), subset(0, 6).map(lambda v: ",".join(map(str, v))),
                         st.just("MON-FRI")))
    return f"{minute} {hour} * * {dow}"


def brute_next(text: str, after: int) -> int:
    s = parse(text)
    t = after - after % MINUTE_MS + MINUTE_MS
    while not s.matches(t):
        t += MINUTE_MS
    return t


@given(schedules(), MS)
def test_next_after_is_the_first_matching_minute(text: str, after: int) -> None:
    s = parse(text)
    nxt = s.next_after(after)
    assert nxt is not None and nxt == brute_next(text, after)
    assert s.matches(nxt) and nxt > after


@given(schedules(), MS)
def test_at_or_before_is_the_last_matching_minute(text: str, at: int) -> None:
    s = parse(text)
    prev = s.at_or_before(at)
    assert prev is not None and prev <= at and s.matches(prev)
    assert s.next_after(prev) == brute_next(text, prev)
    nxt = s.next_after(prev)
    assert nxt is not None and nxt > at  # nothing due in (prev, at]


@given(schedules())
def test_canonical_text_parses_back_to_the_same_schedule(text: str) -> None:
    s = parse(text)
    assert parse(s.canonical()) == s
    assert parse(s.canonical()).canonical() == s.canonical()


@pytest.mark.parametrize(("text", "canonical"), [
    ("*/5 * * * *", "0,5,10,15,20,25,30,35,40,45,50,55 * * * *"),
    ("* 17 * * FRI", "* 17 * * 5"),
    ("0 3 1,15 * *", "0 3 1,15 * *"),
    ("0 0 * JAN-MAR sun", "0 0 * 1-3 0"),
    ("0-10/5 * * * *", "0,5,10 * * * *"),
    ("1,2,3,7 * * * *", "1-3,7 * * * *"),
])
def test_aurora_s_syntax_and_canonical_form(text: str, canonical: str) -> None:
    assert parse(text).canonical() == canonical


@pytest.mark.parametrize("text", [
    "", "* * * *", "* * * * * *", "60 * * * *", "* 24 * * *", "* * 0 * *", "* * * 13 *",
    "* * * * 7", "*/0 * * * *", "5-1 * * * *", "0-10/10 * * * *", "@hourly", "0 0 1 * MON",
    "a * * * *", " * * * * *", "1,,x * * * *",
])
def test_invalid_schedules_name_the_field(text: str) -> None:
    with pytest.raises(InvalidArgument) as raised:
        parse(text)
    assert raised.value.field == "cronSchedule"


def test_known_due_times() -> None:
    fridays = parse("30 17 * * FRI")
    assert fridays.next_after(ms(2030, 1, 1, 0, 0)) == ms(2030, 1, 4, 17, 30)
    assert fridays.at_or_before(ms(2030, 1, 4, 17, 30)) == ms(2030, 1, 4, 17, 30)
    leap = parse("0 12 29 2 *")
    assert leap.next_after(ms(2030, 1, 1, 0, 0)) == ms(2032, 2, 29, 12, 0)
    assert parse("0 0 30 2 *").next_after(T0) is None
    assert parse("0 0 31 12 *").next_after(ms(2030, 12, 31, 0, 0)) == ms(2031, 12, 31, 0, 0)
    every_minute = parse("* * * * *").next_after(T0 + 1)
    assert every_minute is not None
    assert datetime.fromtimestamp(every_minute // 1000, UTC).minute == 1


# -- trigger rules ------------------------------------------------------------------------------
EVERY_MINUTE = parse("* * * * *")


def test_a_due_time_runs_once() -> None:
    now = T0 + 5 * MINUTE_MS + 300
    due = due_run(EVERY_MINUTE, last_due_ms=T0, watching_since_ms=T0, now_ms=now)
    assert due == T0 + 5 * MINUTE_MS  # several passed: only the latest runs (fire once now)
    assert due_run(EVERY_MINUTE, last_due_ms=due, watching_since_ms=T0, now_ms=now) is None


def test_runs_missed_while_down_are_not_caught_up_except_within_the_grace() -> None:
    took_over = T0 + 10 * MINUTE_MS + 20_000
    # last claimed long ago; the leader started 20 s after a due time: that one still runs
    assert due_run(EVERY_MINUTE, T0, took_over, took_over, grace_ms=60_000) == T0 + 10 * MINUTE_MS
    # with no grace (Aurora's exact rule) it is skipped, and the next due time runs
    assert due_run(EVERY_MINUTE, T0, took_over, took_over, grace_ms=0) is None
    hourly = parse("0 * * * *")
    late = T0 + 30 * MINUTE_MS
    assert due_run(hourly, T0 - 3_600_000, late, late) is None  # the 00:00 run fell into downtime


@given(st.integers(0, 10_000), st.integers(0, 120_000))
def test_nothing_before_the_last_claim_ever_runs(offset_s: int, grace: int) -> None:
    last = T0 + offset_s * 1000
    for now in (last, last + 1, last + 59_999):
        due = due_run(EVERY_MINUTE, last, T0, now, grace)
        assert due is None or due > last


def test_collision_policies() -> None:
    assert collision(CollisionPolicy.KILL_EXISTING, previous_active=False) is Collision.START
    assert collision(CollisionPolicy.KILL_EXISTING, previous_active=True) is Collision.KILL_FIRST
    assert collision(CollisionPolicy.CANCEL_NEW, previous_active=True) is Collision.SKIP
    assert collision(CollisionPolicy.RUN_OVERLAP, previous_active=True) is Collision.START


def test_next_run_and_run_ids() -> None:
    assert next_run_ms(EVERY_MINUTE, T0, T0 + 1) == T0 + MINUTE_MS
    assert next_run_ms(EVERY_MINUTE, T0 + 5 * MINUTE_MS, T0) == T0 + 6 * MINUTE_MS
    assert run_job_id("a/b/c", "1") == run_job_id("a/b/c", "1") != run_job_id("a/b/c", "2")
