"""A run that ends around a job partition's takeover is stored ended by the new owner.

Two all-active job manager members share one store and ONE real in-process host manager
(peloton/hostmgr/app.py: its real status stream, books and reconcile) over an agent-like
fake backend.  Member B (`m2`) creates a 3-task batch job and runs it: every run is
RUNNING, stored.  Then B is paused (it never polls, acknowledges or writes again) and
member A (`m1`) takes B's partitions over: it claims them in the store, announces them
to its peers, owns them, defers their jobs and recovers them in a greenlet of its own (a
member's `acquire_partitions(behind=True)`): each job loaded, then its runs adopted by
the host manager and reconciled.  The runs end (the agent reports SUCCEEDED) at one
point of that takeover; whatever the point, A must store every task SUCCEEDED, each run
once, within a bounded number of its rounds.

The scene (tests/unit/jobmgr/takeover_scene.py) models our agent: updates pending until
acknowledged, resent oldest first with their uuid, a reconcile answered with the run's
latest update when the test says.

The table found one loss: B paused after storing its runs' RUNNING but before
acknowledging it, so the host manager kept those reports buffered and the agent kept
resending them; the runs ended before the takeover's reconcile, which named them for
their next report to be streamed again (`EventLog.redeliver`); a resend of the RUNNING
came first, took that turn, and the end that followed stayed a duplicate, never streamed
to A again: every task stayed RUNNING.  Now only a report of the run's newest state takes
the turn (hostmgr/events.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import gevent
import pytest

from peloton.core.model.ids import RunId
from peloton.hostmgr.app import HostManager
from peloton.hostmgr.config import HostManagerConfig
from peloton.jobmgr.aggregate import CachedJob
from peloton.storage import StoreOptions, open_store
from tests.harness.partition_ids import job_in
from tests.unit.jobmgr.takeover_scene import (
    B_HOLDS,
    COUNT,
    HOST,
    MEMBER_IDLE,
    ROUNDS,
    TASKS,
    Agent,
    S,
    Scene,
    once,
)

# -- the points of A's takeover at which the runs end -----------------------------------------

def take_over(scene: Scene) -> None:
    """A takes B's partitions over as a member does (members.py, `on_acquire_many`)."""
    scene.a.acquire_partitions(dict.fromkeys(B_HOLDS, 20), behind=True)


def at_before_claim(scene: Scene, end: Callable[[], None], mp: pytest.MonkeyPatch) -> None:
    end()
    scene.a_rounds(2)  # A passes the ends over: not its partitions yet
    take_over(scene)


def at_claimed(scene: Scene, end: Callable[[], None], mp: pytest.MonkeyPatch) -> None:
    # Between the claim in the store and `ownership.acquire`: the announcement's calls.
    real = scene.rm.kill_tasks

    def announced(task_ids: Sequence[Any]) -> None:
        if not task_ids:
            hook()
        real(task_ids)

    def ended_and_polled() -> None:
        end()
        assert scene.a.events.process_once(0.0) == 0  # passed over: not A's yet

    hook = once(ended_and_polled)
    mp.setattr(scene.rm, "kill_tasks", announced)
    take_over(scene)


def at_listing(scene: Scene, end: Callable[[], None], mp: pytest.MonkeyPatch) -> None:
    # A lists the partitions' active jobs (a store read: it yields), then owns them and
    # defers their jobs with nothing in between: an end read while it lists is passed over.
    real = scene.a.cache.active_ids

    def active_ids() -> list[str]:
        end()
        assert scene.a.events.process_once(0.0) == 0  # not A's yet: passed over
        return real()

    mp.setattr(scene.a.cache, "active_ids", active_ids)
    take_over(scene)


def at_deferred(scene: Scene, end: Callable[[], None], mp: pytest.MonkeyPatch) -> None:
    # Deferred, not loaded: the status events load the job themselves.
    take_over(scene)
    end()
    scene.a.events.process_once(0.0)


def at_loading(scene: Scene, end: Callable[[], None], mp: pytest.MonkeyPatch) -> None:
    # The recovery greenlet is reading the job; A's status greenlet reads the end and waits
    # for the load (JobCache.ensure).
    real = scene.a.cache.load
    polls: list[gevent.Greenlet] = []

    def load(job_id: str) -> CachedJob:
        end()
        polls.append(gevent.spawn(scene.a.events.process_once, 0.0))
        gevent.sleep(0)
        assert not polls[0].dead  # waiting for this load
        return real(job_id)

    mp.setattr(scene.a.cache, "load", load)
    take_over(scene)
    scene.a_rounds(1)
    gevent.joinall(polls, raise_error=True)


