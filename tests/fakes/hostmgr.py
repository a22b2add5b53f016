"""A fake host manager: `HostManagerPort` over in-memory hosts (a fake, not a mock).

It keeps the port's promises in the simplest way that is still true:

* `acquire_hosts` lends every UP host with free cpu (or slack cpu) that no
  other lease holds, as offers whose `available`, ports and task-label
  counts already subtract what runs and reservations hold;
* `commit_lease` books a reservation per placed run (refusing ones that no
  longer fit) and frees the leased hosts; `release_lease` frees them;
* `launch` consumes a run's reservation (or books room directly) and, with
  `auto_run` on, reports the run RUNNING at once; a launch to an unknown host, or to
  one in `unreachable` (still offered, its agent gone), fails `unreached`; `finish` (a test helper)
  and `kill` end runs with a terminal event, freeing their room;
* `subscribe` gives a per-consumer cursor over one ordered event list;
  acknowledged offsets persist per consumer name, as the port says.

Tests drive time and outcomes themselves: nothing here runs on its own.  Events
are stamped with the injected clock's wall time.
"""

from __future__ import annotations

import itertools
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import gevent.event

from peloton.common.clock import SYSTEM_CLOCK, Clock
from peloton.core.errors import NotFound, Unavailable, Unimplemented
from peloton.core.feasibility import HostShape
from peloton.core.model.constraints import Label
from peloton.core.model.host import HostInfo, HostOffer
from peloton.core.model.resources import EPSILON, PortRange, Resources
from peloton.core.model.sched import HostLease, HostReservation, LaunchFailure, LaunchSpec
from peloton.core.model.sla_policy import JOB_SLA_DRAIN, DrainRequest
from peloton.core.partitions import PartitionSet
from peloton.core.ports import HostEvent, HostSummary, shapes_of
from peloton.core.states import HostState, TaskState


@dataclass
class Booking:
    """Room a run holds on a host (reserved, or launched)."""

    run_id: str
    resources: Resources
    revocable: bool
    labels: tuple[Label, ...]
    ports: tuple[int, ...]
    launched: bool = False


@dataclass
class FakeHost:
    """One host: capacity, labels, state and the bookings on it."""

    hostname: str
    capacity: Resources
    labels: tuple[Label, ...] = ()
    state: HostState = HostState.UP
    slack_cpu: float = 0.0
    port_range: tuple[int, int] = (31000, 31999)
    bookings: dict[str, Booking] = field(default_factory=dict)

    @property
    def agent_id(self) -> str:
        return f"agent-{self.hostname}"

    def used(self) -> tuple[Resources, float]:
        """(non-revocable resources held, slack cpu held)."""
        total = Resources()
        rcpu = 0.0
        for b in self.bookings.values():
            if b.revocable:
                rcpu += b.resources.cpu
                total = total + Resources(0.0, b.resources.mem_mb, b.resources.disk_mb,
                                          b.resources.gpu)
            else:
                total = total + b.resources
        return total, rcpu

    def offer(self) -> HostOffer:
        """A snapshot of what is free now."""
        used, rcpu = self.used()
        taken = sorted(p for b in self.bookings.values() for p in b.ports)
        ranges: list[PortRange] = []
        start = self.port_range[0]
        for p in [*taken, self.port_range[1] + 1]:
            if p > start:
                ranges.append(PortRange(start, p - 1))
            start = p + 1
        counts = Counter(lb for b in self.bookings.values() for lb in b.labels)
        return HostOffer(self.hostname, self.agent_id, self.capacity,
                         self.capacity.minus_clamped(used), tuple(ranges), self.labels,
                         self.state, max(0.0, self.slack_cpu - rcpu),
                         tuple(sorted(counts.items())))

    def fits(self, res: Resources, revocable: bool) -> bool:
        used, rcpu = self.used()
        if revocable:
            return (rcpu + res.cpu <= self.slack_cpu + EPSILON and
                    (used + Resources(0, res.mem_mb, res.disk_mb, res.gpu)).fits_in(self.capacity))
        return (used + res).fits_in(self.capacity)


