"""Recovery that does not block serving (issue 24, item 4), deterministically.

The scene: a job manager runs three jobs of three RUNNING tasks; then a job manager built
over the same store and fakes takes over, as after a restart, with its recovery only
*deferred* (the active-job ids read, nothing loaded), and the test decides when the
background recovery takes a step.  Meanwhile:

* a read of a job recovery has not reached answers what storage holds, and a status
  event of such a job's run is applied, not killed as an orphan's (the job is loaded on
  demand, with its runs handed back);
* a call and the background recovery that race for one job load it and hand its runs
  back exactly once, whichever gets there first (a store wrapper holds one load open);
* a new job created during recovery runs;
* recovery finishing leaves the same end state as the blocking recovery: every job
  cached, every held run handed back once, nothing launched again;
* a partition acquired later is deferred the same way, so a call about one of its jobs
  while it recovers answers instead of missing the job;
* a load that fails (the store down) leaves its job deferred, the others load, and it is
  loaded once the store is back; a hand-back that fails (the resource manager down)
  leaves the job answering from the cache and is done again later.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any, cast

import gevent
import gevent.event
import pytest

from peloton.core.errors import Unavailable
from peloton.core.model.constraints import Label
from peloton.core.model.ids import RunId, TaskId
from peloton.core.model.job import PlacementStrategy
from peloton.core.model.resources import Resources
from peloton.core.model.task import TaskRuntime
from peloton.core.placement.request import job_label
from peloton.core.ports import HostManagerPort, RecoveredRun
from peloton.core.states import TaskState
from peloton.jobmgr.app import JobManager
from peloton.jobmgr.ownership import Ownership
from peloton.jobmgr.sched import NeedsCache, rm_task
from peloton.storage import Store
from tests.harness.partition_ids import job_in
from tests.unit.jobmgr.harness import Harness, job_spec
from tests.unit.jobmgr.test_partition_ownership import COUNT

S = TaskState
JOBS, TASKS = 3, 3


class GatedStore:
    """The harness's store, counting job loads; `hold(jobs)` makes the first load of one
    of those jobs' tasks wait until `release()` (how a test opens a race on a job)."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self.loads: Counter[str] = Counter()
        self._held: set[str] = set()
        self._gate = gevent.event.Event()
        #: Set once a held load has begun (and waits at the gate); `waiting_on` names it.
        self.waiting = gevent.event.Event()
        self.waiting_on = ""
        #: Jobs whose loads fail as if the store were down.
        self.down: set[str] = set()

    def hold(self, *job_ids: str) -> None:
        self._held = set(job_ids)
        self._gate.clear()
        self.waiting.clear()

    def release(self) -> None:
        self._gate.set()

    def get_task_runtimes(self, job_id: str, *args: Any, **kwargs: Any) -> dict[int, TaskRuntime]:
        self.loads[job_id] += 1
        if job_id in self.down:
            raise Unavailable("the store is down")
        if job_id in self._held:
            self._held = set()  # one load waits, the others go on
            self.waiting_on = job_id
            self.waiting.set()
            self._gate.wait()
        return cast(dict[int, TaskRuntime], self._store.get_task_runtimes(job_id, *args, **kwargs))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def running_jobs(h: Harness, ids: list[str] | None = None) -> list[str]:
    """Create JOBS jobs (or the given ids) of TASKS tasks and run them."""
    made = [h.jm.jobs.create(job_spec(TASKS), job_id) for job_id in ids or [""] * JOBS]
    h.settle(5)
    for job_id in made:
        assert h.states(job_id) == [S.RUNNING] * TASKS
    return made


def restart(h: Harness, ownership: Ownership | None = None, *,
            defer: bool = True) -> tuple[JobManager, GatedStore]:
    """A job manager over the same store and fakes, now the harness's, whose recovery has
    only deferred the active jobs (what `start()` does before it spawns the background
    greenlet; not even that without `defer`).  The fakes' logs are cleared first."""
    gated = GatedStore(h.conflicts)
    jm = JobManager(cast(Store, gated), h.rm, cast(HostManagerPort, h.hosts), h.config,
                    clock=h.clock, ownership=ownership)
    h.jm = jm
    h.rm.recovered.clear()
    h.rm.killed.clear()
    h.hosts.killed.clear()
    if defer:
        jm.recovery.defer()
    return jm, gated


