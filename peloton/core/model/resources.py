"""Resource vectors and port ranges.

A `Resources` value is the four scalar kinds Peloton schedules on (cpu
cores, memory MB, disk MB, gpus).  Comparisons tolerate floating-point
noise with Peloton's epsilon (0.0009), so that 0.1 + 0.2 fits into 0.3 and
a pool whose allocation equals its entitlement is not "over" it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum

from peloton.core.errors import InvalidArgument

#: Tolerance for every resource comparison (Peloton's util.ResourceEpsilon).
EPSILON = 0.0009


class ResourceKind(StrEnum):
    """The scalar resource kinds, named as Peloton's resource pool API names them."""

    CPU = "cpu"
    MEMORY = "memory"
    DISK = "disk"
    GPU = "gpu"


#: Canonical order of kinds (the order Peloton's water-fill walks them in is cpu, gpu, memory, disk;
#: any fixed order works for vectors, this one matches the dataclass fields).
KINDS: tuple[ResourceKind, ...] = (
    ResourceKind.CPU, ResourceKind.MEMORY, ResourceKind.DISK, ResourceKind.GPU)

_FIELD = {ResourceKind.CPU: "cpu", ResourceKind.MEMORY: "mem_mb",
          ResourceKind.DISK: "disk_mb", ResourceKind.GPU: "gpu"}


@dataclass(frozen=True, slots=True)
class Resources:
    """An immutable vector of cpu, memory (MB), disk (MB) and gpu."""

    cpu: float = 0.0
    mem_mb: float = 0.0
    disk_mb: float = 0.0
    gpu: float = 0.0

    # -- construction -------------------------------------------------------
    @staticmethod
    def of(values: Mapping[ResourceKind | str, float]) -> Resources:
        """Build from a kind -> amount mapping; unknown kinds are rejected."""
        out = {"cpu": 0.0, "mem_mb": 0.0, "disk_mb": 0.0, "gpu": 0.0}
        for key, amount in values.items():
            try:
                kind = ResourceKind(key)
            except ValueError:
                raise InvalidArgument(f"unknown resource kind {key!r}", field="kind") from None
            out[_FIELD[kind]] = float(amount)
        return Resources(**out)

    def get(self, kind: ResourceKind) -> float:
        """Amount of one kind."""
        if kind is ResourceKind.CPU:
            return self.cpu
        if kind is ResourceKind.MEMORY:
            return self.mem_mb
        if kind is ResourceKind.DISK:
            return self.disk_mb
        return self.gpu

    def items(self) -> Iterator[tuple[ResourceKind, float]]:
        """(kind, amount) pairs in canonical order."""
        yield ResourceKind.CPU, self.cpu
        yield ResourceKind.MEMORY, self.mem_mb
        yield ResourceKind.DISK, self.disk_mb
        yield ResourceKind.GPU, self.gpu

    def as_dict(self) -> dict[str, float]:
        """Kind name -> amount."""
        return {k.value: v for k, v in self.items()}

    def replace(self, kind: ResourceKind, amount: float) -> Resources:
        """A copy with one kind set to `amount`."""
        values: dict[ResourceKind | str, float] = dict(self.items())
        values[kind] = amount
        return Resources.of(values)

    # -- arithmetic ---------------------------------------------------------
    def __add__(self, other: Resources) -> Resources:
        return Resources(self.cpu + other.cpu, self.mem_mb + other.mem_mb,
                         self.disk_mb + other.disk_mb, self.gpu + other.gpu)

    def __sub__(self, other: Resources) -> Resources:
        """Plain difference; may go negative (see `minus_clamped`)."""
        return Resources(self.cpu - other.cpu, self.mem_mb - other.mem_mb,
                         self.disk_mb - other.disk_mb, self.gpu - other.gpu)

    def minus_clamped(self, other: Resources) -> Resources:
        """Difference with every kind clamped at zero, as Peloton subtracts."""
        return Resources(max(0.0, self.cpu - other.cpu), max(0.0, self.mem_mb - other.mem_mb),
                         max(0.0, self.disk_mb - other.disk_mb), max(0.0, self.gpu - other.gpu))

    def scale(self, factor: float) -> Resources:
        """Every kind multiplied by `factor`."""
        return Resources(self.cpu * factor, self.mem_mb * factor,
                         self.disk_mb * factor, self.gpu * factor)

    def min(self, other: Resources) -> Resources:
        """Kind-wise minimum."""
        return Resources(min(self.cpu, other.cpu), min(self.mem_mb, other.mem_mb),
                         min(self.disk_mb, other.disk_mb), min(self.gpu, other.gpu))

    def max(self, other: Resources) -> Resources:
        """Kind-wise maximum."""
        return Resources(max(self.cpu, other.cpu), max(self.mem_mb, other.mem_mb),
                         max(self.disk_mb, other.disk_mb), max(self.gpu, other.gpu))

    # -- comparison (epsilon tolerant) -------------------------------------
    def fits_in(self, other: Resources) -> bool:
        """True if every kind of self is <= the same kind of other (within epsilon)."""
        return (self.cpu <= other.cpu + EPSILON and self.mem_mb <= other.mem_mb + EPSILON
                and self.disk_mb <= other.disk_mb + EPSILON and self.gpu <= other.gpu + EPSILON)

    def exceeds(self, other: Resources) -> bool:
        """True if some kind of self is above the same kind of other (beyond epsilon)."""
        return not self.fits_in(other)

    def approx_eq(self, other: Resources) -> bool:
        """Equal within epsilon in every kind."""
        return self.fits_in(other) and other.fits_in(self)

    def is_zero(self) -> bool:
        """All kinds within epsilon of zero."""
        return (abs(self.cpu) <= EPSILON and abs(self.mem_mb) <= EPSILON
                and abs(self.disk_mb) <= EPSILON and abs(self.gpu) <= EPSILON)

    def any_negative(self) -> bool:
        """Some kind is below zero (beyond epsilon)."""
        return (self.cpu < -EPSILON or self.mem_mb < -EPSILON
                or self.disk_mb < -EPSILON or self.gpu < -EPSILON)

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


def take_ports(ranges: tuple[PortRange, ...], count: int) -> tuple[tuple[int, ...],
                                                                    tuple[PortRange, ...]]:
    """Pick the `count` lowest ports from `ranges`; return them and the ranges left free.

    Raises InvalidArgument when the ranges hold fewer than `count` ports, so a
    caller that checked `count_ports` first never sees it.
    """
    if count < 0:
        raise InvalidArgument("port count must be >= 0", field="ports")
    if count_ports(ranges) < count:
        raise InvalidArgument(f"{count} ports requested, {count_ports(ranges)} free",
                              field="ports")
    picked: list[int] = []
    left: list[PortRange] = []
    for rng in sorted(ranges, key=lambda r: r.begin):
        need = count - len(picked)
        if need <= 0:
            left.append(rng)
            continue
        take = min(need, len(rng))
        picked.extend(range(rng.begin, rng.begin + take))
        if take < len(rng):
            left.append(PortRange(rng.begin + take, rng.end))
    return tuple(picked), tuple(left)
