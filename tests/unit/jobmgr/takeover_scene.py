"""The scene of the partition-takeover tables (test_takeover_run_end.py,
test_handover_run_end.py): two all-active job manager members over one store and ONE real
in-process host manager (peloton/hostmgr/app.py: its real status stream, books and
reconcile) over an agent-like fake backend, and the fake resource manager.

The agent is modelled on peloton/agent: an update stays unacknowledged until the host
manager acknowledges it (the stream trims it only once every consumer acknowledged it, so a
paused member holds it back until it is forgotten as idle), a periodic resend sends every
unacknowledged update again, oldest first, with its uuid, and a reconcile re-publishes a
run's latest update with its uuid (a run whose end was acknowledged is re-reported from its
sandbox, afresh).  The agent answers a reconcile when the test says (`answer`), as a real
one answers a moment after the host manager asked.  Member A (`m1`) holds `A_HOLDS`, member
B (`m2`) `B_HOLDS`; B's job is the one that moves.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import cast

import gevent

from peloton.common.clock import FakeClock
from peloton.common.retry import NO_RETRY, Retrier
from peloton.core.model.ids import RunId
from peloton.core.ports import HostManagerPort
from peloton.core.states import HostState, JobType, TaskState
from peloton.hostmgr.app import HostManager
from peloton.hostmgr.backends.base import StatusUpdate
from peloton.hostmgr.config import HostManagerConfig
from peloton.jobmgr.app import JobManager
from peloton.jobmgr.config import JobManagerConfig
from peloton.storage import StoreOptions, open_store
from peloton.storage.partition_fences import PartitionFences
from tests.fakes.hostmgr import FakeHostManager
from tests.fakes.resmgr import FakeResourceManager
from tests.harness.fake_host_backend import FakeBackend
from tests.harness.partition_ids import job_in
from tests.unit.jobmgr.harness import job_spec

S = TaskState
COUNT = 4
A_HOLDS, B_HOLDS = (0, 1), (2, 3)
TASKS = 3
HOST = "h1"
#: A's rounds the takeover and the end may take, at most.
ROUNDS = 30
#: The host manager forgets a silent member after this long (short here, so forgetting
#: the paused member never also outlives a reconcile's 60 s redeliver window).
MEMBER_IDLE = 5.0


@dataclass
class Agent(FakeBackend):
    """The fake backend as our agent behaves (module docstring)."""

    #: Run id -> the run's latest update.
    last: dict[str, StatusUpdate] = field(default_factory=dict)
    #: Reconciles asked and not answered yet (None: every run).
    asked: list[list[str] | None] = field(default_factory=list)

    def report(self, run_id: str, state: TaskState, hostname: str = "",
               **extra: object) -> StatusUpdate:
        update = super().report(run_id, state, hostname, **extra)
        self.last[run_id] = update
        return update

    def reconcile(self, run_ids: Sequence[str] | None = None) -> None:
        if run_ids is not None and not run_ids:
            return  # an empty reconcile (a member announcing its epochs) asks for nothing
        self.reconciled.append(None if run_ids is None else list(run_ids))
        self.asked.append(None if run_ids is None else list(run_ids))

    def answer(self) -> int:
        """Answer the reconciles asked so far; returns how many."""
        asked, self.asked = self.asked, []
        for run_ids in asked:
            for run_id in list(self.runs) if run_ids is None else run_ids:
                last = self.last.get(run_id)
                if last is None:
                    if run_id not in self.runs:
                        self.report(run_id, S.LOST, "")
                elif last.uuid in self.unacked or not last.state.terminal:
                    self.unacked[last.uuid] = last  # pending again until acknowledged
                    assert self.listener is not None
                    self.listener.status_update(last)
                else:  # ended and acknowledged: forgotten, re-reported from its sandbox
                    self.report(run_id, last.state, last.hostname, exit_code=last.exit_code)
        return len(asked)


@dataclass
class Spot:
    """A host as the fake resource manager places on it."""

    hostname: str
    agent_id: str
    state: HostState = HostState.UP


@dataclass
class Spots:
    """The hosts the fake resource manager places on (it reads `hosts` only)."""

    hosts: dict[str, Spot]


class Scene:
    """The store, the host manager, the agent, the resource manager and the two members."""

    def __init__(self, *, member_idle: float = 60.0) -> None:
        self.clock = FakeClock()
        self.store = open_store("sqlite://", StoreOptions(
            bootstrap=True, retrier=Retrier(NO_RETRY), clock=self.clock.wall,
            sqlite_threads=0))
        self.agent = Agent()
        # The fake agent stamps its n-th report n seconds after the epoch: from the fake
        # clock's now on instead, as a host stamps its time (a STARTING stored unended, as
        # a leaver's `store_kept` does, is timed out by the new owner from that stamp).
        self.agent._seq = int(self.clock.wall())
        self.agent.add_host(HOST, cpu=16, mem_mb=16384)
        self.hm = HostManager(self.store, self.agent, HostManagerConfig(
            consumers=("jobmgr",), recovery_grace=0.0, member_idle_timeout=member_idle),
            clock=self.clock)
        self.hm.connect()
        self.hm.settle()
        self.agent.answer()
        spots = Spots({HOST: Spot(HOST, f"agent-{HOST}")})
        self.rm = FakeResourceManager(cast(FakeHostManager, spots))
        self.config = JobManagerConfig()
        self.a = self.member("m1")
        self.b = self.member("m2")
        self.a.acquire_partitions(dict.fromkeys(A_HOLDS, 10))
        self.b.acquire_partitions(dict.fromkeys(B_HOLDS, 10))
        self.job_id = job_in(B_HOLDS[0], COUNT)
        #: B's round acknowledges the stream (False: B is paused after storing, unacked).
        self.b_acks = True
        #: The agent's resend timer fires in every one of A's rounds.
        self.resending = False

    def member(self, name: str) -> JobManager:
        """A member as members.py wires one: its partitions' fences, its own consumer."""
        return JobManager(self.store, self.rm, cast(HostManagerPort, self.hm), self.config,
                          clock=self.clock, fences=PartitionFences(self.store, name,
                                                                   count=COUNT),
                          member=name)

    def close(self) -> None:
        """Release the store."""
        self.store.close()

    # -- the run's side -----------------------------------------------------------------------
    def run_ids(self) -> list[str]:
        """The job's runs (each task's first)."""
        return [str(RunId(self.job_id, i, 1)) for i in range(TASKS)]

    def end(self) -> None:
        """Every run exits 0: the agent reports it."""
        for run_id in self.run_ids():
            self.agent.report(run_id, S.SUCCEEDED, HOST, exit_code=0)

    def forget_b(self) -> None:
        """The paused B's consumer is silent for longer than `member_idle`: A is heard from
        (it polls and acknowledges all the time) and the host manager forgets B."""
        self.clock.advance(MEMBER_IDLE + 1.0)
        consumer = "jobmgr@m1"
        self.hm.events.register(consumer)
        self.hm.events.acknowledge(consumer, self.hm.events.acknowledged()[consumer])
        assert "jobmgr@m2" not in self.hm.events.acknowledged()

    # -- stepping -----------------------------------------------------------------------------
    def b_round(self) -> int:
        """One round of B's work, before it is paused."""
        return self.b.run_due()

    def host_round(self) -> int:
        """The host manager's deferred work (acknowledgements to the agent) and the agent's
        answers to reconciles."""
        done = self.hm.run_due()
        done += self.agent.answer()
        return done

    def launch(self) -> None:
        """B creates the job and launches its runs; both members step (A passes B's events
        over)."""
        self.b.jobs.create(job_spec(TASKS, JobType.BATCH, command="sleep 8"), self.job_id)
        for _ in range(10):
            self.b_round()
            self.a.run_due()
            self.host_round()
        launched = sorted(r for _, runs in self.agent.launched for r in runs)
        assert launched == self.run_ids()

    def start(self) -> None:
        """B creates the job and runs it (`launch`, then every run STARTING and RUNNING)."""
        self.launch()
        for state in (S.STARTING, S.RUNNING):
            if state is S.RUNNING and not self.b_acks:  # paused right after storing them
                self.b.events.stream.acknowledge = lambda offset: None  # type: ignore[method-assign]
            self.settle(state)
        assert self.stored() == [(S.RUNNING, 1)] * TASKS

    def settle(self, *states: S) -> None:
        """The agent reports `states` of every run; both members step until they are
        applied (B owns them)."""
        for state in states:
            for run_id in self.run_ids():
                self.agent.report(run_id, state, HOST)
            for _ in range(3):
                self.b_round()
                self.a.run_due()
                self.host_round()

    def a_rounds(self, rounds: int = ROUNDS) -> int:
        """A's rounds (with the host manager's work and the takeover's recovery greenlet
        in between) until every task is stored ended or `rounds` pass; returns the rounds."""
        for n in range(1, rounds + 1):
            gevent.sleep(0)
            for greenlet in list(self.a.recovery._takeovers):
                greenlet.join()
            if self.resending:
                self.agent.redeliver()
            self.host_round()
            self.a.run_due()
            self.host_round()
            if all(state.terminal for state, _ in self.stored()):
                return n
        return rounds

    def stored(self) -> list[tuple[TaskState, int]]:
        """(state, run) of every task as stored, in instance order."""
        return [(rt.state, rt.run_id)
                for _, rt in sorted(self.store.get_task_runtimes(self.job_id).items())]


def once(action: Callable[[], None]) -> Callable[..., None]:
    """`action` the first time the hook is called, nothing after."""
    done: list[bool] = []

    def hook(*_args: object) -> None:
        if not done:
            done.append(True)
            action()

    return hook