def recover_the_rest(jm: JobManager) -> bool:
    """Step the background recovery to its end, in the caller; returns `done`."""
    while jm.recovery.step():
        pass
    return jm.recovery.done


def wait_done(jm: JobManager) -> None:
    """Wait for the started background recovery to end, then stop it."""
    with gevent.Timeout(10):
        while not jm.recovery.done:
            gevent.sleep(0.01)
    jm.recovery.stop()


def held_runs(h: Harness, job_id: str) -> list[TaskId]:
    return [TaskId(job_id, i) for i in range(TASKS)]


def test_a_read_during_recovery_loads_the_job_and_answers_what_is_stored(h: Harness) -> None:
    ids = running_jobs(h)
    launched = list(h.hosts.launches)
    jm, gated = restart(h)
    assert len(jm.cache) == 0 and sorted(jm.cache.deferred) == sorted(ids)
    assert not jm.recovery.done
    last = ids[-1]

    spec, runtime = jm.jobs.get(last)  # GetJob's path: the cache, loading on demand
    assert (spec, runtime) == (h.store.get_job_config(last), h.store.get_job_runtime(last))
    job = jm.cache.get(last)
    assert job is not None and job.runtime == runtime
    assert {i: rt for i, rt in job.tasks()} == h.store.get_task_runtimes(last)
    # Loaded and handed back (its runs are the resource manager's again), the others not.
    assert sorted(h.rm.recovered) == held_runs(h, last)
    assert gated.loads == Counter({last: 1})
    assert sorted(jm.cache.deferred) == sorted(ids[:-1]) and not jm.recovery.done

    # A status event of a job recovery has not reached is applied to it, never killed as
    # an orphan's: the first job's task 0 fails and restarts on a new run.
    first = ids[0]
    ended = str(RunId(first, 0, h.store.get_task_runtime(first, 0).run_id))
    h.hosts.finish(ended, S.FAILED)
    jm.events.process_once(0.0)
    assert h.hosts.killed == []
    assert h.store.get_task_runtime(first, 0).state in (S.FAILED, S.INITIALIZED, S.PENDING)
    assert first in jm.cache and gated.loads[first] == 1

    assert recover_the_rest(jm)
    h.settle(60)
    for job_id in ids:
        assert h.states(job_id) == [S.RUNNING] * TASKS
    assert h.store.get_task_runtime(first, 0).run_id == 2
    relaunched = [spec.run_id for _, spec in h.hosts.launches[len(launched):]]
    assert relaunched == [str(RunId(first, 0, 2))]  # only the failed task ran again
    assert all(n == 1 for n in gated.loads.values())


@pytest.mark.parametrize("first", ["recovery", "call"])
def test_a_call_and_recovery_racing_for_a_job_load_and_hand_it_back_once(
        h: Harness, first: str) -> None:
    ids = running_jobs(h)
    jm, gated = restart(h)
    target = jm.cache.next_deferred(1)[0]  # the job the background recovery loads first
    gated.hold(target)
    recovering, calling = (lambda: jm.recovery.step(1)), (lambda: jm.jobs.get(target))
    order = [recovering, calling] if first == "recovery" else [calling, recovering]
    leader, follower = [gevent.spawn(f) for f in order]  # greenlets run in spawn order
    gated.waiting.wait(5)  # the first racer is inside the job's load ...
    assert not leader.ready()
    gevent.sleep(0)  # ... and the second one reaches the job and waits for it
    assert not follower.ready()
    gated.release()
    gevent.joinall([leader, follower], timeout=5, raise_error=True)

    assert gated.loads[target] == 1
    assert sorted(h.rm.recovered) == held_runs(h, target)  # handed back once
    answer = (follower if first == "recovery" else leader).value
    assert answer == (h.store.get_job_config(target), h.store.get_job_runtime(target))
    assert jm.recovery.loaded == 1

    assert recover_the_rest(jm) and sorted(j.job_id for j in jm.cache) == sorted(ids)
    assert all(n == 1 for n in gated.loads.values())
    assert Counter(h.rm.recovered) == Counter(t for j in ids for t in held_runs(h, j))


