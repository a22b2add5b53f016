"""A run that reports around a graceful partition handover is stored once, ended, by the new owner.

The scene of test_takeover_run_end.py (takeover_scene.py) (two all-active members over one store and one real
in-process host manager, an agent-like backend), but member B (`m2`) is not paused: it
leaves as a SIGTERM'd member does (peloton/cluster/daemons/members.py).  It releases its
partitions (`JobManager.release_partitions`: the STARTINGs its status events kept
unstored are stored, each partition's fence and ownership are released, a launch round
in flight is waited for, the partitions' jobs are forgotten), its status events stop
(`StatusEvents.stop`), and member A (`m1`) then acquires them (`acquire_partitions(...,
behind=True)`: claim, announce, own, defer, recover in a greenlet).  B's stream consumer
`jobmgr@m2` is not unregistered by the stop (nothing calls `EventLog.forget` but an
operator): it holds trimming back, at what it acknowledged last, until the host manager
forgets it as idle.

B drives a 3-task batch job to LAUNCHED (and, for some rows, further); the rest of each
run's reports (STARTING, RUNNING and SUCCEEDED; RUNNING and SUCCEEDED after a STARTING B
kept unstored; or SUCCEEDED alone) reach the host manager at one point of the handover,
while B's status greenlet still runs where it would.  Whatever the point and the variant
(B's last batch acknowledged or not, its consumer still registered or forgotten, the
agent's periodic resend), A must store every task SUCCEEDED, each run once (run 1,
launched once, never killed), within a bounded number of its rounds.  A launch round in
flight when the release starts is covered too: the release waits for it (`quiesce`), so
the run reaches its host before A reconciles it and A never replaces it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import gevent
import gevent.event
import pytest

from peloton.core.states import JobType
from peloton.jobmgr.aggregate import CachedJob
from tests.unit.jobmgr.harness import job_spec
from tests.unit.jobmgr.takeover_scene import (
    B_HOLDS,
    HOST,
    MEMBER_IDLE,
    ROUNDS,
    TASKS,
    S,
    Scene,
    once,
)
from tests.unit.jobmgr.test_takeover_run_end import (
    at_adopted,
    at_claimed,
    at_deferred,
    at_listing,
    at_loading,
    at_poll_in_flight,
    at_poll_in_flight_recovered,
    at_reconcile_asked,
    at_reconciled,
    take_over,
)

log = logging.getLogger(__name__)


class Handover(Scene):
    """The takeover scene, B leaving gracefully instead of pausing."""

    def __init__(self, *, member_idle: float = 60.0, stays: bool = False) -> None:
        super().__init__(member_idle=member_idle)
        #: B gives its partitions up and stays a member (more members than partitions):
        #: its loops go on, owning nothing.
        self.stays = stays
        #: B's status events have stopped (the process is leaving).
        self.b_stopped = False

    def launch(self) -> None:
        """B creates the job and launches its runs; nothing reported yet (LAUNCHED)."""
        super().launch()
        assert self.stored() == [(S.LAUNCHED, 1)] * TASKS

    def b_poll(self) -> int:
        """One batch of B's status greenlet, while it runs: an error is logged, as its
        loop does (a write of a partition whose fence B released is refused)."""
        if self.b_stopped:
            return 0
        try:
            return self.b.events.process_once(0.0)
        except Exception:
            log.info("B's status round failed", exc_info=True)
            return 0

    def release(self) -> None:
        """B releases its partitions (members.py's `on_release_many`)."""
        self.b.release_partitions(B_HOLDS)

    def stop_b(self) -> None:
        """B's status events stop (the job manager's stop, after the release), unless B
        stays."""
        if not self.stays:
            self.b.events.stop()
            self.b_stopped = True

    def host_round(self) -> int:
        """The host manager's work and the agent's answers; and B's round, if it stays."""
        done = super().host_round()
        if self.stays and self.b.ownership.holds_none():
            done += self.b_round()
        return done

    def leave(self) -> None:
        """B releases and stops."""
        self.release()
        self.stop_b()


#: A point: (scene, the reports arriving, B forgotten when it is, monkeypatch) -> None;
#: it leaves B released and stopped and A having taken the partitions over.
Point = Callable[[Handover, Callable[[], None], Callable[[], None], pytest.MonkeyPatch],
                 None]


# -- B's side of the handover -----------------------------------------------------------------

def read_by_b(scene: Handover, end: Callable[[], None]) -> Callable[[], None]:
    """The reports arrive and B's status greenlet reads a batch."""

    def arrive() -> None:
        end()
        scene.b_poll()

    return arrive


def at_before_release_unread(scene: Handover, end: Callable[[], None],
                             forget: Callable[[], None], mp: pytest.MonkeyPatch) -> None:
    # The reports reach the host manager just before the release; B never reads them as
    # their owner (its next poll is after the release: passed over).
    end()
    scene.release()
    scene.b_poll()
    scene.stop_b()
    forget()
    take_over(scene)


def at_before_release_read(scene: Handover, end: Callable[[], None],
                           forget: Callable[[], None], mp: pytest.MonkeyPatch) -> None:
    # B reads and stores them (acknowledged or not, as the variant says), then leaves.
    end()
    scene.b_poll()
    scene.leave()
    forget()
    take_over(scene)


def at_storing_kept(scene: Handover, end: Callable[[], None], forget: Callable[[], None],
                    mp: pytest.MonkeyPatch) -> None:
    # The release stores what B kept; between its look at the job and the job's write
    # (a store write yields), B's status greenlet reads the reports.
    real = scene.b.events.store_kept
    job_store_kept = CachedJob.store_kept
    hook = once(read_by_b(scene, end))

    def storing(job: CachedJob, instances: Any = None) -> Any:
        if job.job_id == scene.job_id:
            hook()
        return job_store_kept(job, instances)

    def store_kept(owned: Callable[[str], bool] = lambda _job_id: True) -> int:
        mp.setattr(CachedJob, "store_kept", storing)
        try:
            stored = real(owned)
        finally:
            mp.setattr(CachedJob, "store_kept", job_store_kept)
        hook()  # nothing kept (the row left nothing unstored): the reports come now
        return stored

    mp.setattr(scene.b.events, "store_kept", store_kept)
    scene.leave()
    forget()
    take_over(scene)


def at_fence_released(scene: Handover, end: Callable[[], None], forget: Callable[[], None],
                      mp: pytest.MonkeyPatch) -> None:
    # B's fence of the job's partition is released, its ownership not yet: B's status
    # greenlet reads the reports and its write is refused (PartitionNotHeld).
    fences = scene.b.fences
    assert fences is not None
    real = fences.release

    def release(partition: int) -> None:
        real(partition)
        if partition == B_HOLDS[0]:
            hook()

    hook = once(read_by_b(scene, end))
    mp.setattr(fences, "release", release)
    scene.leave()
    forget()
    take_over(scene)


def at_quiescing(scene: Handover, end: Callable[[], None], forget: Callable[[], None],
                 mp: pytest.MonkeyPatch) -> None:
    # Owned no more, still cached: the release waits for a launch round, and B's and A's
    # status greenlets both read the reports meanwhile (each passes them over).
    real = scene.b.placement.quiesce

    def quiesce(timeout: float) -> bool:
        end()
        scene.b_poll()
        scene.a.events.process_once(0.0)
        return real(timeout)

    mp.setattr(scene.b.placement, "quiesce", quiesce)
    scene.leave()
    forget()
    take_over(scene)


def at_between_owners(scene: Handover, end: Callable[[], None], forget: Callable[[], None],
                      mp: pytest.MonkeyPatch) -> None:
    # B has forgotten the jobs, A has not claimed them: both pass the reports over.
    scene.release()
    end()
    scene.b_poll()
    scene.a.events.process_once(0.0)
    scene.stop_b()
    forget()
    take_over(scene)


def a_side(point: Callable[[Scene, Callable[[], None], pytest.MonkeyPatch], None]) -> Point:
    """A point of A's takeover (test_takeover_run_end.py), after B has left."""

    def at(scene: Handover, end: Callable[[], None], forget: Callable[[], None],
           mp: pytest.MonkeyPatch) -> None:
        scene.leave()
        forget()
        point(scene, end, mp)

    return at


POINTS: dict[str, Point] = {
    "before B's release, unread by B": at_before_release_unread,
    "before B's release, read by B": at_before_release_read,
    "while B stores what it kept": at_storing_kept,
    "B's fence released, still owned": at_fence_released,
    "B quiescing, owned no more": at_quiescing,
    "B forgot the jobs, A not claimed": at_between_owners,
    "A claimed, not owned": a_side(at_claimed),
    "A listing its jobs": a_side(at_listing),
    "A deferred, not loaded": a_side(at_deferred),
    "while A loads": a_side(at_loading),
    "A adopted, not reconciled": a_side(at_adopted),
    "A's reconcile asked, not answered": a_side(at_reconcile_asked),
    "after A's reconcile": a_side(at_reconciled),
    "A's poll in flight across the claim": a_side(at_poll_in_flight),
    "A's poll in flight across the recovery": a_side(at_poll_in_flight_recovered),
}

#: What B stored before the point -> the reports left for the point.
LEFT: dict[str, tuple[tuple[S, ...], tuple[S, ...]]] = {
    "all reports left": ((), (S.STARTING, S.RUNNING, S.SUCCEEDED)),
    "STARTING kept by B": ((S.STARTING,), (S.RUNNING, S.SUCCEEDED)),
    "only the end left": ((S.STARTING, S.RUNNING), (S.SUCCEEDED,)),
}


@dataclass(frozen=True)
class Variant:
    """B's batches from the point on not acknowledged (it stops first), B's consumer
    forgotten (before A claims / after the reports), the agent's periodic resend (with
    the reports / every one of A's rounds), B staying a member (its loops go on)."""

    unacked: bool = False
    stays: bool = False
    forgotten: str = ""  # "before claim" / "after reports"
    resend: str = ""  # "with reports" / "every round"


VARIANTS = {
    "plain": Variant(),
    "B's last batch unacked": Variant(unacked=True),
    "B forgotten before A claims": Variant(forgotten="before claim"),
    "B unacked, forgotten after the reports": Variant(unacked=True, forgotten="after reports"),
    "B unacked, agent resends with the reports": Variant(unacked=True, resend="with reports"),
    "B unacked, agent resends every round": Variant(unacked=True, resend="every round"),
    "B stays a member, agent resends every round": Variant(stays=True, resend="every round"),
}


@pytest.fixture
def scene(request: pytest.FixtureRequest) -> Iterator[Handover]:
    how = VARIANTS[request.node.callspec.params["variant"]]
    s = Handover(member_idle=MEMBER_IDLE if how.forgotten else 60.0, stays=how.stays)
    try:
        yield s
    finally:
        s.close()


def assert_once_ended(scene: Handover, rounds: int, *why: str) -> None:
    """Every task stored SUCCEEDED, run 1 launched once, nothing killed, in time."""
    assert scene.stored() == [(S.SUCCEEDED, 1)] * TASKS, (*why, rounds)
    assert sorted(r for _, runs in scene.agent.launched for r in runs) == scene.run_ids()
    assert scene.agent.killed == []
    assert rounds < ROUNDS


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("left", list(LEFT))
@pytest.mark.parametrize("point", list(POINTS))
def test_a_run_reporting_during_a_graceful_handover_is_stored_once_ended_by_the_new_owner(
        scene: Handover, point: str, left: str, variant: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    how = VARIANTS[variant]
    before, reports = LEFT[left]
    scene.resending = how.resend == "every round"
    scene.launch()
    scene.settle(*before)
    if S.STARTING in before and S.RUNNING not in before:
        assert scene.stored() == [(S.LAUNCHED, 1)] * TASKS  # kept, unstored
    forgotten: list[bool] = []

    def forget() -> None:
        if scene.b_stopped and not forgotten:
            forgotten.append(True)
            scene.forget_b()

    def end() -> None:
        if how.unacked:  # B stops before it acknowledges what it reads from here on
            monkeypatch.setattr(scene.b.events.stream, "acknowledge", lambda offset: None)
        for state in reports:
            for run_id in scene.run_ids():
                scene.agent.report(run_id, state, HOST)
        if how.resend == "with reports":
            scene.agent.redeliver()
        if how.forgotten == "after reports":
            forget()

    POINTS[point](scene, end,
                  forget if how.forgotten == "before claim" else lambda: None, monkeypatch)
    assert scene.b_stopped is not how.stays and scene.b.cache.get(scene.job_id) is None
    if how.forgotten:
        forget()  # stopped now, if it was not when the reports came
        assert "jobmgr@m2" not in scene.hm.events.acknowledged()
    rounds = scene.a_rounds()
    assert_once_ended(scene, rounds, point, left, variant)


# -- a launch round in flight when the release starts -----------------------------------------

@pytest.mark.parametrize("reached", [False, True], ids=["before the host", "at the host"])
def test_a_launch_in_flight_at_the_release_reaches_its_host_before_the_new_owner_recovers(
        reached: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    # B's placement round has written the runs LAUNCHED and is handing them to the host
    # when the release starts.  Had the release not waited for it, A would reconcile runs
    # the agent does not have yet (LOST: replaced by run 2), and B's launch would then
    # start run 1 as well.  `reached`: the host has them, the round has not ended, and
    # the runs report meanwhile (B owns them no more, A not yet: both pass them over).
    scene = Handover()
    try:
        scene.b.jobs.create(job_spec(TASKS, JobType.BATCH, command="sleep 8"),
                            scene.job_id)
        for _ in range(10):
            if scene.rm.queued:
                break
            scene.b.engines.run_due()
            scene.host_round()
        assert scene.rm.queued
        launching, go_on = gevent.event.Event(), gevent.event.Event()
        real = scene.hm.launch_hosts

        def launch_hosts(launches: Any) -> Any:
            failed = real(launches) if reached else None
            launching.set()
            go_on.wait(30)
            return failed if reached else real(launches)

        monkeypatch.setattr(scene.hm, "launch_hosts", launch_hosts)
        round_ = gevent.spawn(scene.b.placement.launch_once, 0.0)
        assert launching.wait(30)
        release = gevent.spawn(scene.leave)

        def successor() -> None:  # A takes the partitions over once B has let them go
            release.get()
            take_over(scene)
            for greenlet in list(scene.a.recovery._takeovers):
                greenlet.join()
            scene.host_round()  # the agent answers A's reconcile

        taking = gevent.spawn(successor)
        for _ in range(10):
            gevent.sleep(0)  # yields: every greenlet runs as far as it can
        assert not release.dead and not taking.dead  # waiting for the round
        if reached:
            for run_id in scene.run_ids():
                scene.agent.report(run_id, S.STARTING, HOST)
                scene.agent.report(run_id, S.RUNNING, HOST)
            scene.b.events.process_once(0.0)
            scene.a.events.process_once(0.0)
        go_on.set()
        taking.get(timeout=30)
        assert round_.get(timeout=30) == TASKS
        scene.a_rounds(3)
        assert scene.stored() == [(S.RUNNING if reached else S.LAUNCHED, 1)] * TASKS
        if not reached:
            for run_id in scene.run_ids():
                scene.agent.report(run_id, S.STARTING, HOST)
                scene.agent.report(run_id, S.RUNNING, HOST)
        scene.end()
        rounds = scene.a_rounds()
        assert_once_ended(scene, rounds, "launch in flight", str(reached))
    finally:
        scene.close()
