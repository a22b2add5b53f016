"""A simulated HostBackend: thousands of virtual hosts whose tasks run on a clock.

Each launched run goes STARTING at once, RUNNING after `start_secs`, and
ends after its duration: SUCCEEDED, or FAILED with an exit code (with
`failure_probability`, drawn from a seeded RNG, or as `behaviour` says).
Time comes from a SimClock: ManualClock in tests (advance it), RealClock
for benchmarks and what-if runs.  Nothing is really executed; the backend
does not check capacity (the host manager's bookkeeping does that).

It honours the same contract as real backends: updates are re-delivered
every `resend_secs` until acknowledged, kill is idempotent, reconcile of
an unknown run reports LOST.  Listener callbacks all come from the clock's
thread, never from inside launch() or kill(), and never under the
backend's lock (a listener may call back in).
"""

from __future__ import annotations

import itertools
import random
import threading
import uuid
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

from peloton.core.errors import NotFound
from peloton.core.model.constraints import Label
from peloton.core.model.evolve import constructor
from peloton.core.model.resources import PortRange, Resources
from peloton.core.model.sched import LaunchSpec
from peloton.core.states import TaskState
from peloton.hostmgr.backends.base import BackendHost, HostEventListener, StatusUpdate
from peloton.hostmgr.backends.sim_clock import ManualClock, SimClock

#: StatusUpdate built without the frozen `__init__`'s machinery (core/model/evolve.py): every
#: simulated run makes two or three.
_new_update = constructor(StatusUpdate)


@dataclass(frozen=True, slots=True)
class SimOutcome:
    """How one simulated run behaves: how long it runs and how it exits."""

    duration_secs: float
    exit_code: int = 0


#: Decides a run's outcome (given the launch and the backend's RNG).
Behaviour = Callable[[LaunchSpec, random.Random], SimOutcome]


@dataclass(slots=True)
class _Run:
    hostname: str
    agent_id: str
    state: TaskState
    ends_at: float


def _host_up(listener: HostEventListener, host: BackendHost) -> None:
    listener.host_up(host)


def _host_gone(listener: HostEventListener, hostname: str, reason: str) -> None:
    listener.host_gone(hostname, reason)