def test_the_background_recovery_gives_way_while_a_callers_load_is_under_way(
        h: Harness) -> None:
    # A call about a job not loaded yet loads it in the caller; the background recovery,
    # CPU-bound over a million runs, would take half the process from it meanwhile.
    ids = running_jobs(h)
    jm, gated = restart(h)
    first, second, last = jm.cache.next_deferred(3)  # the order the background takes
    gated.hold(last)
    caller = gevent.spawn(jm.jobs.get, last)
    assert gated.waiting.wait(5) and gated.waiting_on == last  # the caller's load is under way
    background = gevent.spawn(jm.recovery.step, 2)  # the next two: first, then second
    with gevent.Timeout(5):
        while gated.loads[first] == 0:
            gevent.sleep(0)
    for _ in range(50):  # every greenlet gets many turns: none of them loads `second`
        gevent.sleep(0)
    assert gated.loads[second] == 0 and not background.ready()
    gated.release()
    gevent.joinall([caller, background], timeout=5, raise_error=True)
    assert caller.value == (h.store.get_job_config(last), h.store.get_job_runtime(last))
    assert gated.loads == Counter({first: 1, second: 1, last: 1})
    assert recover_the_rest(jm)
    assert Counter(h.rm.recovered) == Counter(t for j in ids for t in held_runs(h, j))


def test_a_job_created_during_recovery_runs(h: Harness) -> None:
    ids = running_jobs(h)
    jm, _ = restart(h)
    new = jm.jobs.create(job_spec(2))
    h.settle(5)
    assert h.states(new) == [S.RUNNING, S.RUNNING]
    assert jm.cache.deferred  # recovery has not taken a step: the others wait for it
    assert recover_the_rest(jm)
    h.settle(5)
    for job_id in [*ids, new]:
        assert job_id in jm.cache
        assert h.states(job_id) == [S.RUNNING] * (TASKS if job_id != new else 2)


def test_background_recovery_ends_as_the_blocking_one(h: Harness) -> None:
    ids = running_jobs(h)
    launches = list(h.hosts.launches)
    # The blocking recovery, for the record ...
    jm, _ = restart(h, defer=False)
    assert jm.recovery.recover() == JOBS
    blocking = (Counter(h.rm.recovered), sorted(jm.queue.jobs.is_tracked(j) for j in ids))
    # ... then the background one, the component as `start()` runs it, on the hub.
    jm, gated = restart(h)
    jm.recovery.start()
    wait_done(jm)
    assert sorted(j.job_id for j in jm.cache) == sorted(ids)
    assert (Counter(h.rm.recovered), sorted(jm.queue.jobs.is_tracked(j) for j in ids)) \
        == blocking
    assert Counter(h.rm.recovered) == Counter(t for j in ids for t in held_runs(h, j))
    assert all(n == 1 for n in gated.loads.values()) and len(gated.loads) == JOBS
    h.settle(60)
    for job_id in ids:
        assert h.states(job_id) == [S.RUNNING] * TASKS
    assert h.hosts.launches == launches  # every run adopted and reconciled, none again
    assert h.hosts.killed == []


def test_a_partition_acquired_later_answers_for_its_jobs_while_it_recovers(
        h: Harness) -> None:
    ids = running_jobs(h, [job_in(1, COUNT), job_in(1, COUNT), job_in(0, COUNT)])
    one = ids[:2]
    jm, gated = restart(h, Ownership(COUNT, {0}), defer=False)
    assert jm.recovery.recover() == 1  # its own partition's job
    gated.hold(*one)
    acquiring = gevent.spawn(jm.acquire_partition, 1)
    gated.waiting.wait(5)  # taking the partition over, inside its first job's load
    assert not acquiring.ready()
    # A call about the partition's other job, not loaded yet, loads it and answers.
    other = next(j for j in one if j != gated.waiting_on)
    assert jm.jobs.get(other) == (h.store.get_job_config(other),
                                  h.store.get_job_runtime(other))
    assert other in jm.cache and gated.waiting_on not in jm.cache
    gated.release()
    assert acquiring.get(timeout=5) == 2
    assert jm.recovery.done and all(j in jm.cache for j in ids)
    assert all(n == 1 for n in gated.loads.values())
    assert Counter(h.rm.recovered) == Counter(t for j in ids for t in held_runs(h, j))


