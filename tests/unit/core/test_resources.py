"""The resource vector: fixed-point units inside, the user's units outside, exact arithmetic."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from peloton.core.errors import InvalidArgument
from peloton.core.model.resources import (
    ZERO,
    ResourceKind,
    Resources,
    from_units,
    to_units,
)


def test_tenths_add_up_exactly() -> None:
    # Plain floats: 0.1 + 0.2 == 0.30000000000000004.  Here the sum is exactly 0.3.
    total = Resources(cpu=0.1) + Resources(cpu=0.2)
    assert total == Resources(cpu=0.3) and total.cpu == 0.3
    assert total.fits_in(Resources(cpu=0.3))
    assert not Resources(cpu=0.3 + 0.001).fits_in(Resources(cpu=0.3))
    assert Resources(cpu=0.3 + 0.001).exceeds(Resources(cpu=0.3))
    assert not Resources(gpu=1).fits_in(Resources(cpu=8, mem_mb=1e6, disk_mb=1e6))


def test_ten_tenths_allocated_and_released_leave_exactly_zero() -> None:
    tenth = Resources(cpu=0.1, mem_mb=0.1, disk_mb=0.1, gpu=0.1)
    held = ZERO
    for _ in range(10):
        held = held + tenth
    assert held == Resources(cpu=1, mem_mb=1, disk_mb=1, gpu=1)
    for _ in range(10):
        held = held - tenth
    assert held == ZERO and held.cpu == 0.0 and held.is_zero()


def test_amounts_round_to_thousandths_like_mesos() -> None:
    assert to_units(0.1) == 100 and from_units(100) == 0.1
    assert Resources(mem_mb=0.1).mem_mb == 0.1              # below one MB is kept
    assert Resources(cpu=0.0004) == ZERO                     # below Peloton's epsilon
    assert Resources(cpu=1.2345).cpu == 1.234                # ties go to even
    assert Resources(cpu=1, mem_mb=2).approx_eq(Resources(cpu=1.0004, mem_mb=2))
    with pytest.raises(InvalidArgument):
        Resources(cpu=float("inf"))
    with pytest.raises(InvalidArgument):
        Resources(mem_mb=float("nan"))


def test_zero_and_negative() -> None:
    assert not Resources(disk_mb=0.01).is_zero()
    assert Resources(mem_mb=-0.01).any_negative()
    assert not Resources(cpu=1).approx_eq(Resources(cpu=1.01))


def test_minus_clamped_never_goes_below_zero() -> None:
    left = Resources(cpu=1, mem_mb=100).minus_clamped(Resources(cpu=3, mem_mb=40, gpu=1))
    assert left == Resources(cpu=0, mem_mb=60, disk_mb=0, gpu=0)


def test_of_by_kind_name_and_unknown_kinds() -> None:
    res = Resources.of({"cpu": 2, ResourceKind("memory"): 512})
    assert res.get(ResourceKind("cpu")) == 2 and res.mem_mb == 512
    assert res.as_dict() == {"cpu": 2.0, "memory": 512.0, "disk": 0.0, "gpu": 0.0}
    assert res.replace(ResourceKind.GPU, 0.5).gpu == 0.5
    with pytest.raises(InvalidArgument):
        Resources.of({"bogus": 1})


def test_value_protocol() -> None:
    r = Resources(cpu=0.5, mem_mb=128, disk_mb=10, gpu=1)
    assert r.units == (500, 128_000, 10_000, 1000)
    assert Resources.from_units(*r.units) == r and hash(Resources.from_units(*r.units)) == hash(r)
    assert pickle.loads(pickle.dumps(r)) == r
    assert repr(r) == "Resources(cpu=0.5, mem_mb=128.0, disk_mb=10.0, gpu=1.0)"
    assert str(Resources(cpu=0.1) + Resources(cpu=0.2)) == "cpu=0.3 mem=0MB disk=0MB gpu=0"
    with pytest.raises(AttributeError):
        r.cpu = 3  # type: ignore[misc]
    assert Resources(cpu=2, mem_mb=3).split(3) == Resources.from_units(666, 1000)
    assert Resources(cpu=2).scale(0.5) == Resources(cpu=1)


amount = st.floats(0, 1e6, allow_nan=False)
vectors = st.builds(Resources, amount, amount, amount, st.floats(0, 64))


@given(vectors, vectors)
def test_arithmetic_properties(a: Resources, b: Resources) -> None:
    assert a + b == b + a
    assert (a + b) - b == a                                   # exact, no tolerance
    clamped = a.minus_clamped(b)
    assert not clamped.any_negative()
    assert clamped.fits_in(a)
    assert a.min(b).fits_in(a) and a.min(b).fits_in(b)
    assert a.fits_in(a.max(b)) and b.fits_in(a.max(b))
    assert a.fits_in(a + b)
    assert ZERO.fits_in(a)
    assert a.scale(0).is_zero()


@given(st.floats(-1e9, 1e9, allow_nan=False))
def test_float_round_trip_on_the_grid(x: float) -> None:
    # What is stored as a float reads back as the same float.
    once = Resources(cpu=x).cpu
    assert Resources(cpu=once).cpu == once