class FakeStream:
    """One consumer's cursor over the fake's events (filtered by partition as the host
    manager's stream is); every poll's partitions are recorded in `asked`."""

    def __init__(self, fake: FakeHostManager, consumer: str) -> None:
        self.fake = fake
        self.consumer = consumer
        self.cursor = fake.acked.get(consumer, 0)
        self._from = self.cursor
        self.asked: list[PartitionSet | None] = []

    @property
    def position(self) -> int:
        """Offset of the last event read (offsets are 1, 2, ...)."""
        return self.cursor

    @property
    def head(self) -> int:
        """The newest offset."""
        return len(self.fake.events)

    def poll(self, limit: int, timeout: float,
             partitions: PartitionSet | None = None) -> list[HostEvent]:
        """Events after the cursor (of `partitions`' jobs), waiting up to `timeout` for one."""
        self.asked.append(partitions)
        self._from = self.cursor
        deadline = time.monotonic() + timeout
        while True:
            out: list[HostEvent] = []
            for event in self.fake.events[self.cursor:]:
                self.cursor = event.offset
                if partitions is None or partitions.covers(event.run_id.rsplit("-", 2)[0]):
                    out.append(event)
                    if len(out) >= limit:
                        break
            left = deadline - time.monotonic()
            if out or left <= 0:
                return out
            self.fake.signal.wait(left)

    def rewind(self) -> None:
        """The next poll reads again what the last one read."""
        self.cursor = self._from

    def acknowledge(self, offset: int) -> None:
        """Everything up to `offset` is processed."""
        self.fake.acked[self.consumer] = max(offset, self.fake.acked.get(self.consumer, 0))


