"""Leases and reservations: how placement borrows hosts and holds room for the runs it placed.

- `acquire` lends offerable hosts to one placement round as a `HostLease` of snapshots;
  a leased host leaves the offerable set, so no other round sees it until the lease ends.
- `commit` turns the round's result into reservations, one per placed run (keyed by its
  run id `<job>-<instance>-<run>`), and gives every host of the lease back at once.  A
  reservation that no longer fits (the host was drained, went away, or a run was launched
  on it without a reservation meanwhile) is refused; the launch then decides on what is free.
- `release` gives a lease back unused; idempotent.
- `take` consumes a run's reservation when the run is launched.
- Expiry: `prune` ends leases older than the lease timeout and frees reservations whose
  run was not launched within the reservation timeout.  All leases share one timeout and
  all reservations another, and the clock is monotonic, so both are kept in expiry order
  and pruning pops from the front instead of scanning.
Not thread-safe: the host manager holds its lock around every call.
"""

from __future__ import annotations

import itertools
import logging
import uuid
from collections.abc import Callable, Sequence

from peloton.core.model.sched import HostLease, HostReservation
from peloton.core.states import HostState
from peloton.hostmgr.hosts import Claim
from peloton.hostmgr.registry import HostRegistry

log = logging.getLogger(__name__)


class _Lease:
    __slots__ = ("expires", "hostnames")

    def __init__(self, hostnames: tuple[str, ...], expires: float) -> None:
        self.hostnames = hostnames
        self.expires = expires


class _Held:
    __slots__ = ("expires", "hostname")

    def __init__(self, hostname: str, expires: float) -> None:
        self.hostname = hostname
        self.expires = expires


def reservation_key(res: HostReservation) -> str:
    """The run id a reservation is for, as launch and kill name it."""
    return f"{res.task_id}-{res.run_id}"


class LeaseBook:
    """Open leases and held reservations; see the module docstring."""

    def __init__(self, registry: HostRegistry, clock: Callable[[], float],
                 lease_timeout: float, reservation_timeout: float) -> None:
        self._registry = registry
        self._clock = clock
        self._lease_timeout = lease_timeout
        self._reservation_timeout = reservation_timeout
        self._leases: dict[str, _Lease] = {}
        self._held: dict[str, _Held] = {}
        self._prefix = uuid.uuid4().hex[:8]
        self._seq = itertools.count(1)

    @property
    def lease_count(self) -> int:
        """Leases open now."""
        return len(self._leases)

    @property
    def reservation_count(self) -> int:
        """Reservations held now."""
        return len(self._held)

    def leased_hosts(self) -> set[str]:
        """Hosts in an open lease now."""
        return {name for lease in self._leases.values() for name in lease.hostnames}

    def reservation_host(self, run_id: str) -> str | None:
        """Where a run holds a reservation (None if it holds none)."""
        held = self._held.get(run_id)
        return held.hostname if held is not None else None

    # -- leases --------------------------------------------------------------------------
    def acquire(self, max_hosts: int = 0) -> HostLease:
        """Lease offerable hosts (all of them, or the first `max_hosts`).

        A host leaves the offerable set while leased and rejoins it at the end when the
        lease ends, so leases of `max_hosts` rotate through every offerable host."""
        reg = self._registry
        names = list(reg.offerable if max_hosts <= 0
                     else itertools.islice(reg.offerable, max_hosts))
        lease_id = f"{self._prefix}-{next(self._seq)}"
        offers = []
        for name in names:
            rec = reg.hosts[name]
            rec.lease_id = lease_id
            # The snapshot says nothing about leases: it stays valid until the host's books
            # change, so a host nothing happened to since the last round costs no new offer.
            offers.append(rec.offer())
            del reg.offerable[name]
        if names:
            self._leases[lease_id] = _Lease(tuple(names), self._clock() + self._lease_timeout)
        return HostLease(lease_id=lease_id, offers=tuple(offers))

    def release(self, lease_id: str) -> None:
        """Give a lease's hosts back; unknown or ended leases are ignored."""
        lease = self._leases.pop(lease_id, None)
        if lease is None:
            return
        for name in lease.hostnames:
            rec = self._registry.hosts.get(name)
            if rec is not None and rec.lease_id == lease_id:
                rec.lease_id = None
                self._registry.refresh(rec)

    def commit(self, lease_id: str, reservations: Sequence[HostReservation]) -> list[str]:
        """Reserve room for placed runs, then end the lease; returns why any were refused."""
        refused = []
        for res in reservations:
            why = self._reserve(lease_id, res)
            if why:
                refused.append(f"{reservation_key(res)} on {res.hostname}: {why}")
        self.release(lease_id)
        if refused:
            log.warning("lease %s: %d of %d reservations refused, first: %s", lease_id,
                        len(refused), len(reservations), refused[0])
        return refused

    def _reserve(self, lease_id: str, res: HostReservation) -> str:
        reg = self._registry
        rec = reg.hosts.get(res.hostname)
        if rec is None or not rec.connected:
            return "host is not connected"
        if rec.state is not HostState.UP:
            return f"host is {rec.state.value}"
        if rec.lease_id is not None and rec.lease_id != lease_id:
            return "host is leased to another placement round"
        key = reservation_key(res)
        self.drop(key)  # a run placed again replaces its older reservation
        if key in reg.runs:
            return "run is already launched"
        claim = Claim(res.resources, res.revocable, res.ports, res.labels)
        why = rec.misfit(claim)
        if why:
            return why
        reg.reserve(rec, key, claim)
        self._held[key] = _Held(rec.hostname, self._clock() + self._reservation_timeout)
        return ""

    # -- reservations --------------------------------------------------------------------
    def take(self, run_id: str) -> tuple[str, Claim] | None:
        """Consume a run's reservation: (hostname, claim), now freed for the launch to book."""
        held = self._held.pop(run_id, None)
        if held is None:
            return None
        claim = self._registry.unreserve(held.hostname, run_id)
        return (held.hostname, claim) if claim is not None else None

    def drop(self, run_id: str) -> bool:
        """Free a run's reservation; False if it held none."""
        return self.take(run_id) is not None

    def drop_host(self, hostname: str) -> int:
        """Free every reservation on a host (it is draining or gone); returns how many."""
        rec = self._registry.hosts.get(hostname)
        keys = list(rec.reserved) if rec is not None else []
        for key in keys:
            self.drop(key)
        return len(keys)

    # -- expiry --------------------------------------------------------------------------
    def prune(self) -> tuple[int, int]:
        """End expired leases and reservations; returns how many of each."""
        now = self._clock()
        leases = 0
        while self._leases:
            lease_id, lease = next(iter(self._leases.items()))
            if lease.expires > now:
                break
            self.release(lease_id)
            leases += 1
        reservations = 0
        while self._held:
            run_id, held = next(iter(self._held.items()))
            if held.expires > now:
                break
            self.drop(run_id)
            reservations += 1
        if leases or reservations:
            log.info("expired %d lease(s) and %d reservation(s)", leases, reservations)
        return leases, reservations