def at_adopted(scene: Scene, end: Callable[[], None], mp: pytest.MonkeyPatch) -> None:
    # The host manager adopted the runs; the reconcile is the next call.
    real = scene.hm.adopt_hosts

    def adopt_hosts(runs: Any) -> None:
        real(runs)
        hook()

    def ended_and_polled() -> None:
        end()
        scene.a.events.process_once(0.0)

    hook = once(ended_and_polled)
    mp.setattr(scene.hm, "adopt_hosts", adopt_hosts)
    take_over(scene)


def at_reconcile_asked(scene: Scene, end: Callable[[], None], mp: pytest.MonkeyPatch) -> None:
    # The host manager asked the agent to re-report; the agent has not answered yet.
    real = scene.hm.reconcile

    def reconcile(run_ids: Any = None, expected: Any = None) -> None:
        real(run_ids, expected)
        if run_ids:
            hook()

    hook = once(end)
    mp.setattr(scene.hm, "reconcile", reconcile)
    take_over(scene)


def at_reconciled(scene: Scene, end: Callable[[], None], mp: pytest.MonkeyPatch) -> None:
    take_over(scene)
    scene.a_rounds(2)
    assert scene.agent.reconciled and not scene.agent.asked
    end()


def at_poll_in_flight(scene: Scene, end: Callable[[], None], mp: pytest.MonkeyPatch) -> None:
    # A's poll names its old partitions; while it waits the runs end and A takes B's
    # partitions over (claim, ownership, deferral), and it returns after that.
    in_flight(scene, end, mp, recovered=False)


def at_poll_in_flight_recovered(scene: Scene, end: Callable[[], None],
                                mp: pytest.MonkeyPatch) -> None:
    # The same, the takeover's recovery (load, adopt, reconcile, the agent's answer) done
    # while the poll still waits: its re-reports are passed over by that poll.
    in_flight(scene, end, mp, recovered=True)


def in_flight(scene: Scene, end: Callable[[], None], mp: pytest.MonkeyPatch, *,
              recovered: bool) -> None:
    stream = scene.a.events.stream
    real = stream.poll

    def during() -> None:
        end()
        take_over(scene)
        if recovered:
            for greenlet in list(scene.a.recovery._takeovers):
                greenlet.join()
            scene.host_round()

    hook = once(during)

    def poll(limit: int, timeout: float, partitions: Any = None) -> Any:
        hook()
        return real(limit, timeout, partitions)

    mp.setattr(stream, "poll", poll)
    scene.a.events.process_once(0.0)


POINTS: dict[str, Callable[[Scene, Callable[[], None], pytest.MonkeyPatch], None]] = {
    "before the claim": at_before_claim,
    "claimed, not owned": at_claimed,
    "listing its jobs, not owned": at_listing,
    "deferred, not loaded": at_deferred,
    "while it loads": at_loading,
    "adopted, not reconciled": at_adopted,
    "reconcile asked, not answered": at_reconcile_asked,
    "after the reconcile": at_reconciled,
    "poll in flight across the claim": at_poll_in_flight,
    "poll in flight across the recovery": at_poll_in_flight_recovered,
}


@dataclass(frozen=True)
class Variant:
    """What else happens: B paused before acknowledging its RUNNING reports, B's consumer
    forgotten before or after the end, the agent's periodic resend with the end or
    between the host manager's reconcile and the agent's answer."""

    unacked_running: bool = False
    forgotten: str = ""  # "before" / "after" the end
    resend: str = ""  # "with end" / "before answer" / "every round"


VARIANTS = {
    "plain": Variant(),
    "B forgotten before the end": Variant(forgotten="before"),
    "B forgotten after the end": Variant(forgotten="after"),
    "agent resends with the end": Variant(resend="with end"),
    "B paused before acknowledging RUNNING": Variant(unacked_running=True),
    "B unacked RUNNING, agent resends with the end": Variant(unacked_running=True,
                                                             resend="with end"),
    "B unacked RUNNING, agent resends before answering": Variant(unacked_running=True,
                                                                 resend="before answer"),
    "agent resends before answering": Variant(resend="before answer"),
    "B unacked RUNNING, agent resends every round": Variant(unacked_running=True,
                                                            resend="every round"),
    "B forgotten after the end, agent resends every round": Variant(forgotten="after",
                                                                    resend="every round"),
}


