"""One host's books: capacity, what its runs and reservations hold, and its offer snapshot.

A *claim* is what one run (launched) or one reservation (placed, not yet
launched) takes from its host: resources, ports and task labels.  A
revocable claim takes its cpu from the host's slack (revocable) cpu and its
memory, disk and gpu from the regular capacity, as Peloton splits them.

Invariants, kept by `take`/`give` (the only writers of the books):
- `allocated` is the sum of the non-revocable parts of every claim held;
- `revocable_used` is the cpu of every revocable claim held;
- `used_ports` is the union of the claims' ports, `task_labels` counts their labels.
Not thread-safe: the host manager holds its lock around every call.
"""

from __future__ import annotations

from dataclasses import dataclass

from peloton.core.lifecycle.host_reach import CONNECTED, Reach
from peloton.core.model.constraints import Label
from peloton.core.model.host import HostOffer
from peloton.core.model.resources import ZERO, PortRange, Resources, from_units, to_units
from peloton.core.model.sched import LaunchSpec
from peloton.core.states import HostState, TaskState
from peloton.hostmgr.backends.base import BackendHost


@dataclass(frozen=True, slots=True)
class Claim:
    """What one run or reservation holds on its host."""

    resources: Resources
    revocable: bool = False
    ports: tuple[int, ...] = ()
    labels: tuple[Label, ...] = ()

    @staticmethod
    def for_launch(spec: LaunchSpec, reserved: Claim | None) -> Claim:
        """A launched run's claim: its spec, its assigned ports, and the labels of the spec
        plus those placement added to the reservation (each label once per run)."""
        labels = spec.spec.labels
        if reserved is not None and reserved.labels:
            labels = tuple(dict.fromkeys((*reserved.labels, *labels)))
        return Claim(spec.spec.footprint, spec.spec.revocable,
                     tuple(port for _, port in spec.ports), labels)


#: The claim of a run a backend reported that nobody has described to us yet (after a
#: restart, until the job manager adopts it): it holds nothing we could account for.
UNKNOWN_CLAIM = Claim(ZERO)


class RunRecord:
    """A run handed to a host (or reported by one): where it is and what it holds."""

    __slots__ = ("claim", "hostname", "kill_grace", "run_id", "state")

    def __init__(self, run_id: str, hostname: str, claim: Claim, state: TaskState) -> None:
        self.run_id = run_id
        self.hostname = hostname
        self.claim = claim
        self.state = state
        #: Set once a kill was asked for; the kill is sent again when the host re-registers.
        self.kill_grace: float | None = None


def subtract_ports(ranges: tuple[PortRange, ...], used: set[int]) -> tuple[PortRange, ...]:
    """`ranges` with the `used` ports cut out."""
    if not used:
        return ranges
    out: list[PortRange] = []
    for rng in ranges:
        start = rng.begin
        for port in sorted(p for p in used if rng.begin <= p <= rng.end):
            if port > start:
                out.append(PortRange(start, port - 1))
            start = port + 1
        if start <= rng.end:
            out.append(PortRange(start, rng.end))
    return tuple(out)