class SimBackend:
    """Virtual hosts `<prefix>00000`..; see the module docstring."""

    name = "sim"

    def __init__(self, *, hosts: int = 100, capacity: Resources = Resources(cpu=1.0, mem_mb=4096.0,
                 disk_mb=16384.0), ports: tuple[PortRange, ...] = (PortRange(31000, 31999),),
                 labels: Callable[[int], tuple[Label, ...]] | None = None, task_secs: float = 1.0,
                 start_secs: float = 0.0, failure_probability: float = 0.0, seed: int = 0,
                 behaviour: Behaviour | None = None, clock: SimClock | None = None,
                 resend_secs: float = 30.0, prefix: str = "sim-",
                 revocable_cpu: float = 0.0) -> None:
        self.clock: SimClock = clock or ManualClock()
        self._rng = random.Random(seed)
        self.task_secs, self.start_secs = task_secs, start_secs
        self.failure_probability = failure_probability
        self.behaviour = behaviour or self._default_behaviour
        self.resend_secs = resend_secs
        self._hosts = {h.hostname: h for h in (
            BackendHost(f"{prefix}{i:05d}", f"{prefix}agent-{i:05d}", capacity, ports,
                        labels(i) if labels else (), revocable_cpu=revocable_cpu)
            for i in range(hosts))}
        self._runs: dict[str, _Run] = {}
        self._pending: dict[str, StatusUpdate] = {}
        self._listener: HostEventListener | None = None
        self._epoch = 0  # bumped by stop(): callbacks of an earlier start are ignored
        self._lock = threading.RLock()
        self.launched = 0
        # Update ids: unique per backend object (a fresh random prefix) and cheap to make,
        # since every simulated state change needs one (uuid4 per update cost more than the
        # rest of the update's path through the backend).
        self._ids = itertools.count(1)
        self._id_prefix = uuid.uuid4().hex[:16]
        #: Updates emitted and not yet handed to the listener, delivered in one call per
        #: clock callback (with the epoch they were emitted in).
        self._outbox: list[tuple[int, StatusUpdate]] = []

    def _default_behaviour(self, task: LaunchSpec, rng: random.Random) -> SimOutcome:
        failed = self.failure_probability > 0 and rng.random() < self.failure_probability
        return SimOutcome(self.task_secs, 1 if failed else 0)

    # -- lifecycle -------------------------------------------------------
    def start(self, listener: HostEventListener) -> None:
        """Announce every host, re-deliver what is unacknowledged, start the resend timer.

        Everything reaches the listener from the clock's thread.
        """
        with self._lock:
            self._listener = listener
            self._epoch += 1
            epoch = self._epoch
            hosts = list(self._hosts.values())
            pending = list(self._pending.values())
        for host in hosts:
            self._notify(epoch, partial(_host_up, host=host))
        for update in pending:
            self.clock.call_at(self.clock.now(), partial(self._deliver, epoch, update))
        self._schedule_resend(epoch)

    def stop(self) -> None:
        """Stop reporting; simulated runs keep their state for a later start."""
        with self._lock:
            self._listener = None
            self._epoch += 1

    def _notify(self, epoch: int, call: Callable[[HostEventListener], None]) -> None:
        """Call the listener from the clock's thread, unless stopped or restarted meanwhile."""
        def fire() -> None:
            listener = self._listener
            if epoch == self._epoch and listener is not None:
                call(listener)
        self.clock.call_at(self.clock.now(), fire)

    # -- hosts (for what-if runs and daemon-job tests) ---------------------
    def add_host(self, host: BackendHost) -> None:
        """A new virtual host joins."""
        with self._lock:
            self._hosts[host.hostname] = host
        self._notify(self._epoch, partial(_host_up, host=host))

    def remove_host(self, hostname: str) -> None:
        """A virtual host leaves; its active runs end LOST."""
        with self._lock:
            self._hosts.pop(hostname, None)
            for run_id, run in list(self._runs.items()):
                if run.hostname == hostname and not run.state.terminal:
                    # As a Mesos agent's runs are reported when the agent is removed.
                    self._transition(run_id, TaskState.LOST, "host removed",
                                     reason="REASON_AGENT_REMOVED")
        self._notify(self._epoch, partial(_host_gone, hostname=hostname, reason="removed"))

    # -- HostBackend -------------------------------------------------------
    def launch(self, hostname: str, tasks: Sequence[LaunchSpec]) -> None:
        """Start simulated runs; a run id already known is not started twice."""
        with self._lock:
            self._launch(hostname, tasks)

    def _launch(self, hostname: str, tasks: Sequence[LaunchSpec]) -> None:
        host = self._hosts.get(hostname)
        if host is None:
            raise NotFound(f"no simulated host {hostname!r}")
        now = self.clock.now()
        # Runs launched together that change state at the same moment share one timer: a
        # wave of thousands of launches costs a few heap entries, not three per run.
        ends: defaultdict[tuple[float, int], list[str]] = defaultdict(list)
        started: list[str] = []
        for task in tasks:
            if task.run_id in self._runs:
                continue
            out = self.behaviour(task, self._rng)
            end = now + self.start_secs + max(0.0, out.duration_secs)
            self._runs[task.run_id] = _Run(hostname, host.agent_id, TaskState.LAUNCHED, end)
            self.launched += 1
            self._transition(task.run_id, TaskState.STARTING, "launched")
            started.append(task.run_id)
            ends[(end, out.exit_code)].append(task.run_id)
        if started:
            self.clock.call_at(now + self.start_secs, partial(
                self._transition_many, started, TaskState.RUNNING, "running", None))
        for (end, code), run_ids in ends.items():
            final = TaskState.SUCCEEDED if code == 0 else TaskState.FAILED
            self.clock.call_at(end, partial(self._transition_many, run_ids, final,
                                            f"exited with code {code}", code))

    def kill(self, hostname: str, run_ids: Sequence[str], grace_secs: float) -> None:
        """Active runs end KILLED (at once; the grace is not simulated); others are ignored."""
        with self._lock:
            if hostname not in self._hosts:
                raise NotFound(f"no simulated host {hostname!r}")
            for run_id in run_ids:
                run = self._runs.get(run_id)
                if run is not None and run.hostname == hostname and not run.state.terminal:
                    self._transition(run_id, TaskState.KILLED, "killed on request")

    def acknowledge(self, updates: Sequence[StatusUpdate]) -> None:
        """Stop re-delivering these; a run whose terminal update is acked is forgotten."""
        with self._lock:
            for update in updates:
                if self._pending.pop(update.uuid, None) is not None and update.state.terminal:
                    run = self._runs.get(update.run_id)
                    if run is not None and run.state.terminal:
                        del self._runs[update.run_id]

    def reconcile(self, run_ids: Sequence[str] | None = None) -> None:
        """Re-report runs (all known when None); unknown ones are reported LOST."""
        with self._lock:
            for run_id in (list(run_ids) if run_ids is not None else list(self._runs)):
                run = self._runs.get(run_id)
                if run is None:
                    self._emit(StatusUpdate(self._new_id(), run_id, TaskState.LOST, "", "",
                                            self.clock.now(), "unknown to every simulated host",
                                            "REASON_RECONCILIATION"))
                elif run.state is not TaskState.LAUNCHED:
                    self._emit(StatusUpdate(self._new_id(), run_id, run.state, run.hostname,
                                            run.agent_id, self.clock.now(), "reconciled"))

    def list_sandbox(self, hostname: str, run_id: str, path: str = "") -> list[tuple[str, int]]:
        """A simulated sandbox (any run id on a known host): stdout and an empty stderr."""
        return [("stderr", 0), ("stdout", len(self._stdout(hostname, run_id)))]

    def read_sandbox(self, hostname: str, run_id: str, path: str, offset: int = 0,
                     length: int = 1 << 20) -> bytes:
        """Simulated output."""
        data = self._stdout(hostname, run_id) if path.lstrip("/") == "stdout" else b""
        return data[offset:offset + length]

    def _stdout(self, hostname: str, run_id: str) -> bytes:
        # Finished runs are forgotten once acknowledged, so any run id on a known host has one.
        if hostname not in self._hosts:
            raise NotFound(f"no simulated host {hostname!r}")
        return f"simulated run {run_id} on {hostname}\n".encode()

    # -- events --------------------------------------------------------------------------
    def _new_id(self) -> str:
        return f"{self._id_prefix}-{next(self._ids)}"

    def _transition_many(self, run_ids: Sequence[str], state: TaskState, message: str,
                         exit_code: int | None) -> None:
        with self._lock:
            for run_id in run_ids:
                self._transition(run_id, state, message, exit_code)

    def _transition(self, run_id: str, state: TaskState, message: str,
                    exit_code: int | None = None, reason: str = "") -> None:
        # Every caller holds `_lock` (a wave of thousands of runs takes it once, not once
        # per run: the re-entry cost about 1 % of the CPU of the 100,000-task scale benchmark).
        run = self._runs.get(run_id)
        if run is None or run.state.terminal or (state is TaskState.RUNNING
                                                 and run.state is not TaskState.STARTING):
            return  # killed or lost meanwhile: later timers of the run are moot
        run.state = state
        self._emit(_new_update(self._new_id(), run_id, state, run.hostname, run.agent_id,
                               self.clock.now(), message, reason, exit_code=exit_code))

    def _emit(self, update: StatusUpdate) -> None:
        """Queue an update for the listener; the first one queued schedules the delivery of
        everything queued until the clock runs it (under the lock)."""
        self._pending[update.uuid] = update
        if not self._outbox:
            self.clock.call_at(self.clock.now(), self._deliver_outbox)
        self._outbox.append((self._epoch, update))

    def _deliver_outbox(self) -> None:
        with self._lock:
            batch, self._outbox = self._outbox, []
            listener = self._listener
            epoch = self._epoch
            # Stopped or restarted since: start() re-delivers whatever is still pending.
            wanted = [u for e, u in batch if e == epoch and u.uuid in self._pending]
        if wanted and listener is not None:
            listener.status_updates(wanted)

    def _deliver(self, epoch: int, update: StatusUpdate) -> None:
        with self._lock:
            listener = self._listener
            wanted = epoch == self._epoch and update.uuid in self._pending
        if wanted and listener is not None:
            listener.status_update(update)

    def _schedule_resend(self, epoch: int) -> None:
        def sweep() -> None:
            if epoch != self._epoch:
                return
            cutoff = self.clock.now() - self.resend_secs
            with self._lock:
                due = [u for u in self._pending.values() if u.timestamp <= cutoff]
            for update in due:
                self._deliver(epoch, update)
            self._schedule_resend(epoch)
        self.clock.call_at(self.clock.now() + self.resend_secs, sweep)