def test_a_partition_taken_over_behind_returns_at_once_and_recovers_in_its_own_greenlet(
        h: Harness) -> None:
    """What a member's membership greenlet does (members.py): the acquisition returns once
    the partition's jobs are deferred; a call loads the one it needs meanwhile; the
    recovery ends in a greenlet of its own with every job loaded and handed back once."""
    ids = running_jobs(h, [job_in(1, COUNT), job_in(1, COUNT), job_in(0, COUNT)])
    one = ids[:2]
    jm, gated = restart(h, Ownership(COUNT, {0}), defer=False)
    assert jm.recovery.recover() == 1  # its own partition's job
    gated.hold(*one)
    assert jm.acquire_partition(1, behind=True) == 2  # deferred, nothing loaded yet
    assert sorted(jm.cache.deferred) == sorted(one) and not jm.recovery.done
    gated.waiting.wait(5)  # the takeover's greenlet, inside its first job's load
    other = next(j for j in one if j != gated.waiting_on)
    assert jm.jobs.get(other) == (h.store.get_job_config(other),
                                  h.store.get_job_runtime(other))
    gated.release()
    recovery = jm.recovery  # a new name: mypy keeps the narrowing to False of the above
    with gevent.Timeout(5):
        while not recovery.done:
            gevent.sleep(0.01)
    assert all(j in jm.cache for j in ids)
    assert all(n == 1 for n in gated.loads.values())
    assert Counter(h.rm.recovered) == Counter(t for j in ids for t in held_runs(h, j))
    assert h.hosts.killed == []


def test_a_partition_released_before_its_jobs_load_drops_them(h: Harness) -> None:
    ids = running_jobs(h, [job_in(1, COUNT), job_in(1, COUNT), job_in(0, COUNT)])
    jm, gated = restart(h, Ownership(COUNT, {0, 1}))
    assert sorted(jm.cache.deferred) == sorted(ids)
    jm.release_partition(1)
    assert jm.cache.deferred == [ids[-1]]
    assert jm.cache.get(ids[0]) is None  # not ours: never loaded (a call is forwarded)
    assert recover_the_rest(jm)
    h.settle(5)
    assert [j.job_id for j in jm.cache] == [ids[-1]] and jm.recovery.done
    assert set(gated.loads) == {ids[-1]}
    assert sorted(h.rm.recovered) == held_runs(h, ids[-1])
    assert h.hosts.killed == []


