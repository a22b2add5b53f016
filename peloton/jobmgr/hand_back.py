"""Handing the runs of loaded jobs back to the resource and host managers (recovery.py).

After a restart, a takeover or a peer's own restart, every run a job manager holds on a host
goes back to the resource manager with its allocation (grouped per job: a template task and
packed columns, `RecoverRuns`), is adopted by the host manager on its host (many hosts a
call) and reconciled where the host manager last heard another state; runs KILLING are
killed again (the job manager that stored KILLING may have stopped before its kill
reached the host; a host ignores a kill of a run it is killing already, and the new kill
keeps what is left of the run's grace); queued runs are returned to the caller to queue
again.  `HandBack` collects and sends all of that, one job
at a time, pipelined when recovery asks (a job's calls while the next job loads).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import gevent

from peloton.core.model.evolve import constructor
from peloton.core.model.ids import TaskId
from peloton.core.model.job import JobSpec, PlacementStrategy
from peloton.core.model.sched import LaunchSpec
from peloton.core.model.task import TaskSpec
from peloton.core.placement.request import PlacementNeeds, TaskRequest
from peloton.core.ports import RecoveredRun
from peloton.core.respool.records import RmTask
from peloton.core.states import HealthState, JobType, TaskState
from peloton.jobmgr.aggregate import CachedJob
from peloton.jobmgr.sched import NeedsCache, rm_task

if TYPE_CHECKING:
    from peloton.jobmgr.recovery import Recovery

S = TaskState
#: Runs per RecoverTasks call: a restart hands back every run, one call per task cost a
#: millisecond each over gRPC (a minute for 50,000 runs).  A job's runs travel grouped
#: (private_recover.py: ~12 bytes a run), so a call of 5,000 is small and holds the
#: resource manager's lock for a few milliseconds.
RECOVER_CHUNK = 5000
#: Runs per adopt call to the host manager (many hosts each; one call per host cost
#: the per-call overhead ten thousand times in a 1,000,000-task restart).
ADOPT_CHUNK = 10_000
#: Runs noted between two yields to the hub while a big job's runs are gathered.
YIELD_EVERY = 1000
#: Runs on hosts: handed back with their allocation and adopted.
HELD = frozenset({S.LAUNCHED, S.STARTING, S.RUNNING, S.KILLING, S.PREEMPTING})
#: Runs not on a host yet: queued again.
QUEUED = frozenset({S.INITIALIZED, S.PENDING, S.READY, S.PLACING, S.PLACED, S.LAUNCHING,
                    S.RESERVED})

#: Built by the hundred thousand in a restart: without the frozen `__init__`'s overhead.
_recovered_run = constructor(RecoveredRun)
_launch_spec = constructor(LaunchSpec)
_rm_task = constructor(RmTask)
_task_request = constructor(TaskRequest)


class _SpecNeeds(NeedsCache):
    """`cache`'s placement needs, remembered per task spec object: a job's instances share
    one spec object, so a hand-back builds the needs' key once per spec, not once per run
    (a million times in a big restart).  Lives as long as one hand-back (it keeps the
    specs it has seen alive, so an id is never reused meanwhile)."""

    def __init__(self, cache: NeedsCache) -> None:
        super().__init__()
        self._cache = cache
        self._seen: dict[tuple[int, JobType, PlacementStrategy],
                         tuple[TaskSpec, PlacementNeeds]] = {}

    def needs(self, job_type: JobType, spec: TaskSpec,
              placement: PlacementStrategy = PlacementStrategy.UNSET) -> PlacementNeeds:
        key = (id(spec), job_type, placement)
        seen = self._seen.get(key)
        if seen is None:
            seen = self._seen[key] = (spec, self._cache.needs(job_type, spec, placement))
        return seen[1]


class HandBack:
    """Collects what the other daemons must be told about the runs of cached jobs.

    Runs on hosts are recovered in the resource manager (with their allocation) as they
    are seen, and gathered per host for the host manager (`adopt`, then `reconcile`, so a
    launch lost in a crash comes back LOST and is retried).  Queued runs are returned per
    job for the caller to queue again.

    `pipelined` (the recovery of a slice of jobs): a job's RecoverTasks calls, then its
    adopt and reconcile calls, run in a greenlet of their own while the caller goes on to
    load the next job, so the resource and host managers' work overlaps the job
    manager's; one job's calls at a time, in job order.  `settle` waits for them: before
    a job's queued runs are queued again.  A job whose calls failed is in `unsent` then,
    not raised.
    """

    def __init__(self, recovery: Recovery, *, to_resmgr: bool, pipelined: bool = False) -> None:
        self.recovery = recovery
        self.to_resmgr = to_resmgr
        self.pipelined = pipelined
        self.alive: list[str] = []
        #: The state held for each run of `alive` (None: re-reported whatever it is).
        self.expected: list[TaskState | None] = []
        self.adopted: dict[str, list[LaunchSpec]] = {}
        #: Runs KILLING, by what is left of their grace (whole seconds): killed again.
        self.killing: dict[float, list[str]] = {}
        #: The jobs noted.
        self.jobs: list[str] = []
        #: The greenlet of the RecoverTasks calls under way (pipelined).
        self._sending: gevent.Greenlet | None = None
        #: Jobs whose RecoverTasks calls failed (pipelined), with the error.
        self.unsent: dict[str, Exception] = {}
        self._needs = _SpecNeeds(recovery.control.needs)

    def job(self, job: CachedJob) -> list[int]:
        """Note one job's runs; returns its queued instances."""
        needs, job_id = self._needs, job.job_id
        queued: list[int] = []
        held: list[RecoveredRun] = []
        alive: list[str] = []
        expected: list[TaskState | None] = []
        adopted: dict[str, list[LaunchSpec]] = {}
        killing: dict[float, list[str]] = {}
        now = self.recovery.control.clock.wall()
        self.jobs.append(job_id)
        # One RmTask per (config version, task spec, desired host) built by rm_task; the
        # others copy it with their own task id and run, so a job's runs share its needs
        # and labels objects (what the RecoverTasks encoding groups by).
        templates: dict[tuple[int, int, str], tuple[JobSpec, TaskSpec, RmTask]] = {}
        # Per config version: its spec, per-instance specs and default task spec (looked up
        # once a version, not once a run).
        versions: dict[int, tuple[JobSpec, Mapping[int, TaskSpec], TaskSpec]] = {}
        specs, to_resmgr, disabled = job.specs, self.to_resmgr, HealthState.DISABLED
        for n, (inst, rt) in enumerate(list(job.tasks()), 1):
            if n % YIELD_EVERY == 0:
                # A big job's runs are many: let the hub serve meanwhile (the background
                # recovery's also steps aside for a caller's load).
                if self.pipelined:
                    self.recovery.give_way()
                else:
                    gevent.sleep(0)
            state = rt.state
            if state in HELD:
                version = versions.get(rt.config_version)
                if version is None:
                    spec = specs.get(rt.config_version) or job.spec
                    version = versions[rt.config_version] = (spec, spec.instance_tasks,
                                                             spec.default_task)
                spec, overrides, default = version
                task_spec = overrides.get(inst, default) if overrides else default
                run, host = rt.run_id, rt.host
                if to_resmgr:
                    key = (id(spec), id(task_spec), rt.desired_host)
                    seen = templates.get(key)
                    if seen is None:
                        seen = templates[key] = (spec, task_spec,
                                                 rm_task(job_id, spec, inst, rt, needs))
                    tmpl = seen[2]
                    req = tmpl.request
                    held.append(_recovered_run(spec.respool_id, _rm_task(
                        _task_request(TaskId(job_id, inst), req.needs, req.labels,
                                      req.desired_host, req.desired_host_only),
                        run, tmpl.priority, tmpl.preemptible, tmpl.controller),
                        state, host))
                run_id = f"{job_id}-{inst}-{run}"  # str(RunId(...)), a million times
                alive.append(run_id)
                # The host manager re-reports a run only if it last heard another state
                # (always one with a health check: it does not keep the last health).
                expected.append(state if rt.healthy is disabled else None)
                if state is S.KILLING:
                    left = task_spec.kill_grace_period_secs - (now - rt.update_time)
                    killing.setdefault(float(max(0, round(left))), []).append(run_id)
                if host:
                    launches = adopted.get(host)
                    if launches is None:
                        launches = adopted[host] = []
                    launches.append(_launch_spec(run_id, task_spec, rt.ports, spec.respool_id))
            elif state in QUEUED:
                queued.append(inst)
        # The job's held runs are back in the resource manager before its queued ones (or
        # any later job's) are queued again, so admission never counts their room as free
        # (pipelined: the caller settles first), and before the host manager re-reports them.
        if not self.pipelined:
            self._send(held)
            self.alive.extend(alive)
            self.expected.extend(expected)
            for host, launches in adopted.items():
                self.adopted.setdefault(host, []).extend(launches)
            for grace, runs in killing.items():
                self.killing.setdefault(grace, []).extend(runs)
            return queued
        self.settle()  # the previous job's calls first
        if held or alive:
            self._sending = gevent.spawn(self._send_noting, job_id, held, adopted, alive,
                                         expected, killing)
        return queued

    def _send(self, held: list[RecoveredRun]) -> None:
        resmgr = self.recovery.resmgr
        for start in range(0, len(held), RECOVER_CHUNK):
            resmgr.recover_tasks(held[start:start + RECOVER_CHUNK])

    def _send_noting(self, job_id: str, held: list[RecoveredRun],
                     adopted: dict[str, list[LaunchSpec]], alive: list[str],
                     expected: list[TaskState | None],
                     killing: dict[float, list[str]]) -> None:
        """One job's hand-back, pipelined: the resource manager, then the host manager."""
        try:
            self._send(held)
            self._tell_hosts(adopted, alive, expected, killing)
        except Exception as exc:  # the caller learns of it in `settle`
            self.unsent[job_id] = exc

    def settle(self) -> None:
        """Wait for the calls under way (pipelined; a failure goes to `unsent`)."""
        if self._sending is not None:
            self._sending.join()
            self._sending = None

    def to_hosts(self) -> None:
        """Tell the host manager where the runs noted are, and have it re-report them (once
        the resource manager has every held run back).  Pipelined, each job's runs were
        told with its RecoverTasks calls already; this waits for the last job's."""
        self.settle()
        self._tell_hosts(self.adopted, self.alive, self.expected, self.killing)

    def _tell_hosts(self, adopted: dict[str, list[LaunchSpec]], alive: list[str],
                    expected: list[TaskState | None],
                    killing: dict[float, list[str]]) -> None:
        """Adopt the runs on their hosts, many hosts a call, then reconcile them: those the
        host manager last heard in another state than the one held here (or not at all)
        are re-reported, so a launch lost in a crash comes back LOST and is retried; then
        kill the KILLING runs again (adopted first, so the host manager knows their
        hosts)."""
        hostmgr = self.recovery.hostmgr
        chunk: dict[str, list[LaunchSpec]] = {}
        runs = 0
        for host, specs in adopted.items():
            chunk[host] = specs
            runs += len(specs)
            if runs >= ADOPT_CHUNK:
                hostmgr.adopt_hosts(chunk)
                chunk, runs = {}, 0
        if chunk:
            hostmgr.adopt_hosts(chunk)
        if alive:
            hostmgr.reconcile(alive, expected)
        for grace, killed in killing.items():
            hostmgr.kill(killed, grace)