class FakeHostManager:
    """In-memory hosts behind `HostManagerPort`; see the module docstring."""

    def __init__(self, *, auto_run: bool = True, clock: Clock = SYSTEM_CLOCK) -> None:
        self.clock = clock
        self.hosts: dict[str, FakeHost] = {}
        self.auto_run = auto_run
        self.leases: dict[str, tuple[str, ...]] = {}
        self.leased: set[str] = set()
        self.events: list[HostEvent] = []
        self.acked: dict[str, int] = {}
        self.signal = gevent.event.Event()
        self.killed: list[str] = []
        #: The grace each run of `killed` was killed with.
        self.kill_graces: dict[str, float] = {}
        #: (hostname, volume id) of every volume removed; volumes listed here are kept.
        self.destroyed: list[tuple[str, str]] = []
        self.volumes_in_use: set[str] = set()
        #: (hostname, launch) of every run handed to launch().
        self.launches: list[tuple[str, LaunchSpec]] = []
        self.refused: list[HostReservation] = []
        self.drains: dict[str, DrainRequest] = {}
        #: Hosts still offered whose agent cannot be reached (killed, not yet timed out).
        self.unreachable: set[str] = set()
        self._ids = itertools.count(1)

    # -- test setup and helpers ------------------------------------------------------------
    def add_host(self, hostname: str, cpu: float = 4, mem: float = 8192, disk: float = 100_000,
                 gpu: float = 0, *, labels: tuple[Label, ...] = (), slack_cpu: float = 0.0,
                 state: HostState = HostState.UP) -> FakeHost:
        """Register a host."""
        host = FakeHost(hostname, Resources(cpu, mem, disk, gpu), labels, state, slack_cpu)
        self.hosts[hostname] = host
        return host

    def drain(self, hostname: str, request: DrainRequest = JOB_SLA_DRAIN) -> None:
        """Put a host under maintenance (DRAINING, never offered) with a drain request."""
        self.hosts[hostname].state = HostState.DRAINING
        self.drains[hostname] = request

    def runs(self, hostname: str | None = None) -> dict[str, str]:
        """Launched runs -> their host (of one host, or all)."""
        return {run: h.hostname for h in self.hosts.values() if hostname in (None, h.hostname)
                for run, b in h.bookings.items() if b.launched}

    def reservations(self) -> dict[str, str]:
        """Reserved, not launched runs -> their host."""
        return {run: h.hostname for h in self.hosts.values()
                for run, b in h.bookings.items() if not b.launched}

    def emit(self, run_id: str, state: TaskState, hostname: str = "", message: str = "",
             healthy: str = "") -> None:
        """Append a status event (`healthy`: a HealthState name, for health check results)."""
        offset = len(self.events) + 1
        agent = self.hosts[hostname].agent_id if hostname in self.hosts else ""
        self.events.append(HostEvent(offset, run_id, state, hostname, agent, self.clock.wall(),
                                     message, healthy=healthy))
        signal, self.signal = self.signal, gevent.event.Event()
        signal.set()

    def finish(self, run_id: str, state: TaskState = TaskState.SUCCEEDED) -> None:
        """A launched run ends on its host."""
        for host in self.hosts.values():
            if run_id in host.bookings:
                del host.bookings[run_id]
                self.emit(run_id, state, host.hostname)
                return
        raise NotFound(f"run {run_id} is not on any host")

    # -- placement engine side ---------------------------------------------------------------
    def acquire_hosts(self, max_hosts: int = 0) -> HostLease:
        offers = []
        for host in self.hosts.values():
            if host.hostname in self.leased or host.state is not HostState.UP:
                continue
            offer = host.offer()
            if offer.available.cpu <= EPSILON and offer.revocable_cpu <= EPSILON:
                continue
            offers.append(offer)
            if max_hosts and len(offers) >= max_hosts:
                break
        lease_id = f"lease-{next(self._ids)}"
        names = tuple(o.hostname for o in offers)
        self.leases[lease_id] = names
        self.leased.update(names)
        return HostLease(lease_id, tuple(offers))

    def commit_lease(self, lease_id: str, reservations: Sequence[HostReservation]) -> None:
        names = self.leases.pop(lease_id, None)
        if names is None:
            raise NotFound(f"lease {lease_id} is not open")
        self.leased.difference_update(names)
        for res in reservations:
            host = self.hosts.get(res.hostname)
            if host is None or not host.fits(res.resources, res.revocable):
                self.refused.append(res)
                continue
            run_id = str(res.task_id.run(res.run_id))
            host.bookings[run_id] = Booking(run_id, res.resources, res.revocable, res.labels,
                                            res.ports)

    def release_lease(self, lease_id: str) -> None:
        self.leased.difference_update(self.leases.pop(lease_id, ()))

    # -- job manager side -----------------------------------------------------------------------
    def launch(self, hostname: str, tasks: Sequence[LaunchSpec]) -> list[LaunchFailure]:
        host = self.hosts.get(hostname)
        failures = []
        self.launches += [(hostname, spec) for spec in tasks]
        for spec in tasks:
            if host is None or hostname in self.unreachable:
                if host is not None:
                    host.bookings.pop(spec.run_id, None)  # its reservation is given up
                failures.append(LaunchFailure(spec.run_id, f"cannot reach host {hostname}",
                                              unreached=True))
                continue
            booking = host.bookings.get(spec.run_id)
            if booking is None:
                s = spec.spec
                if not host.fits(s.resources, s.revocable):
                    failures.append(LaunchFailure(spec.run_id, "no room"))
                    continue
                booking = host.bookings[spec.run_id] = Booking(
                    spec.run_id, s.resources, s.revocable, s.labels,
                    tuple(p for _, p in spec.ports))
            booking.launched = True
            if self.auto_run:
                self.emit(spec.run_id, TaskState.RUNNING, hostname)
        return failures

    def launch_hosts(self, launches: Mapping[str, Sequence[LaunchSpec]]
                     ) -> dict[str, list[LaunchFailure]]:
        out = {}
        for hostname, tasks in launches.items():
            failures = self.launch(hostname, tasks)
            if failures:
                out[hostname] = failures
        return out

    def adopt(self, hostname: str, tasks: Sequence[LaunchSpec]) -> None:
        host = self.hosts[hostname]
        for spec in tasks:
            s = spec.spec
            host.bookings[spec.run_id] = Booking(spec.run_id, s.resources, s.revocable, s.labels,
                                                 tuple(p for _, p in spec.ports), launched=True)

    def adopt_hosts(self, runs: Mapping[str, Sequence[LaunchSpec]]) -> None:
        for hostname, tasks in runs.items():
            self.adopt(hostname, tasks)

    def kill(self, run_ids: Sequence[str], grace_secs: float = 5.0) -> None:
        for run_id in run_ids:
            self.killed.append(run_id)
            self.kill_graces[run_id] = grace_secs
            for host in self.hosts.values():
                if run_id in host.bookings:
                    del host.bookings[run_id]
                    self.emit(run_id, TaskState.KILLED, host.hostname)
                    break

    def destroy_volumes(self, hostname: str, volume_ids: Sequence[str]) -> list[str]:
        """Records the volumes removed (`destroyed`); those in `volumes_in_use` are kept."""
        if hostname not in self.hosts:
            raise Unavailable(f"host {hostname!r} is not registered")
        kept = [v for v in volume_ids if v in self.volumes_in_use]
        self.destroyed += [(hostname, v) for v in volume_ids if v not in kept]
        return kept

    def reconcile(self, run_ids: Sequence[str],
                  expected: Sequence[TaskState | None] | None = None) -> None:
        known = self.runs()
        for n, run_id in enumerate(run_ids):
            if expected is not None and expected[n] is TaskState.RUNNING and run_id in known:
                continue  # the caller holds its latest report (the fake's runs all run)
            if run_id in known:
                self.emit(run_id, TaskState.RUNNING, known[run_id])
            else:
                self.emit(run_id, TaskState.LOST, message="unknown to every host")

    def sandbox_files(self, hostname: str, run_id: str,
                      path: str = "") -> tuple[str, list[tuple[str, int]]]:
        raise Unimplemented("the fake host manager has no sandboxes")

    def read_sandbox(self, hostname: str, run_id: str, path: str, offset: int = 0,
                     length: int = 1 << 20) -> bytes:
        raise Unimplemented("the fake host manager has no sandboxes")

    def subscribe(self, consumer: str) -> FakeStream:
        return FakeStream(self, consumer)

    def cluster_capacity(self) -> tuple[Resources, float]:
        total = Resources()
        slack = 0.0
        for host in self.hosts.values():
            if host.state is HostState.UP:
                total = total + host.capacity
                slack += host.slack_cpu
        return total, slack

    def host_states(self) -> dict[str, HostState]:
        return {name: h.state for name, h in self.hosts.items()}

    def host_summaries(self) -> list[HostSummary]:
        return [HostSummary(HostInfo(h.hostname, state=h.state, goal_state=h.state,
                                     labels=h.labels), h.capacity, h.used()[0], h.agent_id,
                            tasks=len(h.bookings))
                for _, h in sorted(self.hosts.items())]

    def drain_requests(self) -> dict[str, DrainRequest]:
        return {h.hostname: self.drains.get(h.hostname, JOB_SLA_DRAIN)
                for h in self.hosts.values() if h.state is HostState.DRAINING}

    def host_shapes(self) -> list[HostShape]:
        return shapes_of(self.host_summaries())

    def draining_runs(self) -> list[tuple[str, str]]:
        return [(h.hostname, run) for h in self.hosts.values() if h.state is HostState.DRAINING
                for run, b in h.bookings.items() if b.launched]

