"""Launching placed tasks: resource manager placements -> LAUNCHED runtimes -> hosts.

Peloton's placement processor.  A placement is acted on only if the task
still wants that run (same run id, goal not a kill, not already past
launch): a task killed or restarted while it was being placed is skipped,
and the run the resource manager placed is forgotten there.  Runtimes are
written LAUNCHED *before* the host is asked to start them, so after a
crash the launch-timeout rule finds them; a host that refuses the launch
turns the run FAILED (a system failure, retried), and a launch that did not get
to its host (an agent killed -9 is offered until its heartbeats time out) turns
it LOST before it started: replaced without counting, as Peloton re-enqueues a
launch that failed (placement.go processSkippedLaunches), or an agent's death
would spend a task's tries within seconds.  A LAUNCHED write that kept
losing its compare-and-set (task_writes.py) is not launched: its placement is
held and tried again next round (the change is derived again from the runtime
stored then), and so is every placement of a round that raised (the store
unavailable); a FAILED write that did is handed to the task engine, whose
launch timeout replaces the run.  Every launch sets that timeout's timer (a
launch lost in flight, to a host manager killed or by this process paused, is
otherwise never looked at again), and the placement of a run that has already
ended is given back to the resource manager: its allocation would otherwise be
held for ever, the run placed, timed out and placed again.

With all-active job managers (ownership.py) it asks only for the placements of
its own partitions' jobs, so a placement of a job it does not cache is truly
stale (the job is gone) and is killed in the resource manager; one of a
partition that moved away since it was asked for is left to the new owner.

Back-pressure: every launched run comes back as two or three status events, and
applying them is most of the job manager's work.  While the status stream is
behind (events wait beyond its last poll), launching more only lengthens the
queue, until the host manager's buffer is full and refuses updates, which the
hosts then re-send only after their resend interval.  So a round waits while
the status events are behind, and the hosts' runs finish at the pace the job
manager records them.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Mapping

import gevent
import gevent.lock

from peloton.common.clock import Clock
from peloton.common.loop import Loop
from peloton.core.model.evolve import constructor
from peloton.core.model.ids import RunId, TaskId, run_id_text
from peloton.core.model.sched import LaunchFailure, LaunchSpec, PlacedTask, Placement
from peloton.core.model.task import TaskRuntime, TaskSpec
from peloton.core.ports import HostManagerPort, ResourceManagerPort
from peloton.core.states import TaskState
from peloton.jobmgr import runs
from peloton.jobmgr.aggregate import CachedJob, TaskChange
from peloton.jobmgr.cache import JobCache
from peloton.jobmgr.config import JobManagerConfig
from peloton.jobmgr.lifecycle_lock import LifecycleGate
from peloton.jobmgr.ownership import Ownership
from peloton.jobmgr.volumes import VolumeKeeper

log = logging.getLogger(__name__)
S = TaskState
#: How long a round waits when the status events are behind (seconds).
BEHIND_WAIT = 0.005
LAUNCHABLE = frozenset({S.INITIALIZED, S.PENDING, S.READY, S.PLACING, S.PLACED, S.LAUNCHING})
#: Builds a LaunchSpec without the frozen `__init__` (one per launched run).
_new_launch = constructor(LaunchSpec)


def assign_ports(spec: TaskSpec, picked: tuple[int, ...]) -> tuple[tuple[str, int], ...]:
    """Name -> port for a task: static ports as configured, dynamic ones as placement picked."""
    out = []
    dynamic = iter(picked)
    for port in spec.ports:
        if port.dynamic:
            value = next(dynamic, 0)
            out.append((port.name, value))
        else:
            out.append((port.name, port.value))
    return tuple(out)


class PlacementProcessor:
    """Takes placements from the resource manager and launches them."""

    def __init__(self, cache: JobCache, resmgr: ResourceManagerPort, hostmgr: HostManagerPort,
                 clock: Clock, config: JobManagerConfig,
                 gate: LifecycleGate | None = None,
                 events_behind: Callable[[], bool] = lambda: False,
                 volumes: VolumeKeeper | None = None,
                 ownership: Ownership | None = None, fenced_polls: bool = False) -> None:
        self.cache = cache
        #: The resource manager ends this member's poll once a partition it asked for has
        #: moved (a member's stamped calls to a fenced resource manager daemon), so
        #: `quiesce` need not wait for the poll, only for the round's writes and launches.
        self.fenced_polls = fenced_polls
        #: The partitions whose placements this job manager asks for and launches.
        self.ownership = ownership or Ownership()
        #: Which persistent volume a stateful run uses (None: launched without one).
        self.volumes = volumes
        #: AdminService's Launch lock: while it is on, no placement is taken.
        self.gate = gate
        self.events_behind = events_behind
        self.resmgr = resmgr
        self.hostmgr = hostmgr
        self.clock = clock
        self.config = config
        #: Placements whose LAUNCHED write was not stored: tried again next round.
        self._held: list[tuple[Placement, PlacedTask]] = []
        #: Held while a round runs (see `quiesce`); rounds started, and the last one
        #: `quiesce` gave up waiting for.
        self._round = gevent.lock.BoundedSemaphore(1)
        self._rounds = 0
        self._given_up = -1
        self._loop = Loop("placement-processor",
                          lambda: self.launch_once(self.config.poll_timeout), log=log)

    def start(self) -> None:
        """Begin launching in a greenlet."""
        self._loop.start()

    def stop(self) -> None:
        """Stop launching."""
        self._loop.stop()

    def launch_once(self, timeout: float = 0.0) -> int:
        """One round: take placements, write LAUNCHED, hand runs to hosts; returns runs launched."""
        if not self.fenced_polls:
            with self._round:
                self._rounds += 1
                return self._launch_round(self._take(timeout))
        # The resource manager ends a poll whose partitions moved (term_fence.py
        # `still_current`), so the poll need not be inside the round `quiesce` waits for:
        # a leaving member waits only for a round that is writing or launching.
        taken = self._take(timeout)
        with self._round:
            self._rounds += 1
            return self._launch_round(taken)

    def quiesce(self, timeout: float) -> bool:
        """Wait (up to `timeout` s) until no round is in flight; False if one still is.

        A partition being released waits for this: a round that asked the resource manager
        for the partition's placements before the release could otherwise take, from its
        long poll, a placement its new owner's recovery queued meanwhile, and drop it (it is
        no longer this member's to launch) for the resource manager's launch timeout.
        With `fenced_polls` the resource manager ends such a poll itself, so only a round
        past its poll (writing LAUNCHED, launching) is waited for: its launch must reach
        the host before the new owner reconciles the run, or the run would be replaced
        while it starts.
        A round already waited for in vain is not waited for again (releasing every
        partition one by one must not wait for a stuck round once per partition)."""
        if self._round.locked() and self._given_up == self._rounds:
            return False
        if not self._round.acquire(timeout=timeout):
            self._given_up = self._rounds
            return False
        self._round.release()
        return True

    def _take(self, timeout: float) -> list[Placement] | None:
        """The round's placements from the resource manager (None: no round now)."""
        if self.gate is not None and self.gate.launch_locked:
            gevent.sleep(timeout)  # what waiting for placements would have taken
            return None
        if self.events_behind():
            if timeout > 0:
                gevent.sleep(BEHIND_WAIT)  # let the status events catch up first
            return None
        return self.resmgr.get_placements(self.config.launch_batch, timeout,
                                          self.ownership.asked())

    def _launch_round(self, placements: list[Placement] | None) -> int:
        if placements is None:
            return 0
        owns = self.ownership.owns
        held, self._held = self._held, []
        if not placements and not held:
            return 0
        # Placements of a job still being recovered (recovery.py) taken before its
        # recovery gave its queued runs back (killed in the resource manager and queued
        # again) are void, and a kill of their task would take the run queued again
        # (JobCache.placement_is_void).
        void = {t.task_id.job_id for p in placements for t in p.tasks
                if self.cache.placement_is_void(t.task_id.job_id)}
        # job -> instance -> (placement, placed task)
        by_job: dict[str, dict[int, tuple[Placement, PlacedTask]]] = defaultdict(dict)
        stale: list[TaskId] = []
        taken = held + [(p, t) for p in placements for t in p.tasks]
        for placement, placed in taken:
            if placed.task_id.job_id in void:
                continue
            if not owns(placed.task_id.job_id):
                # Its partition moved away since it was asked for (or held): the new owner's
                # recovery queues the run afresh, and a kill from here could take that new
                # queued run with it.  Leave it to the owner.
                continue
            if self.cache.get(placed.task_id.job_id) is None:
                stale.append(placed.task_id)
                continue
            by_job[placed.task_id.job_id][placed.task_id.instance] = (placement, placed)
        per_host: dict[str, list[LaunchSpec]] = defaultdict(list)
        try:
            self._write_all(by_job, stale, per_host)
        except Exception:
            # The resource manager handed these over once and will not again: a round that
            # failed (the store was unavailable) holds them all, or their tasks stay PENDING
            # with no launch timer.  Those already written LAUNCHED are skipped next round.
            self._held = taken
            raise
        if stale:
            self.resmgr.kill_tasks(stale)
        # One call for the round's hosts, not one per host: each gRPC call costs ~0.5 ms of
        # CPU on both ends whatever it carries, and per-host calls in sequence made launch
        # rounds slow, so every daemon downstream worked in small batches.
        failed = self.hostmgr.launch_hosts(per_host) if per_host else {}
        count = 0
        for hostname, specs in per_host.items():
            failures = failed.get(hostname, [])
            count += len(specs) - len(failures)
            if failures:
                self._launch_failed(hostname, failures)
        return count

    def _write_all(self, by_job: Mapping[str, dict[int, tuple[Placement, PlacedTask]]],
                   stale: list[TaskId], per_host: dict[str, list[LaunchSpec]]) -> None:
        """Write LAUNCHED for every placement and collect the launch specs per host."""
        for job_id, items in by_job.items():
            job = self.cache.get(job_id)
            if job is None:
                continue
            launched = self._write_launched(job, items, stale)
            queue = self.cache.deps.queue
            pool = job.spec.respool_id
            for inst, rt in launched.items():
                # The launch timeout's timer (Peloton's sendLaunchInfoToResMgr): a launch
                # lost in flight (a host manager killed, this process paused) is otherwise
                # never looked at again, and holds its task and its allocation for ever.
                queue.enqueue_task(job_id, inst, self.config.launch_timeout)
                placement, _ = items[inst]
                spec = job.task_spec(inst, rt.config_version)
                volume, created = "", False
                if spec.volume is not None and self.volumes is not None:
                    volume, created = self.volumes.for_launch(job_id, inst, rt.run_id,
                                                              placement.hostname, spec)
                per_host[placement.hostname].append(
                    _new_launch(run_id_text(job_id, inst, rt.run_id), spec, rt.ports,
                                pool, volume, created))

    def _write_launched(self, job: CachedJob, items: dict[int, tuple[Placement, PlacedTask]],
                        stale: list[TaskId]) -> Mapping[int, TaskRuntime]:
        now = self.clock.wall()
        changes = {}
        ended: list[TaskId] = []
        for inst, (placement, placed) in items.items():
            rt = job.get_task(inst)
            if rt is None or rt.goal_state in (S.KILLED, S.DELETED, S.PREEMPTING):
                stale.append(placed.task_id)
                continue
            if rt.run_id == placed.run_id and rt.state.terminal:
                # The run ended (lost, failed, killed) while the resource manager still held
                # it (it had dropped a LOST for a run it had queued again): it would hold
                # its allocation for ever, placed and timed out in turn.  Give it back.
                ended.append(placed.task_id)
                continue
            if rt.run_id != placed.run_id or rt.state not in LAUNCHABLE:
                # A newer run replaced this one in the resource manager (or this is a
                # repeated placement of a run already launched, which the launch timeout
                # looks after): nothing to launch, and nothing of the newer run to kill.
                continue
            ports = assign_ports(job.task_spec(inst, rt.config_version), placed.ports)
            changes[inst] = _launch(placed.run_id, placement, ports, now)
        outcome = job.write_tasks(changes)
        self._held.extend(items[inst] for inst in sorted(outcome.unwritten))
        # Read again after the write (it may have let another greenlet start a new run, whose
        # queued task a kill by task id would take with it).
        stale.extend(t for t in ended if (cur := job.get_task(t.instance)) is not None
                     and cur.run_id == items[t.instance][1].run_id and cur.state.terminal)
        return outcome.written

    def _launch_failed(self, hostname: str, failures: list[LaunchFailure]) -> None:
        # The resource manager holds each run's allocation: give it back first, while the
        # task is still on the failed run (the end written below lets the task engine
        # queue the next run, which a kill by task id would take with it).  If that
        # raises, the runs stay LAUNCHED and their launch timeout replaces them.
        self.resmgr.kill_tasks([RunId.parse(f.run_id).task for f in failures])
        now = self.clock.wall()
        for failure in failures:
            rid = RunId.parse(failure.run_id)
            job = self.cache.get(rid.job_id)
            if job is None:
                continue
            msg = f"launch on {hostname} failed: {failure.reason}"
            ended = _launch_failed(rid.run, now, msg, unreached=failure.unreached)
            if job.write_task(rid.instance, ended).conflict:
                # Still LAUNCHED: the task engine's launch timeout replaces the run.
                self.cache.deps.queue.enqueue_task(rid.job_id, rid.instance)


def _launch(run: int, placement: Placement, ports: tuple[tuple[str, int], ...],
            now: float) -> TaskChange:
    def change(cur: TaskRuntime) -> TaskRuntime | None:
        if cur.run_id != run or cur.state not in LAUNCHABLE:
            return None
        return runs.launched(cur, placement.hostname, placement.agent_id, ports, now)

    return change


def _launch_failed(run: int, now: float, message: str, *, unreached: bool) -> TaskChange:
    def change(cur: TaskRuntime) -> TaskRuntime | None:
        if cur.run_id != run or cur.state is not S.LAUNCHED:
            return None
        if unreached:
            return runs.unreached_launch(cur, now, message)
        return runs.failed_launch(cur, now, message)

    return change
