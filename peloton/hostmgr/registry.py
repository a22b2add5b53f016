"""The host registry: every host the backend reported or storage remembers, and every run.

It owns four indexes that keep the hot paths free of scans over all hosts:
- `runs`: run id -> RunRecord, so a status update or a kill finds its host in O(1);
- `offerable`: hosts that are connected and not unreached (core/lifecycle/host_reach.py `OFFERED`),
  schedulable, UP, not leased and have room, in the order they became so (first fit), so
  a lease walks only hosts it can hand out;
- `draining`: DRAINING hosts, whose runs the job manager must move;
- `held`: UNREACHED hosts and when their hold ends, so a heartbeat of any other host costs
  one lookup and the pruner looks only at held hosts.
Every change to a host goes through `refresh`, which keeps `offerable` exact; every change
to its reach goes through `_move`, which applies the table in core/lifecycle/host_reach.py.

Maintenance records (`HostInfo`: state, goal state) live in `infos`; a host with no
record is UP.  Not thread-safe: the host manager holds its lock around every call.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import replace

from peloton.core.feasibility import HostShape
from peloton.core.lifecycle.host_reach import CONNECTED, OFFERED, Reach, ReachEvent, next_reach
from peloton.core.model.host import HostInfo
from peloton.core.model.resources import ZERO, Resources, from_units
from peloton.core.model.sla_policy import JOB_SLA_DRAIN, DrainRequest
from peloton.core.ports import HostSummary
from peloton.core.states import HostState, TaskState
from peloton.hostmgr.backends.base import BackendHost
from peloton.hostmgr.hosts import Claim, HostRecord, RunRecord

#: How many ended runs are remembered (see `HostRegistry.ended`).
ENDED_MEMORY = 65536


class HostRegistry:
    """Hosts, runs and maintenance records; see the module docstring."""

    def __init__(self) -> None:
        self.hosts: dict[str, HostRecord] = {}
        self.runs: dict[str, RunRecord] = {}
        self.infos: dict[str, HostInfo] = {}
        self.offerable: dict[str, None] = {}
        self.draining: set[str] = set()
        #: UNREACHED host -> monotonic time at which it is offered again unless heard from.
        self.held: dict[str, float] = {}
        #: Runs seen to end, so a late non-terminal re-delivery does not book them again and a
        #: kill of a finished run needs no reconciliation.  Run ids are never reused.
        self.ended: OrderedDict[str, None] = OrderedDict()
        #: `capacity()` as last computed; dropped whenever a host's capacity, connection or
        #: maintenance state may have changed (the resource manager asks every second, and
        #: a sum over 10,000 hosts each time is what a simulated day would spend its time on).
        self._capacity: tuple[Resources, float] | None = None
        #: `shapes()`, kept until a host's description, connection or state changes.
        self._shapes: list[HostShape] | None = None

    # -- hosts ---------------------------------------------------------------------------
    def host(self, hostname: str) -> HostRecord:
        """The record of `hostname`, created (disconnected, empty) if new."""
        rec = self.hosts.get(hostname)
        if rec is None:
            rec = self.hosts[hostname] = HostRecord(hostname)
            self._shapes = None
            info = self.infos.get(hostname)
            if info is not None:
                rec.state = info.state
        return rec

    def upsert(self, backend_host: BackendHost) -> HostRecord:
        """A host registered or re-registered with the backend."""
        rec = self.host(backend_host.hostname)
        rec.describe(backend_host)
        self._capacity = None
        self._shapes = None
        self._move(rec, ReachEvent.REGISTERED)
        return rec

    def disconnect(self, hostname: str) -> HostRecord | None:
        """A host went away; its runs stay booked until the backend reports them."""
        rec = self.hosts.get(hostname)
        if rec is not None:
            self._move(rec, ReachEvent.GONE)
        return rec

    def unreached(self, hostname: str, until: float) -> bool:
        """A launch did not get to the host: hold it from placement until it is heard from,
        or until `until` (monotonic).  True if the host is held now."""
        rec = self.hosts.get(hostname)
        if rec is None:
            return False
        self._move(rec, ReachEvent.UNREACHED)
        if rec.reach is Reach.UNREACHED:
            self.held[hostname] = until  # a later failure holds it longer
            return True
        return False

    def heard(self, hostname: str) -> bool:
        """The backend heard from the host (a heartbeat); True if that ended its hold."""
        if hostname not in self.held:  # nearly every heartbeat: one lookup
            return False
        self._move(self.hosts[hostname], ReachEvent.HEARD)
        return True

    def expire_holds(self, now: float) -> list[str]:
        """End the holds due by `now` (monotonic); returns the hosts offered again."""
        due = [name for name, until in self.held.items() if until <= now]
        for name in due:
            self._move(self.hosts[name], ReachEvent.HOLD_EXPIRED)
        return due

    def _move(self, rec: HostRecord, event: ReachEvent) -> None:
        """Apply `event` to the host's reach (host_reach.py's table) and keep the indexes exact."""
        before = rec.reach
        rec.reach = after = next_reach(before, event)
        if after is not Reach.UNREACHED:
            self.held.pop(rec.hostname, None)
        if (before in CONNECTED) != (after in CONNECTED):
            self._capacity = None
            self._shapes = None
        self.refresh(rec)

    def known(self, hostname: str) -> bool:
        """The backend reported the host at some point, or storage has a record of it."""
        return hostname in self.hosts or hostname in self.infos

    def state(self, hostname: str) -> HostState:
        """Maintenance state (UP for a host with no record)."""
        info = self.infos.get(hostname)
        return info.state if info is not None else HostState.UP

    def info(self, hostname: str) -> HostInfo:
        """The maintenance record, or the implied UP one (labels and address from the backend)."""
        rec = self.hosts.get(hostname)
        info = self.infos.get(hostname) or HostInfo(hostname=hostname)
        if rec is not None and rec.connected:
            ip = rec.address.rsplit(":", 1)[0] if rec.address else info.ip
            info = replace(info, ip=ip, labels=rec.labels)
        return info

    def set_info(self, info: HostInfo) -> None:
        """Adopt a (persisted) maintenance record."""
        self.infos[info.hostname] = info
        self._capacity = None
        self._shapes = None
        if info.state is HostState.DRAINING:
            self.draining.add(info.hostname)
        else:
            self.draining.discard(info.hostname)
        rec = self.hosts.get(info.hostname)
        if rec is not None:
            rec.state = info.state
            rec.invalidate()
            self.refresh(rec)

    def refresh(self, rec: HostRecord) -> None:
        """Re-decide whether the host can be offered (call after any change to it)."""
        if (rec.reach in OFFERED and rec.schedulable and rec.state is HostState.UP
                and rec.lease_id is None and rec.has_room()):
            self.offerable.setdefault(rec.hostname, None)
        else:
            self.offerable.pop(rec.hostname, None)

    def offer_order(self) -> tuple[str, ...]:
        """The offerable hosts in the order a lease takes them."""
        return tuple(self.offerable)

    def restore_offer_order(self, names: tuple[str, ...]) -> None:
        """Put the offerable hosts named in `names` first, in that order (a simulation
        resuming another cluster's rotation); the others follow in their own order."""
        named = [n for n in dict.fromkeys(names) if n in self.offerable]
        first = set(named)
        rest = [n for n in self.offerable if n not in first]
        self.offerable.clear()
        self.offerable.update(dict.fromkeys([*named, *rest]))

    # -- runs ----------------------------------------------------------------------------
    def add_run(self, rec: HostRecord, run_id: str, claim: Claim, state: TaskState) -> RunRecord:
        """Book a run on a host."""
        run = RunRecord(run_id, rec.hostname, claim, state)
        self.runs[run_id] = run
        rec.runs[run_id] = run
        rec.take(claim)
        self.refresh(rec)
        return run

    def remove_run(self, run_id: str) -> RunRecord | None:
        """Forget a run and free what it held; None if unknown."""
        run = self.runs.pop(run_id, None)
        if run is not None:
            rec = self.hosts[run.hostname]
            del rec.runs[run_id]
            rec.give(run.claim)
            self.refresh(rec)
        return run

    def set_claim(self, run: RunRecord, claim: Claim) -> None:
        """Replace what a run holds (a run adopted after a restart gets its real claim)."""
        rec = self.hosts[run.hostname]
        rec.give(run.claim)
        run.claim = claim
        rec.take(claim)
        self.refresh(rec)

    def mark_ended(self, run_id: str) -> None:
        """Remember that a run has ended (bounded memory, oldest forgotten first)."""
        self.ended[run_id] = None
        if len(self.ended) > ENDED_MEMORY:
            self.ended.popitem(last=False)

    # -- reservations ----------------------------------------------------------------------
    def reserve(self, rec: HostRecord, key: str, claim: Claim) -> None:
        """Hold a claim on a host for a run not launched yet."""
        rec.reserved[key] = claim
        rec.take(claim)
        self.refresh(rec)

    def unreserve(self, hostname: str, key: str) -> Claim | None:
        """Free a reservation; None if there was none."""
        rec = self.hosts.get(hostname)
        claim = rec.reserved.pop(key, None) if rec is not None else None
        if rec is not None and claim is not None:
            rec.give(claim)
            self.refresh(rec)
        return claim

    # -- reads -----------------------------------------------------------------------------
    def capacity(self) -> tuple[Resources, float]:
        """Non-revocable capacity and slack cpu of connected UP hosts."""
        if self._capacity is not None:
            return self._capacity
        total, slack = ZERO, 0
        for rec in self.hosts.values():
            if rec.connected and rec.state is HostState.UP:
                total = total + rec.capacity
                slack += rec.revocable_units  # exact: summed in fixed-point units
        self._capacity = (total, from_units(slack))
        return self._capacity

    def states(self) -> dict[str, HostState]:
        """Maintenance state of every known host."""
        names = set(self.hosts) | set(self.infos)
        return {name: self.state(name) for name in sorted(names)}

    def draining_runs(self) -> list[tuple[str, str]]:
        """(hostname, run id) of every run on a DRAINING host."""
        return [(name, run_id) for name in sorted(self.draining)
                for run_id in (self.hosts[name].runs if name in self.hosts else ())]

    def drain_requests(self) -> dict[str, DrainRequest]:
        """How each DRAINING host is drained (a record without a request: Peloton's drain)."""
        out = {}
        for name in sorted(self.draining):
            info = self.infos.get(name)
            out[name] = info.drain if info is not None and info.drain is not None \
                else JOB_SLA_DRAIN
        return out

    def shapes(self) -> list[HostShape]:
        """`shapes_of(summaries())` without the allocation, cached (see `_shapes`)."""
        if self._shapes is None:
            shapes = []
            for name in sorted(set(self.hosts) | set(self.infos)):
                rec = self.hosts.get(name)
                info = self.infos.get(name)
                connected = rec is not None and rec.connected
                labels = rec.labels if connected and rec is not None else (
                    info.labels if info is not None else ())
                state = info.state if info is not None else HostState.UP
                shapes.append(HostShape(name, rec.capacity if rec is not None else ZERO, labels,
                                        up=connected and state is HostState.UP))
            self._shapes = shapes
        return list(self._shapes)

    def summaries(self) -> list[HostSummary]:
        """Every known host as `host query` shows it, sorted by name."""
        out = []
        for name in sorted(set(self.hosts) | set(self.infos)):
            rec = self.hosts.get(name)
            allocated = ZERO
            if rec is not None:
                allocated = rec.allocated + Resources(cpu=rec.revocable_used)
            out.append(HostSummary(
                info=self.info(name), capacity=rec.capacity if rec is not None else ZERO,
                allocated=allocated, agent_id=rec.agent_id if rec is not None else "",
                connected=rec is not None and rec.connected,
                tasks=len(rec.runs) if rec is not None else 0,
                runs=tuple(sorted(rec.runs)) if rec is not None else (),
                slack_cpu=from_units(rec.revocable_units) if rec is not None else 0.0,
                slack_allocated_cpu=rec.revocable_used if rec is not None else 0.0))
        return out
