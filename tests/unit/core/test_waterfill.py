"""Exact weighted water-filling in whole units (largest-remainder rounding)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from peloton.core.respool.waterfill import apportion, water_fill


def test_equal_shares() -> None:
    assert water_fill(50, [0, 60, 60], [1, 1, 1]) == [0, 25, 25]


def test_capped_claimant_passes_rest_on() -> None:
    assert water_fill(90, [10, 60, 60], [1, 1, 1]) == [10, 40, 40]


def test_weights() -> None:
    assert water_fill(30, [100, 100], [1, 2]) == [10, 20]


def test_a_third_each_rounds_to_whole_units_that_sum_exactly() -> None:
    out = water_fill(100, [1000, 1000, 1000], [1, 1, 1])
    assert sorted(out) == [33, 33, 34] and sum(out) == 100
    assert out == water_fill(100, [1000, 1000, 1000], [1, 1, 1])  # deterministic


def test_zero_weight_served_last() -> None:
    assert water_fill(30, [10, 100], [1, 0]) == [10, 20]
    assert water_fill(30, [10, 100], [1, 0], serve_zero_weights=False) == [10, 0]


def test_everything_fits_and_nothing_to_share() -> None:
    assert water_fill(100, [1, 2, 3], [1, 1, 1]) == [1, 2, 3]
    assert water_fill(0, [1, 2], [1, 1]) == [0, 0]
    assert water_fill(5, [], []) == []


def test_apportion_is_proportional_and_exact() -> None:
    assert apportion(40, [60, 20]) == [30, 10]
    assert apportion(10, [1, 1, 1]) in ([4, 3, 3], [3, 4, 3], [3, 3, 4])
    assert sum(apportion(10, [1, 1, 1])) == 10
    assert apportion(5, [0, 0]) == [0, 0]


claims = st.lists(st.tuples(st.integers(-5, 1_000_000),
                            st.one_of(st.just(0.0), st.floats(1e-3, 10))),
                  min_size=1, max_size=12)


@settings(max_examples=300, deadline=None)
@given(amount=st.integers(0, 5_000_000), claims=claims)
def test_properties(amount: int, claims: list[tuple[int, float]]) -> None:
    caps = [c for c, _ in claims]
    weights = [w for _, w in claims]
    out = water_fill(amount, caps, weights)
    assert all(isinstance(o, int) for o in out)
    assert all(0 <= o <= max(c, 0) for o, c in zip(out, caps, strict=True))
    # Work-conserving and exact: everything is handed out up to the total of the caps.
    assert sum(out) == min(amount, sum(max(c, 0) for c in caps))
    # Max-min by weight, to within the one unit rounding may move: among positively
    # weighted claimants below their cap, (part +- 1) / weight brackets one common level.
    unmet = [(o, w) for o, c, w in zip(out, caps, weights, strict=True) if w > 0 and o < c]
    if unmet:
        low = max((o - 1) / w for o, w in unmet)
        high = min((o + 1) / w for o, w in unmet)
        assert low <= high * (1 + 1e-9) + 1e-9
        for o, w in zip(out, weights, strict=True):
            if w > 0:
                assert (o - 1) / w <= high * (1 + 1e-9) + 1e-9


@settings(max_examples=200, deadline=None)
@given(amount=st.integers(0, 10**9), sizes=st.lists(st.integers(0, 10**9), max_size=10))
def test_apportion_properties(amount: int, sizes: list[int]) -> None:
    parts = apportion(amount, sizes)
    total = sum(sizes)
    assert sum(parts) == (amount if total > 0 else 0)
    for p, s in zip(parts, sizes, strict=True):
        assert total == 0 or abs(p * total - amount * s) < total   # within one unit
        if amount <= total:
            assert p <= s


def test_vanishing_weights_count_as_zero() -> None:
    assert water_fill(1000, [1000, 1000], [1.0, 1e-300]) == [1000, 0]