class HostRecord:
    """A host as the host manager books it; see the module docstring."""

    __slots__ = ("_offer", "address", "agent_id", "allocated", "capacity", "file_address",
                 "hostname", "labels", "lease_id", "port_ranges", "reach", "reserved",
                 "revocable_units", "revocable_used_units", "runs", "schedulable", "state",
                 "task_labels", "used_ports")

    def __init__(self, hostname: str) -> None:
        self.hostname = hostname
        self.agent_id = ""
        self.address = ""
        self.file_address = ""
        self.capacity = ZERO
        #: Slack cpu the backend offers and the part of it booked, in fixed-point units.
        self.revocable_units = 0
        self.port_ranges: tuple[PortRange, ...] = ()
        self.labels: tuple[Label, ...] = ()
        #: DISCONNECTED until the backend reports the host, and again after it is gone;
        #: moved only by the registry, through the table in core/lifecycle/host_reach.py.
        self.reach = Reach.DISCONNECTED
        #: False while the backend says the host takes no new runs (a cordoned node).
        self.schedulable = True
        self.state = HostState.UP
        self.lease_id: str | None = None
        self.allocated = ZERO
        self.revocable_used_units = 0
        self.used_ports: set[int] = set()
        self.task_labels: dict[Label, int] = {}
        self.runs: dict[str, RunRecord] = {}
        self.reserved: dict[str, Claim] = {}
        self._offer: HostOffer | None = None

    def describe(self, host: BackendHost) -> None:
        """Take the backend's description (capacity, ports, labels may change on re-registration)."""
        self.agent_id = host.agent_id
        self.address = host.address
        self.file_address = host.file_address
        self.capacity = host.capacity
        self.revocable_units = to_units(host.revocable_cpu)
        self.port_ranges = host.ports
        self.labels = host.labels
        self.schedulable = host.schedulable
        self._offer = None

    @property
    def connected(self) -> bool:
        """Registered with the backend (possibly unreached: see core/lifecycle/host_reach.py)."""
        return self.reach in CONNECTED

    # -- what is free --------------------------------------------------------------------
    def available(self) -> Resources:
        """Free non-revocable resources (never negative)."""
        return self.capacity.minus_clamped(self.allocated)

    @property
    def revocable_cpu(self) -> float:
        """Slack cpu the host offers."""
        return from_units(self.revocable_units)

    @property
    def revocable_used(self) -> float:
        """Slack cpu booked by revocable runs and reservations."""
        return from_units(self.revocable_used_units)

    def free_revocable(self) -> float:
        """Free slack cpu (never negative)."""
        return from_units(max(0, self.revocable_units - self.revocable_used_units))

    def has_room(self) -> bool:
        """Something is free that a task could use (cpu or gpu left, or slack cpu)."""
        # On the fixed-point units: called after every change to a host's books.
        cap, used = self.capacity.units, self.allocated.units
        return (cap[0] > used[0] or cap[3] > used[3]
                or self.revocable_units > self.revocable_used_units)

    def misfit(self, claim: Claim) -> str:
        """Why `claim` does not fit now ("" if it does)."""
        avail = self.available()
        res = claim.resources
        if claim.revocable:
            if to_units(res.cpu) > self.revocable_units - self.revocable_used_units:
                return f"needs {res.cpu:g} revocable cpu, {self.free_revocable():g} free"
            res = Resources(0.0, res.mem_mb, res.disk_mb, res.gpu)
        if not res.fits_in(avail):
            return f"needs {res}, free {avail}"
        taken = [p for p in claim.ports if p in self.used_ports]
        if taken:
            return f"port(s) {', '.join(map(str, taken))} already in use"
        return ""

    # -- the books -----------------------------------------------------------------------
    def take(self, claim: Claim) -> None:
        """Book a claim (the caller checked `misfit` if it had to)."""
        self._book(claim, 1)
        self.used_ports.update(claim.ports)

    def give(self, claim: Claim) -> None:
        """Return a claim taken earlier."""
        self._book(claim, -1)
        self.used_ports.difference_update(claim.ports)
        if not self.runs and not self.reserved:
            # Nothing held: the books are exact integers, so this is already zero.
            self.allocated, self.revocable_used_units = ZERO, 0

    def _book(self, claim: Claim, sign: int) -> None:
        res = claim.resources
        if claim.revocable:
            self.revocable_used_units += sign * res.units[0]
            res = Resources(0.0, res.mem_mb, res.disk_mb, res.gpu)
        if sign > 0:
            self.allocated = self.allocated + res
        else:
            self.allocated = self.allocated - res
        counts = self.task_labels
        for label in claim.labels:
            n = counts.get(label, 0) + sign
            if n > 0:
                counts[label] = n
            else:
                counts.pop(label, None)
        self._offer = None

    def offer(self) -> HostOffer:
        """A read-only snapshot for placement (cached until the books change)."""
        if self._offer is None:
            self._offer = HostOffer(
                hostname=self.hostname, agent_id=self.agent_id, capacity=self.capacity,
                available=self.available(),
                ports=subtract_ports(self.port_ranges, self.used_ports), labels=self.labels,
                state=self.state, revocable_cpu=self.free_revocable(),
                task_labels=tuple(sorted(self.task_labels.items())))
        return self._offer

    def invalidate(self) -> None:
        """Forget the cached snapshot (state or lease changed)."""
        self._offer = None
