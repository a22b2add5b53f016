"""Dynamic uids are exclusive on the machine, not only within one agent (issue 23, item 5).

The allocation rule (uidpool.py) over a fake machine-wide lock table, shown to fail without
the table; the lock files (uidlocks.py) in a temporary directory; and two executors, as two
agents on one machine, sharing one lock directory.
"""

from __future__ import annotations

import os
import random
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from peloton.agent.identity import IdentityPolicy
from peloton.agent.uidlocks import UidLockDir, machine_dir
from peloton.agent.uidpool import UidClaims, Unshared, pick_uid, scan
from peloton.core.errors import FailedPrecondition

FIRST, LAST = 70000, 70007


class FakeLockTable:
    """The machine's uid locks as a dict: uid -> (agent, run).  `for_agent` is one agent's
    view of it (a uidpool.UidClaims); an agent's death drops its locks, as flock does."""

    def __init__(self) -> None:
        self.locks: dict[int, tuple[str, str]] = {}

    def for_agent(self, agent: str) -> UidClaims:
        table = self

        class View:
            def claim(self, uid: int, holder: str) -> bool:
                if uid in table.locks:
                    return table.locks[uid] == (agent, holder)
                table.locks[uid] = (agent, holder)
                return True

            def reclaim(self, uid: int, holder: str) -> bool:
                return self.claim(uid, holder)

            def release(self, uid: int, holder: str) -> None:
                if table.locks.get(uid) == (agent, holder):
                    del table.locks[uid]

        return View()


class Agent:
    """One agent's side of the allocation: its live runs, its cursor, its claims."""

    def __init__(self, claims: UidClaims) -> None:
        self.claims = claims
        self.live: dict[str, int] = {}
        self.cursor = FIRST

    def launch(self) -> int | None:
        run = str(uuid.uuid4())
        uid = pick_uid(FIRST, LAST, start=self.cursor, in_use=set(self.live.values()),
                       known=lambda _uid: False, claim=lambda u: self.claims.claim(u, run))
        if uid is not None:
            self.live[run] = uid
            self.cursor = uid + 1
        return uid

    def end(self, rng: random.Random) -> None:
        if self.live:
            run = rng.choice(sorted(self.live))
            self.claims.release(self.live.pop(run), run)


def shared_uids(make: Callable[[str], UidClaims], steps: int = 400) -> set[int]:
    """Two agents launching and ending runs at random; every uid both had live at once."""
    rng = random.Random(7)
    a, b = Agent(make("a")), Agent(make("b"))
    shared: set[int] = set()
    for _ in range(steps):
        agent = rng.choice((a, b))
        if rng.random() < 0.6:
            agent.launch()
        else:
            agent.end(rng)
        shared |= set(a.live.values()) & set(b.live.values())
    return shared


def test_two_agents_sharing_the_machines_lock_table_never_share_a_uid() -> None:
    table = FakeLockTable()
    assert shared_uids(table.for_agent) == set()


def test_without_the_machine_wide_lock_two_agents_hand_out_the_same_uids() -> None:
    # What happened before the lock (two clusters' tasks ran as 70000-70003 twice): the
    # test above would fail with claims that never refuse.
    assert shared_uids(lambda _agent: Unshared())


def test_a_uid_another_agent_holds_is_skipped_and_comes_back_when_its_run_ends() -> None:
    table = FakeLockTable()
    a, b = Agent(table.for_agent("a")), Agent(table.for_agent("b"))
    assert [a.launch(), a.launch()] == [70000, 70001]
    assert b.launch() == 70002
    run = next(r for r, u in a.live.items() if u == 70000)
    b.claims.release(70000, run)  # not b's to give back: nothing happens
    assert table.locks[70000][0] == "a"
    a.claims.release(70000, run)
    b.cursor = FIRST
    assert b.launch() == 70000


def test_the_range_is_exhausted_when_every_free_uid_is_held_elsewhere() -> None:
    table = FakeLockTable()
    other = table.for_agent("other")
    for uid in range(FIRST, LAST + 1):
        assert other.claim(uid, f"run-{uid}")
    mine = table.for_agent("mine")
    policy = IdentityPolicy(dynamic_uids=(FIRST, LAST))
    if not policy.can_switch:
        pytest.skip("only an agent running as root hands out dynamic uids")
    with pytest.raises(FailedPrecondition, match="no free dynamic uid"):
        policy.resolve("", (), claim=lambda uid: mine.claim(uid, "x"))


def test_the_scan_starts_at_the_cursor_and_wraps() -> None:
    assert list(scan(1, 5, 3)) == [3, 4, 5, 1, 2]
    assert list(scan(1, 5, 99)) == [1, 2, 3, 4, 5]


