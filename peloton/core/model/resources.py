"""Resource vectors and port ranges.

A `Resources` value is the four scalar kinds Peloton schedules on (cpu
cores, memory MB, disk MB, gpus).  Inside it holds **integers in fixed
units**: thousandths of each user unit (milli-cpu, milli-gpu, and 1/1000 MB
of memory and disk).  Every sum, difference and comparison is therefore
exact: a pool that allocated ten 0.1-cpu tasks and released them all holds
exactly 0, not 2.8e-17, and 0.1 + 0.2 is 0.3.

Why thousandths for every kind: it is the precision of Mesos' fixed-point
scalar arithmetic, which Peloton ran on, so every amount a Peloton job file
could ask for is represented exactly and reads back as the same float
(0.1 MB stays 0.1 MB; whole MiB would have turned it into 0).  It also makes
Peloton's epsilon comparisons (util.ResourceEpsilon = 0.0009, less than one
unit) the same as exact integer comparisons on this grid.

The constructor and the `cpu` / `mem_mb` / `disk_mb` / `gpu` accessors take
and return the user's units (floats); amounts are rounded to the nearest
thousandth on the way in (`to_units`).  Floats exist only at the edges:
protobuf fields, stored JSON, printed text.  `units` and `from_units` give
the integers to code that keeps its own vectors (the pool tree).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, NoReturn

from peloton.core.errors import InvalidArgument

#: Fixed-point units per user unit, for every kind.
UNITS_PER = 1000

#: Peloton's util.ResourceEpsilon.  On the fixed-point grid every comparison is exact; this is
#: kept for code that still compares raw floats (host books fed by backends).
EPSILON = 0.0009


#: The largest amount of one kind a request may ask for or a pool may be given: 10^12 cores,
#: MB or GPUs, far beyond any cluster.  It keeps every amount, and sums of thousands of
#: them, exact in fixed units read back as floats (below 2^53 units), and keeps the float
#: arithmetic of entitlement (shares times amounts) from overflowing to inf.
MAX_AMOUNT = 1e12


def check_amount(value: float, field: str) -> float:
    """A resource amount from a user (a task's request, a pool's reservation, limit or
    share, a quota): a finite number in [0, MAX_AMOUNT], else InvalidArgument naming
    `field`.  The one rule every edge applies before an amount reaches `Resources` or a
    pool: NaN, inf or a negative would poison entitlement, and 1e308 overflows to_units."""
    if not math.isfinite(value):
        raise InvalidArgument(f"{field} must be a finite number, got {value}", field=field)
    if value < 0:
        raise InvalidArgument(f"{field} must be >= 0, got {value:g}", field=field)
    if value > MAX_AMOUNT:
        raise InvalidArgument(f"{field} must be at most {MAX_AMOUNT:g}, got {value:g}",
                              field=field)
    return value


def to_units(amount: float) -> int:
    """An amount in user units as fixed-point units (nearest thousandth, ties to even)."""
    scaled = amount * UNITS_PER
    if not math.isfinite(scaled):  # NaN, inf, or so large that the scaling overflows
        raise InvalidArgument(f"resource amount must be a finite number of at most "
                              f"{MAX_AMOUNT:g}, got {amount}", field="resources")
    return round(scaled)


def from_units(units: int) -> float:
    """Fixed-point units as a float in user units (the nearest float to units / 1000)."""
    return units / UNITS_PER


class ResourceKind(StrEnum):
    """The scalar resource kinds, named as Peloton's resource pool API names them."""

    CPU = "cpu"
    MEMORY = "memory"
    DISK = "disk"
    GPU = "gpu"


#: Canonical order of kinds (the order Peloton's water-fill walks them in is cpu, gpu, memory, disk;
#: any fixed order works for vectors, this one matches the accessors).
KINDS: tuple[ResourceKind, ...] = (
    ResourceKind.CPU, ResourceKind.MEMORY, ResourceKind.DISK, ResourceKind.GPU)

