"""The resource vector: arithmetic and Peloton's epsilon-tolerant comparisons."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from peloton.core.errors import InvalidArgument
from peloton.core.model.resources import EPSILON, ZERO, ResourceKind, Resources


def test_float_noise_fits_but_a_real_excess_does_not() -> None:
    assert Resources(cpu=0.1) + Resources(cpu=0.2) != Resources(cpu=0.3)   # plain floats differ
    assert (Resources(cpu=0.1) + Resources(cpu=0.2)).fits_in(Resources(cpu=0.3))
    assert not Resources(cpu=0.3 + 0.001).fits_in(Resources(cpu=0.3))
    assert Resources(cpu=0.3 + 0.001).exceeds(Resources(cpu=0.3))
    assert not Resources(gpu=1).fits_in(Resources(cpu=8, mem_mb=1e6, disk_mb=1e6))


def test_zero_negative_and_equality_are_tolerant() -> None:
    assert Resources(cpu=EPSILON / 2, mem_mb=-EPSILON / 2).is_zero()
    assert not Resources(disk_mb=0.01).is_zero()
    assert not Resources(cpu=-EPSILON / 2).any_negative()
    assert Resources(mem_mb=-0.01).any_negative()
    assert Resources(cpu=1, mem_mb=2).approx_eq(Resources(cpu=1 + EPSILON / 2, mem_mb=2))
    assert not Resources(cpu=1).approx_eq(Resources(cpu=1.01))


def test_minus_clamped_never_goes_below_zero() -> None:
    left = Resources(cpu=1, mem_mb=100).minus_clamped(Resources(cpu=3, mem_mb=40, gpu=1))
    assert left == Resources(cpu=0, mem_mb=60, disk_mb=0, gpu=0)


def test_of_by_kind_name_and_unknown_kinds() -> None:
    res = Resources.of({"cpu": 2, ResourceKind("memory"): 512})
    assert res.get(ResourceKind("cpu")) == 2 and res.mem_mb == 512
    with pytest.raises(InvalidArgument):
        Resources.of({"bogus": 1})


amount = st.floats(0, 1e6, allow_nan=False)
vectors = st.builds(Resources, amount, amount, amount, st.floats(0, 64))


@given(vectors, vectors)
def test_arithmetic_properties(a: Resources, b: Resources) -> None:
    assert (a + b).approx_eq(b + a)
    assert ((a + b) - b).approx_eq(a)
    clamped = a.minus_clamped(b)
    assert not clamped.any_negative()
    assert clamped.fits_in(a)
    assert a.min(b).fits_in(a) and a.min(b).fits_in(b)
    assert a.fits_in(a.max(b)) and b.fits_in(a.max(b))
    assert a.fits_in(a + b)
    assert ZERO.fits_in(a)
    assert a.scale(0).is_zero()