# -- the lock files -------------------------------------------------------------------------------
def test_a_uid_locked_by_one_holder_cannot_be_claimed_through_another_lock_dir(tmp_path: Path) -> None:
    first, second = UidLockDir(tmp_path), UidLockDir(tmp_path)
    try:
        assert first.claim(70000, "/s/run-1")
        assert first.claim(70000, "/s/run-1")  # already its own
        assert not first.claim(70000, "/s/run-2")
        assert not second.claim(70000, "/s/run-3")
        first.release(70000, "/s/run-2")  # not the holder: still held
        assert not second.claim(70000, "/s/run-3")
        first.release(70000, "/s/run-1")
        assert second.claim(70000, "/s/run-3")
        assert (tmp_path / "70000.lock").read_text() == "/s/run-3\n"
        assert oct((tmp_path / "70000.lock").stat().st_mode & 0o777) == "0o600"
    finally:
        first.close()
        second.close()


def test_a_run_that_outlived_its_agent_keeps_its_uid(tmp_path: Path) -> None:
    alive = {"/s/run-1"}
    dead_agent = UidLockDir(tmp_path)
    assert dead_agent.claim(70000, "/s/run-1")
    dead_agent.close()  # as the kernel does on kill -9: the lock goes, the file stays
    other = UidLockDir(tmp_path, alive=lambda sandbox: sandbox in alive)
    assert not other.claim(70000, "/s/run-2")  # its supervisor still lives
    restarted = UidLockDir(tmp_path, alive=lambda sandbox: sandbox in alive)
    assert restarted.reclaim(70000, "/s/run-1")  # the adopting agent takes it back
    restarted.close()
    alive.clear()  # the run ended while no agent was there
    assert other.claim(70000, "/s/run-2")
    other.close()


def test_reclaim_waits_for_another_agents_check(tmp_path: Path) -> None:
    checker = UidLockDir(tmp_path)
    assert checker.claim(70001, "/s/run-9")
    pauses: list[float] = []

    def sleep(secs: float) -> None:
        pauses.append(secs)
        checker.release(70001, "/s/run-9")

    restarted = UidLockDir(tmp_path, sleep=sleep)
    assert restarted.reclaim(70001, "/s/run-1") and len(pauses) == 1
    restarted.close()


def test_the_lock_directory_is_the_first_usable_one_and_an_open_one_is_refused(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("")
    assert machine_dir((blocked / "uids", tmp_path / "b" / "uids")) == tmp_path / "b" / "uids"
    assert machine_dir((tmp_path / "b" / "uids",)) == tmp_path / "b" / "uids"  # every agent alike
    with pytest.raises(FailedPrecondition, match="no directory"):
        machine_dir((blocked / "uids",))
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    with pytest.raises(FailedPrecondition, match="writable by nobody else"):
        machine_dir((shared, tmp_path / "b" / "uids"))


# -- two executors, as two agents on one machine --------------------------------------------------
class _Spawner:
    command = ["peloton-supervisor"]

    def spawn(self, data: bytes) -> None:
        pass


def test_two_executors_on_one_lock_dir_hand_out_disjoint_uids_and_free_them_at_the_end(
        tmp_path: Path) -> None:
    from peloton.agent.executor import Executor
    from peloton.agent.isolation import MemoryIsolation
    from peloton.agent.model import RunSpec
    from peloton.agent.reporter import StatusReporter
    from peloton.agent.sandbox import Sandboxes, SupervisorRecord
    from peloton.core.model.task import CommandSpec
    from peloton.core.states import TaskState

    policy = IdentityPolicy(dynamic_uids=(70000, 70003))
    if not policy.can_switch:
        pytest.skip("only an agent running as root hands out dynamic uids")
    locks = tmp_path / "uids"
    locks.mkdir()
    executors = []
    for name in ("a", "b"):
        work = tmp_path / name
        work.mkdir()
        executors.append(Executor(
            sandboxes=Sandboxes(work), isolation=MemoryIsolation("rlimit"),
            spawner=_Spawner(), reporter=StatusReporter(lambda batch: True),  # type: ignore[arg-type]
            fifo=work / "notify", identities=policy, uid_claims=UidLockDir(locks)))
    a, b = executors

    def launch(executor: Executor) -> str:
        rid = f"{uuid.uuid4()}-0-1"
        executor.launch([RunSpec(run_id=rid, command=CommandSpec("sleep 1"))])
        return rid

    runs = {e: [launch(e), launch(e)] for e in (a, b)}
    uids = {e: {e.runs[r].spec.uid for r in rs} for e, rs in runs.items()}  # type: ignore[union-attr]
    assert uids[a].isdisjoint(uids[b]) and uids[a] | uids[b] == set(range(70000, 70004))
    full = launch(a)
    refusal = a.runs[full].last
    assert refusal is not None and refusal.state is TaskState.FAILED
    assert "no free dynamic uid" in refusal.message

    ended = runs[b][0]
    freed = b.runs[ended].spec.uid  # type: ignore[union-attr]
    record = SupervisorRecord.parse(f"state=exited run={ended} supervisor=1 pid=2 code=0\n")
    assert record is not None
    b.on_record(record)
    again = launch(a)
    assert a.runs[again].spec.uid == freed  # type: ignore[union-attr]
    for executor in executors:
        assert isinstance(executor.uid_claims, UidLockDir)
        executor.uid_claims.close()
