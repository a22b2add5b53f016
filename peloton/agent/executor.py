"""The agent's runs: launching them through supervisors, killing them, and
turning supervisor records into status updates.

Every run the agent has not forgotten is in the table.  A run is forgotten
once its terminal update was acknowledged; it is then listed in the work
dir's acked.log, so an agent restarted later does not report it again.
Records arrive from the notification pipe and from sandbox scans (see
watch.py); both go through `on_record`, which ignores anything that would
move a run backwards, so duplicates and races are harmless.

A run with a dynamic uid holds that uid's machine-wide claim (uidpool.py,
uidlocks.py) from its launch until its terminal update is published; a run
adopted after a restart takes its claim again.  Likewise a run holds the
remote-volume cache entries it links to (remote_volumes.py) until its
terminal update: only then may the cache evict them.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from peloton.agent import outcome
from peloton.agent.health import HealthChecker
from peloton.agent.identity import IdentityPolicy, describe_identity, supervisor_identity_args
from peloton.agent.isolation import MemoryIsolation, enforced_memory_mb
from peloton.agent.launcher import Spawner, encode_request
from peloton.agent.model import RunSpec, Update, stable_uuid
from peloton.agent.remote_volumes import Fetched, RemoteCache
from peloton.agent.reporter import StatusReporter
from peloton.agent.sandbox import Sandboxes, SupervisorRecord
from peloton.agent.uidpool import UidClaims, Unshared
from peloton.agent.volumes import Volumes
from peloton.core.errors import FailedPrecondition, PelotonError
from peloton.core.model.ids import RunId
from peloton.core.states import HealthState, TaskState

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Run:
    """What the agent knows about one run."""

    spec: RunSpec | None
    state: TaskState
    since: float  # monotonic time of the last state change
    supervisor_pid: int = 0
    pid: int = 0
    killing: bool = False
    last: Update | None = None
    checker: HealthChecker | None = None
    #: Its URIs are being fetched: no sandbox or supervisor yet (the scans leave it alone).
    fetching: bool = False


class Executor:
    """Launch, kill and track runs; publish their updates."""

    def __init__(self, *, sandboxes: Sandboxes, isolation: MemoryIsolation, spawner: Spawner,
                 reporter: StatusReporter, fifo: Path, wall: Callable[[], float] = time.time,
                 enforce_fd_limit: bool = False, orphan_secs: float = 0.0,
                 identities: IdentityPolicy | None = None,
                 uid_claims: UidClaims | None = None,
                 volumes: Volumes | None = None,
                 remote: RemoteCache | None = None) -> None:
        self.sandboxes = sandboxes
        #: Persistent volumes (volumes.py); None: a run asking for one fails to launch.
        self.volumes = volumes
        #: Fetched files and immutable remote volumes (remote_volumes.py); None: a run with
        #: URIs fails to launch.
        self.remote = remote
        #: Machine-wide claims on dynamic uids (app.py wires the lock files; default: an
        #: agent alone on its machine).
        self.uid_claims: UidClaims = uid_claims or Unshared()
        self._next_uid = 0  # where the next dynamic uid is looked for (uidpool.pick_uid)
        # Resolved once: the same run is named alike by every agent lifetime (reclaim).
        self._sandbox_root = str(sandboxes.root.resolve())
        #: A supervisor stops its task after this long with no agent (0: never; supervisor.c).
        self.orphan_secs = orphan_secs
        #: Apply a task's fdLimit as RLIMIT_NOFILE.  Off by default: Peloton on Mesos never
        #: applied it, and job files carry values (e.g. 10) that break the dynamic loader.
        self.enforce_fd_limit = enforce_fd_limit
        self.isolation = isolation
        self.identities = identities or IdentityPolicy()
        self.spawner = spawner
        self.reporter = reporter
        self.fifo = fifo
        self._wall = wall
        self._lock = threading.RLock()
        self.runs: dict[str, Run] = {}

    # -- launching --------------------------------------------------------
    def launch(self, specs: Sequence[RunSpec]) -> list[str]:
        """Start runs; returns the ids this agent already had (not started again).

        A run whose URIs are not all in the cache is fetched first, in the background
        (`_fetch_then_start`): it is STARTING ("fetching ...") meanwhile, and this call does
        not wait for the downloads."""
        duplicates: list[str] = []
        batch: list[tuple[RunSpec, list[Fetched]]] = []
        seen: set[str] = set()  # a run named twice in one call starts once
        with self._lock:
            for spec in specs:
                if spec.run_id in self.runs or spec.run_id in seen:
                    duplicates.append(spec.run_id)
                    continue
                seen.add(spec.run_id)
                if not self._valid(spec):
                    continue
                if self.sandboxes.exists(spec.run_id):  # launched in an earlier lifetime
                    duplicates.append(spec.run_id)
                    continue
                if not (spec.remote or spec.remote_error):
                    batch.append((spec, []))
                    continue
                if self.remote is None:
                    self._fail_launch(spec, "this agent fetches no URIs")
                elif spec.remote_error or self.remote.ready(spec):
                    try:  # nothing to download: the cache has it all, or nothing can be had
                        batch.append((spec, self.remote.prepare(spec)))
                    except PelotonError as exc:
                        self._fail_launch(spec, str(exc))
                else:
                    self._fetch_later(spec)
            self._start(batch)
        return duplicates

    def _fetch_later(self, spec: RunSpec) -> None:
        run = Run(spec, TaskState.STARTING, time.monotonic(), fetching=True)
        self.runs[spec.run_id] = run
        urls = ", ".join(v.url for v in spec.remote)
        self._publish(run, spec.run_id, TaskState.STARTING, f"fetching {urls}", stable=False)
        threading.Thread(target=self._fetch_then_start, args=(spec,), daemon=True,
                         name=f"fetch {spec.run_id}").start()

    def _fetch_then_start(self, spec: RunSpec) -> None:
        """Fetch a run's URIs, then start it, unless it was killed meanwhile."""
        assert self.remote is not None
        fetched: list[Fetched] = []
        error = ""
        try:
            fetched = self.remote.prepare(spec)
        except PelotonError as exc:
            error = str(exc)
        except Exception as exc:  # a fetch must never leave its run STARTING for ever
            log.exception("fetching the URIs of %s", spec.run_id)
            error = f"fetching its URIs failed: {exc}"
        with self._lock:
            run = self.runs.get(spec.run_id)
            if run is None or not run.fetching:  # killed (and reported) while fetching
                self.remote.discard(spec.run_id, fetched)
                return
            run.fetching = False
            if error:
                self._fail_launch(spec, error)
                return
            self._start([(spec, fetched)])

    def _start(self, batch: list[tuple[RunSpec, list[Fetched]]]) -> None:
        """Ask the spawner for the supervisors of runs ready to start (with the lock held)."""
        requests, started = [], []
        in_use = self._uids_in_use()
        for spec, fetched in batch:
            try:
                spec = self._with_identity(spec, in_use)
                self._attach_volume(spec)
                self._attach_remote(spec, fetched)
                requests.append(self._request(spec))
            except PelotonError as exc:
                if self.remote is not None:
                    self.remote.discard(spec.run_id, fetched)
                self._fail_launch(spec, str(exc))
                continue
            self.runs[spec.run_id] = Run(spec, TaskState.STARTING, time.monotonic())
            started.append(spec)
        if requests:
            try:
                self.spawner.spawn(b"".join(requests))
            except OSError as exc:
                for spec in started:
                    self.runs.pop(spec.run_id, None)
                    self._fail_launch(spec, f"cannot start its supervisor: {exc}")
                return
        for spec in started:
            who = f", {describe_identity(spec)}" if spec.uid >= 0 else ""
            self._publish(self.runs[spec.run_id], spec.run_id, TaskState.STARTING,
                          f"launched ({self.isolation.describe(enforced_memory_mb(spec.mem_mb))}"
                          f"{who})")

    def _attach_remote(self, spec: RunSpec, fetched: list[Fetched]) -> None:
        """Link (cached) or move (private) a run's fetched files into its sandbox."""
        if not fetched or self.remote is None:
            return
        try:
            self.remote.attach(fetched, spec, self.sandboxes.path(spec.run_id))
        except OSError as exc:
            raise FailedPrecondition(f"fetched files of {spec.run_id}: {exc}",
                                     field="command.uris") from exc

    def _attach_volume(self, spec: RunSpec) -> None:
        """Create (first run) and link a run's persistent volume into its sandbox."""
        if spec.volume is None:
            return
        if self.volumes is None:
            raise FailedPrecondition("this agent keeps no persistent volumes", field="volume")
        try:
            self.volumes.attach(spec, self.sandboxes.path(spec.run_id))
        except OSError as exc:
            raise FailedPrecondition(f"persistent volume {spec.volume.volume_id}: {exc}",
                                     field="volume") from exc

    def destroy_volumes(self, volume_ids: Sequence[str]) -> list[str]:
        """Remove volumes no live run uses; returns those kept because one does."""
        if self.volumes is None:
            return []
        with self._lock:
            used = {r.spec.volume.volume_id for r in self.runs.values()
                    if r.spec is not None and r.spec.volume is not None and not r.state.terminal}
        kept = [v for v in volume_ids if v in used]
        for volume_id in volume_ids:
            if volume_id not in used:
                self.volumes.destroy(volume_id)
        return kept

    def _valid(self, spec: RunSpec) -> bool:
        try:
            RunId.parse(spec.run_id)
        except PelotonError as exc:
            self._fail_launch(spec, str(exc))
            return False
        return True

    def _fail_launch(self, spec: RunSpec, message: str) -> None:
        run = self.runs.setdefault(spec.run_id, Run(spec, TaskState.STARTING, time.monotonic()))
        self._publish(run, spec.run_id, TaskState.FAILED, message, outcome.REASON_LAUNCH_FAILED)

    def _uids_in_use(self) -> set[int]:
        """The uids of this agent's live runs (a dynamic uid is never shared)."""
        return {r.spec.uid for r in self.runs.values()
                if r.spec is not None and r.spec.uid >= 0 and not r.state.terminal}

    def _with_identity(self, spec: RunSpec, in_use: set[int]) -> RunSpec:
        """The spec with the identity its task runs as (peloton/agent/identity.py); the uid
        it takes joins `in_use` (built once per launch batch, not once per run) and, when
        dynamic, is claimed on the machine for this run."""
        if not self.identities.can_switch:
            self.identities.resolve(spec.command.user, ())  # refuses a user it cannot be
            return spec
        holder = self._holder(spec.run_id)
        who = self.identities.resolve(spec.command.user, in_use,
                                      claim=lambda uid: self.uid_claims.claim(uid, holder),
                                      start=self._next_uid)
        in_use.add(who.uid)
        if who.dynamic:
            self._next_uid = who.uid + 1
        return dataclasses.replace(spec, uid=who.uid, gid=who.gid, groups=who.groups,
                                   run_as=who.name, home=who.home)

    def _holder(self, run_id: str) -> str:
        """Who holds a dynamic uid's claim: the run's sandbox, by a path any agent can probe."""
        return f"{self._sandbox_root}/{run_id}"

    def _request(self, spec: RunSpec) -> bytes:
        sandbox = str(self.sandboxes.path(spec.run_id))
        program, argv = spec.argv()
        args = ["-d", sandbox, "-r", spec.run_id, "-f", str(self.fifo),
                "-g", str(int(spec.kill_grace_secs * 1000)), "-j", spec.to_json(),
                *self.isolation.supervisor_args(
                    spec.run_id, int(enforced_memory_mb(spec.mem_mb) * 1024 * 1024)),
                *supervisor_identity_args(spec)]
        if spec.fd_limit > 0 and self.enforce_fd_limit:
            args += ["-n", str(spec.fd_limit)]
        if self.orphan_secs > 0:
            # The agent's lock is named, not found from the sandbox: sandboxes may live
            # outside the work dir (AgentConfig.sandbox_root).
            args += ["-o", str(max(1, int(self.orphan_secs))),
                     "-l", str(self.sandboxes.agent_lock)]
        return encode_request([*args, "--", program, *argv], spec.environment(sandbox))

    def exec_as(self, spec: RunSpec | None, cwd: Path) -> list[str]:
        """The command prefix that runs a program as the run's user (for command health
        checks); empty when the agent does not switch users."""
        if spec is None or spec.uid < 0:
            return []
        return [*self.spawner.command, "-x", *supervisor_identity_args(spec), "-C", str(cwd), "--"]

    # -- killing ----------------------------------------------------------
    def kill(self, run_ids: Sequence[str], grace_secs: float) -> None:
        """Ask runs to stop (SIGTERM, SIGKILL after the grace); unknown or ended runs are ignored."""
        with self._lock:
            for run_id in run_ids:
                run = self.runs.get(run_id)
                if run is None or run.state.terminal or run.killing:
                    continue
                run.killing = True
                if run.fetching:  # no sandbox, no supervisor yet: it simply never starts
                    run.fetching = False
                    self._publish(run, run_id, TaskState.KILLED,
                                  "killed before it started (its URIs were being fetched)",
                                  outcome.REASON_KILLED)
                    continue
                self.sandboxes.request_kill(run_id, grace_secs)
                self._signal(run)

    @staticmethod
    def _signal(run: Run) -> None:
        # Before the running record the supervisor pid is unknown; the
        # supervisor reads the kill file right after starting the task.
        if run.supervisor_pid:
            try:
                os.kill(run.supervisor_pid, signal.SIGTERM)
            except ProcessLookupError:
                pass  # it has just exited; its record says how the task ended

    # -- records ----------------------------------------------------------
    def on_record(self, record: SupervisorRecord) -> None:
        """Apply a supervisor record (from the pipe or a scan) to its run."""
        with self._lock:
            run = self.runs.get(record.run_id)
            if run is None or run.state.terminal:
                return
            run.supervisor_pid = record.supervisor_pid or run.supervisor_pid
            run.pid = record.pid or run.pid
            if record.state == "running":
                if run.state is TaskState.STARTING:
                    self._running(record.run_id, run, record)
                return
            self._stop_checker(run)
            result = outcome.ended(record, run.spec, self.isolation)
            self._publish(run, record.run_id, result.state, result.message, result.reason,
                          result.exit_code)

    def _running(self, run_id: str, run: Run, record: SupervisorRecord) -> None:
        if run.spec is None:  # adopted before its supervisor wrote run.json
            run.spec = self.sandboxes.read_spec(run_id)
        result = outcome.running(record, run.spec, self.isolation)
        check = run.spec.health_check if run.spec else None
        healthy = HealthState.HEALTH_UNKNOWN if check and check.enabled else None
        self._publish(run, run_id, TaskState.RUNNING, result.message, healthy=healthy)
        if run.killing:
            self._signal(run)
        elif healthy is not None and run.spec is not None and check is not None:
            spec = run.spec
            port = check.http_port or (spec.ports[0].port if spec.ports else 0)
            sandbox = self.sandboxes.path(run_id)
            run.checker = HealthChecker(run_id, check, port, spec.environment(str(sandbox)),
                                        sandbox, self._health_changed,
                                        exec_as=self.exec_as(spec, sandbox))
            run.checker.start()

    def _health_changed(self, run_id: str, health: HealthState, message: str) -> None:
        with self._lock:
            run = self.runs.get(run_id)
            if run is None or run.state is not TaskState.RUNNING:
                return
            self._publish(run, run_id, TaskState.RUNNING, message, outcome.REASON_HEALTH,
                          healthy=health, stable=False)

    def lose(self, run_id: str, message: str) -> None:
        """The run's supervisor vanished without a record: report it LOST and kill what is left."""
        with self._lock:
            run = self.runs.get(run_id)
            if run is None or run.state.terminal:
                return
            self._stop_checker(run)
            if run.pid:
                try:
                    os.killpg(run.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            self._publish(run, run_id, TaskState.LOST, message, outcome.REASON_LOST)

    # -- bookkeeping ------------------------------------------------------
    def _publish(self, run: Run, run_id: str, state: TaskState, message: str, reason: str = "",
                 exit_code: int | None = None, healthy: HealthState | None = None,
                 stable: bool = True) -> None:
        update = Update(stable_uuid(run_id, state) if stable else str(uuid.uuid4()), run_id, state,
                        self._wall(), message, reason, exit_code, healthy, pid=run.pid)
        if state is not run.state:
            run.since = time.monotonic()
        run.state, run.last = state, update
        if state.terminal and run.spec is not None and run.spec.dynamic_uid:
            self.uid_claims.release(run.spec.uid, self._holder(run_id))
        if state.terminal and self.remote is not None:
            self.remote.release(run_id)  # its cache entries may be evicted from now on
        self.reporter.publish(update, terminal=state.terminal)

    @staticmethod
    def _stop_checker(run: Run) -> None:
        if run.checker is not None:
            run.checker.stop()
            run.checker = None

    def adopt(self, run_id: str, spec: RunSpec | None, record: SupervisorRecord | None) -> None:
        """Take over a run found in its sandbox (after a restart) and report where it stands."""
        with self._lock:
            run = Run(spec, TaskState.STARTING, time.monotonic())
            self.runs[run_id] = run
            if record is not None:
                self.on_record(record)
            if run.last is None:
                self._publish(run, run_id, TaskState.STARTING, "adopted after an agent restart")
            spec = run.spec
            if spec is not None and spec.dynamic_uid and not run.state.terminal:
                self._reclaim(run_id, spec.uid)

    def release_remote_of_dead_runs(self) -> None:
        """After the runs on disk are adopted (at start): cache entries held by runs that
        are not live any more are released (they ended, or were forgotten, while no agent
        ran; remote_volumes.py)."""
        if self.remote is None:
            return
        with self._lock:
            live = {run_id for run_id, run in self.runs.items() if not run.state.terminal}
        self.remote.keep_users(live)

    def _reclaim(self, run_id: str, uid: int) -> None:
        try:
            if self.uid_claims.reclaim(uid, self._holder(run_id)):
                return
            problem = "another run on this machine holds it"
        except PelotonError as exc:
            problem = str(exc)
        # Not killed: the task is already running as that uid either way.
        log.error("run %s was adopted, but its dynamic uid %d is not exclusive any more: %s",
                  run_id, uid, problem)

    def settled(self, run_ids: Sequence[str]) -> None:
        """These runs ended and every update about them was acknowledged: forget them."""
        with self._lock:
            done = [r for r in run_ids if r in self.runs and self.runs[r].state.terminal]
            # Logged first: whoever then misses a run in the table sees it acknowledged.
            self.sandboxes.mark_acked(done)
            for run_id in done:
                del self.runs[run_id]

    def reconcile(self, run_ids: Sequence[str]) -> list[str]:
        """Re-report the given runs (all if empty); returns those this agent never had."""
        unknown = []
        with self._lock:
            for run_id in run_ids or list(self.runs):
                run = self.runs.get(run_id)
                if run is not None and run.last is not None:
                    self.reporter.publish(run.last, terminal=run.state.terminal)
                elif not self._from_sandbox(run_id):
                    unknown.append(run_id)
        return unknown

    def _from_sandbox(self, run_id: str) -> bool:
        """Re-report a forgotten run from its sandbox; False if there is none."""
        try:
            if not self.sandboxes.path(run_id).is_dir():
                return False
        except PelotonError:
            return False
        record = self.sandboxes.exit_record(run_id)
        if record is None:
            return False
        self.adopt(run_id, self.sandboxes.read_spec(run_id), record)
        return True

    def tasks(self) -> list[tuple[str, Run]]:
        """Every run tracked, by id (a copy; the runs themselves keep changing)."""
        with self._lock:
            return list(self.runs.items())

    def regular_running(self) -> list[tuple[str, float, int]]:
        """(run id, cpu given, task pid) of every running non-revocable run (for slack.py)."""
        with self._lock:
            return [(run_id, run.spec.cpu, run.pid) for run_id, run in self.runs.items()
                    if run.state is TaskState.RUNNING and run.spec is not None
                    and not run.spec.revocable and run.pid > 0]

    def snapshot(self) -> list[Update]:
        """The latest update of every run (sent with each registration)."""
        with self._lock:
            return [r.last for r in self.runs.values() if r.last is not None]

    def stop(self) -> None:
        """Stop health checks; the runs themselves keep running."""
        with self._lock:
            for run in self.runs.values():
                self._stop_checker(run)
