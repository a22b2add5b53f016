"""Host maintenance: the goal-state table of a host and the actions that move it.

`start_maintenance` sets a host's goal to DOWN and drains it at once (UP -> DRAINING,
persisted): it is no longer offered, its reservations are freed, and its runs are listed
by `draining_runs()` for the job manager to move.  When its last run has ended the engine
marks it DRAINED, then DOWN.  `complete_maintenance` brings a DOWN host back UP (Peloton's
rule); `end_maintenance` brings a host back UP from any state (Aurora's).

The record also says how the host is drained (a `DrainRequest`, `drain_requests()`):
Peloton's StartMaintenance drains within each job's maximum unavailable instances and
waits as long as that takes; an SLA-aware or forced drain (Aurora's slaDrainHosts and
drainHosts) carries its policy and timeout.  The job manager applies the rules
(peloton.core.sla) when it moves runs: the host manager only waits for the host to be
empty, so a host never goes DOWN while a job's SLA still holds a run on it.  A new request
for a host under maintenance replaces the old one and restarts its timeout (Aurora keeps
one request per host); completing maintenance forgets it.

The tables (peloton.core.lifecycle.host_maintenance): `HOST_RULES` decides what the engine
does for a host's (goal, state); `REQUESTS` what each API request writes from each state.
`end_maintenance` (Aurora's endMaintenance) brings a host UP from any state, a drain in
progress included: the host manager stops listing its runs for the job manager to move, so
runs not moved yet keep running, and the host is offered again.

Every state is written to storage before it is applied in memory, so a restart resumes
from the stored record (`load` re-enqueues every host whose state is not its goal).
After a restart a DRAINING host is not declared empty until `recovery_grace` has passed,
so the runs the backend re-reports are known first.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace

from peloton.common.clock import Clock
from peloton.common.goalstate import Action, Engine, Schedule
from peloton.common.retry import RetryPolicy
from peloton.core.errors import FailedPrecondition, NotFound
from peloton.core.lifecycle.host_maintenance import (
    ACTION_STATES,
    REQUEST_GOALS,
    REQUESTS,
    HostAction,
    MaintenanceRequest,
    host_action,
)
from peloton.core.model.host import HostInfo
from peloton.core.model.sla_policy import DrainRequest
from peloton.core.sla import check_drain_request
from peloton.core.states import HostState
from peloton.hostmgr.leases import LeaseBook
from peloton.hostmgr.registry import HostRegistry
from peloton.storage.cluster_store import HostStore

log = logging.getLogger(__name__)
S = HostState

#: Store failures are retried from 1 s, doubling to a minute (a host waits, nothing is lost).
BACKOFF = RetryPolicy(initial_delay=1.0, max_delay=60.0, multiplier=2.0, jitter=0.1)


class Maintenance:
    """Drives hosts to their maintenance goal; see the module docstring."""

    def __init__(self, registry: HostRegistry, leases: LeaseBook, store: HostStore,
                 lock: threading.Lock, clock: Clock,
                 recovery_grace: float = 0.0,
                 on_state: Callable[[str, HostState], None] | None = None) -> None:
        self._registry = registry
        #: Told every host state written (after it is stored): a backend that marks its
        #: machines for maintenance (a Kubernetes cordon) follows the states from here.
        self._on_state = on_state
        self._leases = leases
        self._store = store
        self._lock = lock
        self._clock = clock
        self._grace = recovery_grace
        self._ready_at = 0.0
        # Serialises read-modify-write of maintenance records (API calls vs the engine).
        self._write_lock = threading.Lock()
        self.schedule: Schedule[str] = Schedule(name="hostmgr-maintenance", clock=clock,
                                                backoff=BACKOFF)
        self.engine = Engine(self.schedule, self.actions_for)

    # -- recovery and lifecycle ------------------------------------------------------------
    def load(self) -> None:
        """Adopt the stored records and queue every host not at its goal."""
        infos = self._store.get_hosts()
        self._ready_at = self._clock.monotonic() + self._grace
        with self._lock:
            for info in infos:
                self._registry.set_info(info)
        for info in infos:
            if info.state is not info.goal_state:
                self.enqueue(info.hostname)

    def enqueue(self, hostname: str, when: float | None = None) -> None:
        """Have the engine look at a host (now, or at `when` on the manager's clock)."""
        self.schedule.enqueue(hostname, when)

    def settle(self, rounds: int = 100) -> None:
        """Run due evaluations in the caller until none is due (tests, and stop-free tools)."""
        for _ in range(rounds):
            if not self.engine.run_due():
                return

    # -- API -----------------------------------------------------------------------------
    def start_maintenance(self, hostname: str, drain: DrainRequest | None = None) -> HostInfo:
        """Goal DOWN: drain now (UP -> DRAINING), then DRAINED and DOWN once empty.

        Without `drain` (Peloton's StartMaintenance) the host is drained within each job's
        maximum unavailable instances, and a host already under maintenance is left as it
        is.  With one, that request replaces the host's current one, timed from now.
        InvalidArgument (nothing stored) for a bad request."""
        if drain is not None:
            check_drain_request(drain)
        start = MaintenanceRequest.START
        with self._write_lock:
            info = self._current(hostname)
            if drain is None and info.goal_state is REQUEST_GOALS[start]:
                return info
            request = replace(drain or DrainRequest(), started_at=self._clock.wall())
            state = REQUESTS[start][info.state]
            assert state is not None  # START is accepted from every state
            info = self._write(replace(info, goal_state=REQUEST_GOALS[start], state=state,
                                       drain=request))
        log.info("host %s: maintenance started (%s, drain %s)", hostname, info.state.value,
                 request.mode.value)
        self.enqueue(hostname)
        return info

    def complete_maintenance(self, hostname: str) -> HostInfo:
        """Goal UP: a DOWN host is UP again (offered to placement).  Idempotent for an UP
        host; FailedPrecondition for a host still draining (Peloton's rule)."""
        return self._back_up(MaintenanceRequest.COMPLETE, hostname)

    def end_maintenance(self, hostname: str) -> HostInfo:
        """Goal UP from any state (Aurora's endMaintenance): a drain in progress stops, the
        runs not moved yet stay, and the host is offered again.  Idempotent."""
        return self._back_up(MaintenanceRequest.END, hostname)

    def _back_up(self, request: MaintenanceRequest, hostname: str) -> HostInfo:
        goal = REQUEST_GOALS[request]
        with self._write_lock:
            info = self._current(hostname)
            state = REQUESTS[request][info.state]
            if state is None:
                raise FailedPrecondition(
                    f"host {hostname} is {info.state.value}, not DOWN: maintenance can be "
                    "completed once the host has drained and is DOWN", field="hostname")
            if (info.state, info.goal_state, info.drain) == (state, goal, None):
                return info
            was = info.state
            info = self._write(replace(info, goal_state=goal, state=state, drain=None))
        log.info("host %s: maintenance %s (%s -> %s)", hostname,
                 "completed" if request is MaintenanceRequest.COMPLETE else "ended",
                 was.value, info.state.value)
        self.schedule.delete(hostname)
        return info

    def drain_requests(self) -> dict[str, DrainRequest]:
        """How each DRAINING host is drained."""
        with self._lock:
            return self._registry.drain_requests()

    def query(self, states: Sequence[HostState] = ()) -> list[HostInfo]:
        """Every known host (or those in `states`), sorted by hostname."""
        wanted = set(states)
        with self._lock:
            names = sorted(set(self._registry.hosts) | set(self._registry.infos))
            infos = [self._registry.info(name) for name in names]
        return [i for i in infos if not wanted or i.state in wanted]

    def _current(self, hostname: str) -> HostInfo:
        with self._lock:
            if not self._registry.known(hostname):
                raise NotFound(f"host {hostname} is not known to the host manager",
                               field="hostname")
            return self._registry.info(hostname)

    def _write(self, info: HostInfo) -> HostInfo:
        """Persist, then apply in memory (a failed write changes nothing)."""
        self._store.put_host(info)
        with self._lock:
            self._registry.set_info(info)
            if info.state is not S.UP:
                self._leases.drop_host(info.hostname)
        if self._on_state is not None:
            self._on_state(info.hostname, info.state)
        return info

    # -- the table -------------------------------------------------------------------------
    def actions_for(self, hostname: str) -> list[Action]:
        """The engine's view of one host: at most one action from the table."""
        with self._lock:
            info = self._registry.infos.get(hostname)
        if info is None:
            return [Action(HostAction.UNTRACK, lambda: self.schedule.delete(hostname))]
        action = host_action(info.goal_state, info.state)
        return [Action(action.value, lambda: self._run(action, hostname))]

    def _run(self, action: HostAction, hostname: str) -> None:
        if action is HostAction.UNTRACK:
            self.schedule.delete(hostname)
            return
        if action is HostAction.INVALID:
            log.warning("host %s: no maintenance action for its goal and state; untracking",
                        hostname)
            self.schedule.delete(hostname)
            return
        with self._write_lock:
            with self._lock:
                info = self._registry.infos[hostname]
            if host_action(info.goal_state, info.state) is not action:
                return  # changed since the table was read; the next evaluation decides again
            if action is HostAction.DRAINED and not self._empty(hostname):
                return
            nxt = ACTION_STATES[action]
            drain = None if nxt is S.UP else info.drain
            self._write(replace(info, state=nxt, drain=drain))
        log.info("host %s: %s -> %s", hostname, info.state.value, nxt.value)
        self.enqueue(hostname)

    def _empty(self, hostname: str) -> bool:
        """No run is left on the host (and recovery has had time to report them)."""
        with self._lock:
            rec = self._registry.hosts.get(hostname)
            if rec is not None and rec.runs:
                return False  # the intake enqueues the host again when its last run ends
        if self._clock.monotonic() < self._ready_at:
            self.enqueue(hostname, self._ready_at)
            return False
        return True