_INDEX = {ResourceKind.CPU: 0, ResourceKind.MEMORY: 1, ResourceKind.DISK: 2,
          ResourceKind.GPU: 3}

#: The accessor names, which are also the field names of stored JSON and the constructor's
#: keywords (unchanged from when the vector held floats).
FIELD_NAMES: tuple[str, ...] = ("cpu", "mem_mb", "disk_mb", "gpu")


class Resources:
    """An immutable vector of cpu, memory (MB), disk (MB) and gpu, held in fixed-point units.

    `Resources(cpu=0.5, mem_mb=128)` takes user units; `Resources.from_units`
    takes the integers.  Equality and hashing are on the integers.
    """

    __slots__ = ("_c", "_d", "_g", "_m")

    _c: int
    _m: int
    _d: int
    _g: int

    def __init__(self, cpu: float = 0.0, mem_mb: float = 0.0, disk_mb: float = 0.0,
                 gpu: float = 0.0) -> None:
        setter = object.__setattr__
        setter(self, "_c", to_units(cpu))
        setter(self, "_m", to_units(mem_mb))
        setter(self, "_d", to_units(disk_mb))
        setter(self, "_g", to_units(gpu))

    # -- construction -------------------------------------------------------
    @staticmethod
    def from_units(cpu: int = 0, mem: int = 0, disk: int = 0, gpu: int = 0) -> Resources:
        """A vector from fixed-point units (thousandths of each user unit)."""
        out = Resources.__new__(Resources)
        setter = object.__setattr__
        setter(out, "_c", cpu)
        setter(out, "_m", mem)
        setter(out, "_d", disk)
        setter(out, "_g", gpu)
        return out

    @staticmethod
    def of(values: Mapping[ResourceKind | str, float]) -> Resources:
        """Build from a kind -> amount mapping; unknown kinds are rejected."""
        units = [0, 0, 0, 0]
        for key, amount in values.items():
            try:
                kind = ResourceKind(key)
            except ValueError:
                raise InvalidArgument(f"unknown resource kind {key!r}", field="kind") from None
            units[_INDEX[kind]] = to_units(float(amount))
        return Resources.from_units(*units)

    # -- accessors (user units) -----------------------------------------------
    @property
    def cpu(self) -> float:
        """Cpu cores."""
        return self._c / UNITS_PER

    @property
    def mem_mb(self) -> float:
        """Memory in MB."""
        return self._m / UNITS_PER

    @property
    def disk_mb(self) -> float:
        """Disk in MB."""
        return self._d / UNITS_PER

    @property
    def gpu(self) -> float:
        """Gpus."""
        return self._g / UNITS_PER

    @property
    def units(self) -> tuple[int, int, int, int]:
        """The fixed-point units in canonical kind order (cpu, memory, disk, gpu)."""
        return (self._c, self._m, self._d, self._g)

    def get(self, kind: ResourceKind) -> float:
        """Amount of one kind."""
        return self.units[_INDEX[kind]] / UNITS_PER

    def items(self) -> Iterator[tuple[ResourceKind, float]]:
        """(kind, amount) pairs in canonical order."""
        for kind, u in zip(KINDS, self.units, strict=True):
            yield kind, u / UNITS_PER

    def as_dict(self) -> dict[str, float]:
        """Kind name -> amount."""
        return {k.value: v for k, v in self.items()}

    def replace(self, kind: ResourceKind, amount: float) -> Resources:
        """A copy with one kind set to `amount`."""
        units = list(self.units)
        units[_INDEX[kind]] = to_units(amount)
        return Resources.from_units(*units)

    # -- arithmetic (exact) ---------------------------------------------------
    def __add__(self, other: Resources) -> Resources:
        return Resources.from_units(self._c + other._c, self._m + other._m,
                                    self._d + other._d, self._g + other._g)

    def __sub__(self, other: Resources) -> Resources:
        """Plain difference; may go negative (see `minus_clamped`)."""
        return Resources.from_units(self._c - other._c, self._m - other._m,
                                    self._d - other._d, self._g - other._g)

    def minus_clamped(self, other: Resources) -> Resources:
        """Difference with every kind clamped at zero, as Peloton subtracts."""
        return Resources.from_units(max(0, self._c - other._c), max(0, self._m - other._m),
                                    max(0, self._d - other._d), max(0, self._g - other._g))

    def scale(self, factor: float) -> Resources:
        """Every kind multiplied by `factor`, rounded to the nearest unit."""
        return Resources.from_units(round(self._c * factor), round(self._m * factor),
                                    round(self._d * factor), round(self._g * factor))

    def split(self, parts: int) -> Resources:
        """One of `parts` equal shares, rounded down so that `parts` shares fit in self."""
        if parts <= 0:
            raise InvalidArgument(f"cannot split resources into {parts} parts", field="parts")
        return Resources.from_units(self._c // parts, self._m // parts, self._d // parts,
                                    self._g // parts)

    def min(self, other: Resources) -> Resources:
        """Kind-wise minimum."""
        return Resources.from_units(min(self._c, other._c), min(self._m, other._m),
                                    min(self._d, other._d), min(self._g, other._g))

    def max(self, other: Resources) -> Resources:
        """Kind-wise maximum."""
        return Resources.from_units(max(self._c, other._c), max(self._m, other._m),
                                    max(self._d, other._d), max(self._g, other._g))

    # -- comparison (exact on the grid, so Peloton's epsilon is implied) ------
    def fits_in(self, other: Resources) -> bool:
        """True if every kind of self is <= the same kind of other."""
        return (self._c <= other._c and self._m <= other._m and self._d <= other._d
                and self._g <= other._g)

    def exceeds(self, other: Resources) -> bool:
        """True if some kind of self is above the same kind of other."""
        return not self.fits_in(other)

    def approx_eq(self, other: Resources) -> bool:
        """Equal in every kind (exact on the grid; kept for Peloton-style callers)."""
        return self == other

    def is_zero(self) -> bool:
        """All kinds are zero."""
        return not (self._c or self._m or self._d or self._g)

    def any_negative(self) -> bool:
        """Some kind is below zero."""
        return self._c < 0 or self._m < 0 or self._d < 0 or self._g < 0

    # -- value protocol -------------------------------------------------------
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Resources):
            return NotImplemented
        return (self._c == other._c and self._m == other._m and self._d == other._d
                and self._g == other._g)

    def __hash__(self) -> int:
        return hash((self._c, self._m, self._d, self._g))

    def __setattr__(self, name: str, value: Any) -> NoReturn:
        raise AttributeError(f"Resources is immutable (cannot set {name!r})")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError(f"Resources is immutable (cannot delete {name!r})")

    def __reduce__(self) -> tuple[Any, tuple[int, int, int, int]]:
        return (Resources.from_units, self.units)

    def __repr__(self) -> str:
        return (f"Resources(cpu={self.cpu!r}, mem_mb={self.mem_mb!r}, "
                f"disk_mb={self.disk_mb!r}, gpu={self.gpu!r})")

    def __str__(self) -> str:
        return (f"cpu={self.cpu:g} mem={self.mem_mb:g}MB disk={self.disk_mb:g}MB "
                f"gpu={self.gpu:g}")


ZERO = Resources()


@dataclass(frozen=True, slots=True)
class PortRange:
    """An inclusive range of port numbers [begin, end]."""

    begin: int
    end: int

    def __post_init__(self) -> None:
        if not 0 < self.begin <= self.end <= 65535:
            raise InvalidArgument(f"invalid port range {self.begin}-{self.end}", field="ports")

    def __len__(self) -> int:
        return self.end - self.begin + 1

    def __contains__(self, port: object) -> bool:
        return isinstance(port, int) and self.begin <= port <= self.end


def count_ports(ranges: tuple[PortRange, ...]) -> int:
    """Total number of ports in a set of ranges."""
    return sum(len(r) for r in ranges)
