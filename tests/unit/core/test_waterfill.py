"""Exact weighted water-filling."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from peloton.core.respool.waterfill import water_fill

TOL = 1e-6


def test_equal_shares() -> None:
    assert water_fill(50, [0, 60, 60], [1, 1, 1]) == [0, 25, 25]


def test_capped_claimant_passes_rest_on() -> None:
    assert water_fill(90, [10, 60, 60], [1, 1, 1]) == pytest.approx([10, 40, 40])


def test_weights() -> None:
    assert water_fill(30, [100, 100], [1, 2]) == pytest.approx([10, 20])


def test_zero_weight_served_last() -> None:
    assert water_fill(30, [10, 100], [1, 0]) == pytest.approx([10, 20])
    assert water_fill(30, [10, 100], [1, 0], serve_zero_weights=False) == pytest.approx([10, 0])


def test_everything_fits_and_nothing_to_share() -> None:
    assert water_fill(100, [1, 2, 3], [1, 1, 1]) == [1, 2, 3]
    assert water_fill(0, [1, 2], [1, 1]) == [0, 0]
    assert water_fill(5, [], []) == []


claims = st.lists(st.tuples(st.floats(0, 1000), st.one_of(st.just(0.0), st.floats(1e-3, 10))),
                min_size=1, max_size=12)


@settings(max_examples=200, deadline=None)
@given(amount=st.floats(0, 5000), claims=claims)
def test_properties(amount: float, claims: list[tuple[float, float]]) -> None:
    caps = [c for c, _ in claims]
    weights = [w for _, w in claims]
    out = water_fill(amount, caps, weights)
    assert all(-TOL <= o <= c + TOL for o, c in zip(out, caps, strict=True))
    # Work-conserving: everything is handed out up to the total of the caps.
    assert sum(out) == pytest.approx(min(amount, sum(caps)), rel=1e-9, abs=1e-6)
    # Max-min by weight: among positively weighted claimants below their cap, the
    # level (part / weight) is one common value, and nobody has a higher level.
    unmet = [o / w for o, c, w in zip(out, caps, weights, strict=True) if w > 0 and o < c - TOL]
    if unmet:
        level = unmet[0]
        assert all(abs(x - level) <= 1e-6 * max(1.0, level) for x in unmet)
        for o, w in zip(out, weights, strict=True):
            if w > 0:
                assert o / w <= level * (1 + 1e-9) + 1e-6


def test_vanishing_weights_count_as_zero() -> None:
    assert water_fill(1.0, [1.0, 1.0], [1.0, 1e-300]) == pytest.approx([1.0, 0.0])