def test_failed_loads_and_hand_backs_are_tried_again(
        h: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    ids = running_jobs(h)
    jm, gated = restart(h)
    down, rm_down = ids[0], ids[1]
    gated.down.add(down)
    real = h.rm.recover_tasks

    def refuse(runs: Any) -> None:
        if any(run.task.task_id.job_id == rm_down for run in runs):
            raise Unavailable("the resource manager is down")
        real(runs)

    monkeypatch.setattr(h.rm, "recover_tasks", refuse)
    with pytest.raises(Unavailable):
        jm.recovery.step()
    # The store's job stays deferred (a call about it says UNAVAILABLE, not "not found");
    # the resource manager's is cached and answers; the third is recovered.
    assert jm.cache.deferred == [down]
    with pytest.raises(Unavailable):
        jm.jobs.get(down)
    assert jm.jobs.get(rm_down)[1] == h.store.get_job_runtime(rm_down)
    assert sorted(h.rm.recovered) == held_runs(h, ids[2]) and not jm.recovery.done

    gated.down.clear()
    monkeypatch.setattr(h.rm, "recover_tasks", real)
    jm.recovery.start()  # the background greenlet retries both
    wait_done(jm)
    assert sorted(j.job_id for j in jm.cache) == sorted(ids)
    assert Counter(h.rm.recovered) == Counter(t for j in ids for t in held_runs(h, j))
    h.settle(5)
    for job_id in ids:
        assert h.states(job_id) == [S.RUNNING] * TASKS
    assert h.hosts.killed == []


def test_a_jobs_runs_go_to_the_resource_manager_while_the_next_job_loads(
        h: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    ids = running_jobs(h)
    jm, gated = restart(h)
    order = jm.cache.next_deferred(JOBS)
    gate = gevent.event.Event()
    calls: list[str] = []
    real_recover, real_adopt = h.rm.recover_tasks, h.hosts.adopt

    def slow_recover(runs: Any) -> None:  # a resource manager that takes its time
        calls.append(f"recover {runs[0].task.task_id.job_id}")
        gate.wait()
        real_recover(runs)

    def adopt(hostname: str, specs: Any) -> None:
        calls.extend(f"adopt {RunId.parse(s.run_id).job_id}" for s in specs)
        real_adopt(hostname, specs)

    monkeypatch.setattr(h.rm, "recover_tasks", slow_recover)
    monkeypatch.setattr(h.hosts, "adopt", adopt)
    stepping = gevent.spawn(jm.recovery.step)
    with gevent.Timeout(5):
        while gated.loads[order[1]] == 0:
            gevent.sleep(0.001)
    # The first job's runs are on their way to the resource manager and the next job has
    # loaded meanwhile; one job's calls at a time, the host manager told of a job's runs
    # once the resource manager has them.
    assert calls == [f"recover {order[0]}"] and h.rm.recovered == []
    gevent.sleep(0.01)
    assert calls == [f"recover {order[0]}"] and not stepping.ready()
    gate.set()
    assert stepping.get(timeout=5) == JOBS
    assert calls == [c for j in order for c in [f"recover {j}"] + [f"adopt {j}"] * TASKS]
    assert jm.recovery.done
    assert Counter(h.rm.recovered) == Counter(t for j in ids for t in held_runs(h, j))


def test_a_jobs_queued_runs_are_queued_once_its_held_runs_are_back(
        h: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    ids = running_jobs(h)
    h.force_task(ids[1], 0, state=S.PENDING)  # a job with held and queued runs
    jm, _ = restart(h)
    calls: list[str] = []
    real_recover, real_kill = h.rm.recover_tasks, h.rm.kill_tasks

    def slow_recover(runs: Any) -> None:
        gevent.sleep(0.01)  # the call is under way: the caller goes on meanwhile
        real_recover(runs)
        calls.append(f"recovered {runs[0].task.task_id.job_id}")

    def kill(task_ids: Any) -> None:  # the first step of queueing runs again
        calls.append(f"queued {task_ids[0].job_id}")
        real_kill(task_ids)

    monkeypatch.setattr(h.rm, "recover_tasks", slow_recover)
    monkeypatch.setattr(h.rm, "kill_tasks", kill)
    order = jm.cache.next_deferred(JOBS)
    assert recover_the_rest(jm)
    # Every held run of a job, and of the jobs before it, is back before its queued runs
    # are queued again (admission never counts their room as free).
    queued_at = calls.index(f"queued {ids[1]}")
    assert calls[:queued_at] == [f"recovered {j}" for j in order[:order.index(ids[1]) + 1]]
    assert TaskId(ids[1], 0) in h.rm.queued
    h.settle(5)
    for job_id in ids:
        assert h.states(job_id) == [S.RUNNING] * TASKS


def test_each_run_is_handed_back_as_rm_task_builds_it(
        h: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    """The hand-back copies one task per (config version, task spec, desired host) for the
    runs of a job: each run's task is still the one `rm_task` builds for it (an instance
    with a spec of its own, spread labels), and a job's runs share their needs."""
    base = job_spec(TASKS)
    own = dataclasses.replace(base.default_task, resources=Resources(cpu=0.2, mem_mb=32),
                              labels=(Label("tier", "one"),))
    spread = dataclasses.replace(base, instance_tasks={1: own},
                                 placement_strategy=PlacementStrategy.SPREAD_JOB)
    ids = [*running_jobs(h), h.jm.jobs.create(spread, "")]
    h.settle(5)
    assert h.states(ids[-1]) == [S.RUNNING] * TASKS
    jm, _ = restart(h)
    sent: list[RecoveredRun] = []
    real = h.rm.recover_tasks

    def noting(runs: list[RecoveredRun]) -> None:
        sent.extend(runs)
        real(runs)

    monkeypatch.setattr(h.rm, "recover_tasks", noting)
    assert recover_the_rest(jm)
    assert len(sent) == len(ids) * TASKS
    for job_id in ids:
        job = jm.cache.get(job_id)
        assert job is not None
        mine = {r.task.task_id.instance: r for r in sent if r.task.task_id.job_id == job_id}
        for inst, rt in job.tasks():
            spec = job.specs.get(rt.config_version) or job.spec
            assert mine[inst] == RecoveredRun(spec.respool_id, rm_task(
                job_id, spec, inst, rt, NeedsCache()), rt.state, rt.host)
        shared = [r.task.request.needs for i, r in mine.items() if i != 1]
        assert all(n is shared[0] for n in shared)
    assert mine[1].task.request.labels == (Label("tier", "one"), job_label(ids[-1]))