@pytest.fixture
def scene(request: pytest.FixtureRequest) -> Iterator[Scene]:
    forgets = VARIANTS[request.node.callspec.params["variant"]].forgotten
    s = Scene(member_idle=MEMBER_IDLE if forgets else 60.0)
    try:
        yield s
    finally:
        s.close()


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("point", list(POINTS))
def test_a_run_ending_during_a_takeover_is_stored_ended_by_the_new_owner(
        scene: Scene, point: str, variant: str, monkeypatch: pytest.MonkeyPatch) -> None:
    how = VARIANTS[variant]
    scene.b_acks = not how.unacked_running
    scene.resending = how.resend == "every round"
    scene.start()
    # B is paused from here on: it never polls, acknowledges or writes again.

    def end() -> None:
        if how.forgotten == "before":
            scene.forget_b()
        scene.end()
        if how.resend == "with end":
            scene.agent.redeliver()
        if how.forgotten == "after":
            scene.forget_b()

    if how.resend == "before answer":
        real_answer = scene.agent.answer

        def answer() -> int:
            if scene.agent.asked:
                scene.agent.redeliver()  # the resend timer fires first
            return real_answer()

        monkeypatch.setattr(scene.agent, "answer", answer)
    POINTS[point](scene, end, monkeypatch)
    rounds = scene.a_rounds()
    assert scene.stored() == [(S.SUCCEEDED, 1)] * TASKS, (point, variant, rounds)
    # Each run launched once and never killed (as an orphan of a job not loaded yet).
    assert sorted(r for _, runs in scene.agent.launched for r in runs) == scene.run_ids()
    assert scene.agent.killed == []
    assert rounds < ROUNDS


def test_a_live_runs_report_read_while_its_partition_is_taken_over_does_not_kill_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # A new report of a live run (here a RUNNING again, as a health check's) read while A
    # lists the partitions' jobs: owned before they were deferred, the job was neither
    # cached nor deferred then, and A killed the run as an orphan's (app.py, `_drive`).
    scene = Scene()
    try:
        scene.start()
        real = scene.a.cache.active_ids

        def active_ids() -> list[str]:
            for run_id in scene.run_ids():
                scene.agent.report(run_id, S.RUNNING, HOST)
            scene.a.events.process_once(0.0)
            return real()

        monkeypatch.setattr(scene.a.cache, "active_ids", active_ids)
        take_over(scene)
        scene.a_rounds(3)
        assert scene.agent.killed == []
        assert scene.stored() == [(S.RUNNING, 1)] * TASKS
        scene.end()
        scene.a_rounds()
        assert scene.stored() == [(S.SUCCEEDED, 1)] * TASKS
    finally:
        scene.close()


# -- the rule the table found broken, on the stream alone -------------------------------------

@pytest.fixture
def lone() -> Iterator[tuple[HostManager, Agent]]:
    """A host manager over the agent, connected, nothing else."""
    store = open_store("sqlite://", StoreOptions(bootstrap=True, sqlite_threads=0))
    agent = Agent()
    agent.add_host(HOST)
    hm = HostManager(store, agent, HostManagerConfig(consumers=("jobmgr",)))
    hm.connect()
    hm.settle()
    agent.answer()
    try:
        yield hm, agent
    finally:
        store.close()


def test_a_reconciled_run_streams_its_end_again_not_an_older_report_resent_first(
        lone: tuple[HostManager, Agent]) -> None:
    # The paused owner never acknowledged the run's RUNNING: the agent resends it, oldest
    # first, and it reaches the host manager between the takeover's reconcile and the
    # agent's re-report of the end.  Streamed in the end's place, it left the end a
    # duplicate and the new owner never learnt it (hostmgr/events.py, `redeliver`).
    hm, agent = lone
    paused, taker = hm.subscribe("jobmgr@m2"), hm.subscribe("jobmgr@m1")
    run_id = str(RunId(job_in(B_HOLDS[0], COUNT), 0, 1))
    agent.report(run_id, S.RUNNING, HOST)
    agent.report(run_id, S.SUCCEEDED, HOST)
    taker.poll(10, 0.0)
    taker.acknowledge(taker.position)  # passed over: not its partition yet
    assert paused.position == 0  # paused: holds both back
    hm.reconcile([run_id], [S.RUNNING])  # the end is what the books hold: re-reported
    agent.redeliver()  # RUNNING, then SUCCEEDED, each with its uuid
    streamed = taker.poll(10, 0.0)
    assert [e.state for e in streamed] == [S.SUCCEEDED]
    agent.answer()  # the re-report after: a duplicate, the end is streamed already
    assert taker.poll(10, 0.0) == []


def test_a_non_terminal_report_of_a_run_whose_end_was_trimmed_is_not_streamed_again(
        lone: tuple[HostManager, Agent]) -> None:
    hm, agent = lone
    consumer = hm.subscribe("jobmgr")
    run_id = str(RunId(job_in(0, COUNT), 0, 1))
    running = agent.report(run_id, S.RUNNING, HOST)
    ended = agent.report(run_id, S.SUCCEEDED, HOST)
    consumer.poll(10, 0.0)
    consumer.acknowledge(consumer.position)  # both trimmed
    hm.events.redeliver([run_id])
    hm.intake.status_update(running)  # a late resend of the RUNNING: acknowledged again
    hm.intake.status_update(ended)  # the end: streamed again, as the reconcile asked
    assert [e.state for e in consumer.poll(10, 0.0)] == [S.SUCCEEDED]
