"""Launch and kill: booking runs on hosts and routing calls to the backend.

Launch books every run under the lock (consuming its reservation, or taking free room),
then hands the accepted runs to the backend in one call per host outside the lock; if the
backend refuses, the runs it was given are un-booked and reported as launch failures.
A failure is marked `unreached` when the launch did not get to the host: the host is
unknown or not connected, or the backend could not find or reach it (NotFound,
Unavailable: an agent killed -9 refuses connections until its heartbeats time out; a run
that did start after a call timed out is an orphan its job manager kills).  The job
manager does not count such a launch against the task; a run the host manager turned
down (no room, cordoned) is a plain failure.  A host the backend could not reach is held
from placement (UNREACHED, core/lifecycle/host_reach.py) until it is heard from again or `unreached_hold`
seconds pass, so the dead agent does not take every launch until its heartbeats time out.

Kill finds each run's host in the run index (O(1) per run) and sends one kill per host.
- A run that only holds a reservation is killed by freeing the reservation.
- A run on a host that is not connected keeps its kill, which is sent again when the host
  re-registers.
- A run nobody has reported (after a restart, before reconciliation) is remembered as a
  pending kill and the backend is asked to reconcile it: if a host reports it alive, it is
  killed then; if no host knows it, the backend reports it LOST.
- A run seen to end needs nothing.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence

from peloton.core.errors import NotFound, PelotonError, Unavailable
from peloton.core.model.sched import LaunchFailure, LaunchSpec
from peloton.core.states import HostState, TaskState
from peloton.hostmgr.backends.base import HostBackend
from peloton.hostmgr.hosts import UNKNOWN_CLAIM, Claim, HostRecord, RunRecord
from peloton.hostmgr.leases import LeaseBook
from peloton.hostmgr.registry import HostRegistry
from peloton.hostmgr.worker import Deferred

log = logging.getLogger(__name__)


class Router:
    """Launch, kill and adopt runs; see the module docstring."""

    def __init__(self, registry: HostRegistry, leases: LeaseBook, backend: HostBackend,
                 lock: threading.Lock, deferred: Deferred, clock: Callable[[], float],
                 pending_kill_ttl: float, unreached_hold: float) -> None:
        self._registry = registry
        self._leases = leases
        self._backend = backend
        self._lock = lock
        self._deferred = deferred
        self._clock = clock
        self._ttl = pending_kill_ttl
        self._hold = unreached_hold
        #: run id -> (grace, expiry) for kills of runs no host has reported yet.
        self._pending: dict[str, tuple[float, float]] = {}

    # -- launch --------------------------------------------------------------------------
    def launch(self, hostname: str, tasks: Sequence[LaunchSpec]) -> list[LaunchFailure]:
        """Book and start runs on a host; returns the runs that could not be handed to it."""
        return self.launch_hosts({hostname: tasks}).get(hostname, [])

    def launch_hosts(self, launches: Mapping[str, Sequence[LaunchSpec]]
                     ) -> dict[str, list[LaunchFailure]]:
        """`launch` on many hosts: every host's runs booked under one hold of the lock (a
        launch round's thousands of hosts), then handed to the backend host by host in the
        order given.  Returns the failures by hostname (hosts without any left out)."""
        failures: dict[str, list[LaunchFailure]] = {}
        accepted: list[tuple[str, list[LaunchSpec]]] = []
        with self._lock:
            for hostname, tasks in launches.items():
                ok, refused = self._book_host(hostname, tasks)
                if refused:
                    failures[hostname] = refused
                if ok:
                    accepted.append((hostname, ok))
        for hostname, ok in accepted:
            try:
                self._backend.launch(hostname, ok)
            except Exception as exc:
                if not isinstance(exc, PelotonError):
                    log.exception("backend %s failed to launch on %s", self._backend.name, hostname)
                failures.setdefault(hostname, []).extend(self._unbook(
                    hostname, ok, f"launch on {hostname}: {exc}",
                    unreached=isinstance(exc, NotFound | Unavailable)))
        return failures

    def _book_host(self, hostname: str, tasks: Sequence[LaunchSpec]
                   ) -> tuple[list[LaunchSpec], list[LaunchFailure]]:
        """Book one host's runs (the caller holds the lock): (runs to hand to the backend,
        runs refused).  A run already running there is neither."""
        failures: list[LaunchFailure] = []
        accepted: list[LaunchSpec] = []
        rec = self._registry.hosts.get(hostname)
        problem = _host_problem(rec)
        unreached = rec is None or not rec.connected
        for spec in tasks:
            if problem:
                self._leases.drop(spec.run_id)
                failures.append(LaunchFailure(spec.run_id, problem, unreached=unreached))
                continue
            assert rec is not None
            why = self._book(rec, spec)
            if why:
                failures.append(LaunchFailure(spec.run_id, why))
            elif why is not None:
                accepted.append(spec)
        return accepted, failures

    def _book(self, rec: HostRecord, spec: LaunchSpec) -> str | None:
        """Book one run: "" if booked, a reason if refused, None if it is already running there."""
        run = self._registry.runs.get(spec.run_id)
        if run is not None:
            return None if run.hostname == rec.hostname else f"already launched on {run.hostname}"
        if spec.run_id in self._registry.ended:
            return "run has already ended"
        taken = self._leases.take(spec.run_id)
        claim = Claim.for_launch(spec, taken[1] if taken is not None else None)
        why = rec.misfit(claim)
        if why:
            return f"no room on {rec.hostname}: {why}"
        self._registry.add_run(rec, spec.run_id, claim, TaskState.LAUNCHED)
        return ""

    def _unbook(self, hostname: str, specs: Sequence[LaunchSpec], reason: str, *,
                unreached: bool) -> list[LaunchFailure]:
        with self._lock:
            for spec in specs:
                run = self._registry.runs.get(spec.run_id)
                # A run the host already reported on is real: keep it, its events tell the rest.
                if run is not None and run.hostname == hostname and run.state is TaskState.LAUNCHED:
                    self._registry.remove_run(spec.run_id)
            held = unreached and self._registry.unreached(hostname, self._clock() + self._hold)
        if held:
            log.warning("%s; not offered until heard from (at most %g s)", reason, self._hold)
        return [LaunchFailure(spec.run_id, reason, unreached=unreached) for spec in specs]

    def adopt(self, hostname: str, tasks: Sequence[LaunchSpec]) -> None:
        """Book runs already running on a host (recovery: the job manager knows their specs)."""
        self.adopt_hosts({hostname: tasks})

    def adopt_hosts(self, runs: Mapping[str, Sequence[LaunchSpec]]) -> None:
        """`adopt` for many hosts: the lock taken per host (a job manager's recovery adopts
        a million runs; other calls go on between hosts), one reconcile for the runs no
        host has reported yet.  A run already booked with its claim costs a lookup."""
        unseen: list[str] = []
        registry = self._registry
        for hostname, tasks in runs.items():
            with self._lock:
                rec = registry.host(hostname)
                known, ended = registry.runs, registry.ended
                for spec in tasks:
                    run = known.get(spec.run_id)
                    if run is None:
                        if spec.run_id not in ended:
                            registry.add_run(rec, spec.run_id, Claim.for_launch(spec, None),
                                             TaskState.LAUNCHED)
                            unseen.append(spec.run_id)
                    elif run.claim is UNKNOWN_CLAIM:
                        registry.set_claim(run, Claim.for_launch(spec, None))
        if unseen:  # if no host knows them the backend reports them LOST, which frees them
            self._reconcile(unseen)

    # -- kill ----------------------------------------------------------------------------
    def kill(self, run_ids: Sequence[str], grace: float) -> None:
        """Stop runs wherever they are; idempotent."""
        by_host: dict[str, list[str]] = {}
        unknown: list[str] = []
        with self._lock:
            expires = self._clock() + self._ttl
            for run_id in run_ids:
                run = self._registry.runs.get(run_id)
                if run is not None:
                    run.kill_grace = grace
                    rec = self._registry.hosts.get(run.hostname)
                    if rec is not None and rec.connected:
                        by_host.setdefault(run.hostname, []).append(run_id)
                elif self._leases.drop(run_id) or run_id in self._registry.ended:
                    continue
                else:
                    self._pending[run_id] = (grace, expires)
                    unknown.append(run_id)
        for hostname, ids in by_host.items():
            self._send(hostname, ids, grace)
        if unknown:
            self._reconcile(unknown)

    def resend_kills(self, hostname: str) -> None:
        """Send the kills a host missed while it was away (it re-registered)."""
        with self._lock:
            rec = self._registry.hosts.get(hostname)
            runs = [r for r in rec.runs.values() if r.kill_grace is not None] if rec else []
        by_grace: dict[float, list[str]] = {}
        for run in runs:
            by_grace.setdefault(run.kill_grace or 0.0, []).append(run.run_id)
        for grace, ids in by_grace.items():
            self._send(hostname, ids, grace)

    def seen(self, run: RunRecord) -> None:
        """A run was reported alive (lock held): carry out a kill asked for before we knew it."""
        pending = self._pending.pop(run.run_id, None)
        if pending is not None:
            run.kill_grace = grace = pending[0]
            hostname, run_ids = run.hostname, [run.run_id]
            self._deferred.defer(lambda: self._send(hostname, run_ids, grace))

    def ended(self, run_id: str) -> None:
        """A run ended (lock held): no kill is pending for it any more."""
        self._pending.pop(run_id, None)

    def prune(self) -> int:
        """Forget pending kills past their time; returns how many."""
        now = self._clock()
        with self._lock:
            stale = [run_id for run_id, (_, expires) in self._pending.items() if expires <= now]
            for run_id in stale:
                del self._pending[run_id]
        return len(stale)

    def _send(self, hostname: str, run_ids: list[str], grace: float) -> None:
        try:
            self._backend.kill(hostname, run_ids, grace)
        except Exception:
            # The kill stays recorded on each run and is sent again when the host re-registers.
            log.warning("killing %d run(s) on %s failed", len(run_ids), hostname, exc_info=True)

    def _reconcile(self, run_ids: list[str]) -> None:
        try:
            self._backend.reconcile(run_ids)
        except Exception:
            log.warning("reconciling %d run(s) failed", len(run_ids), exc_info=True)


def _host_problem(rec: HostRecord | None) -> str:
    """Why nothing can be launched on a host now ("" if something can)."""
    if rec is None:
        return "unknown host"
    if not rec.connected:
        return f"host {rec.hostname} is not connected"
    if not rec.schedulable:
        return f"host {rec.hostname} takes no new runs (cordoned)"
    if rec.state is not HostState.UP:
        return f"host {rec.hostname} is {rec.state.value} (maintenance)"
    return ""
