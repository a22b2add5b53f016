"""The Mesos backend against the fake master (tests/harness/fake_mesos.py): what is Mesos-specific.

Offers and capacity, waiting for room, acknowledgements only on acknowledge(),
failover and restarts as the same framework, agents going away, reconciliation.
The common contract is in tests/contract/test_host_backend.py.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from peloton.core.errors import Unavailable
from peloton.core.model.resources import PortRange, Resources
from peloton.core.states import TaskState
from peloton.hostmgr.backends.mesos import MesosBackend, MesosConfig
from peloton.hostmgr.backends.mesos_wire import uuid_to_json
from tests.harness.agents import Recorder, task
from tests.harness.fake_mesos import DEFAULT_AGENTS, FakeMesosMaster
from tests.harness.fake_mesos_agent import AgentSpec, scalar
from tests.harness.procs import wait_for

S = TaskState
FAST = {"tick_secs": 0.05, "resend_secs": 0.3, "agent_refresh_secs": 0.5}


@dataclass
class Ids:
    """A stand-in for the `frameworks` table."""

    saved: list[tuple[str, str]] = field(default_factory=list)

    def load(self) -> str:
        return self.saved[-1][0] if self.saved else ""

    def save(self, framework_id: str, stream_id: str) -> None:
        self.saved.append((framework_id, stream_id))


@dataclass
class Rig:
    master: FakeMesosMaster
    backend: MesosBackend
    recorder: Recorder
    ids: Ids

    def calls(self, kind: str) -> list[dict[str, Any]]:
        return [c for c in self.master.calls if c["type"] == kind]

    def state(self, run_id: str, state: TaskState) -> None:
        self.recorder.wait_state(run_id, state, timeout=15)


def start_backend(master_url: str, recorder: Recorder, ids: Ids, **config: Any) -> MesosBackend:
    backend = MesosBackend(MesosConfig(master=master_url, **{**FAST, **config}),
                           load_framework_id=ids.load, save_framework_id=ids.save)
    recorder.backend = backend
    backend.start(recorder)
    return backend


@contextmanager
def mesos(tmp_path: Path, agents: tuple[AgentSpec, ...] = DEFAULT_AGENTS, auto_ack: bool = True,
          **config: Any) -> Iterator[Rig]:
    master = FakeMesosMaster(tmp_path / "mesos", agents, retry_secs=0.3).start()
    recorder, ids = Recorder(None, auto_ack), Ids()
    backend = start_backend(master.url, recorder, ids, **config)
    try:
        wait_for(lambda: len(recorder.hosts) == len(agents), 15, "hosts up")
        yield Rig(master, backend, recorder, ids)
    finally:
        backend.stop()
        master.stop()


def test_hosts_are_the_agents_and_offers_are_held_until_the_hold_time(tmp_path: Path) -> None:
    spec = AgentSpec("big", cpus=8, mem=1000, disk=500, ports=((31000, 31009),),
                     extra=(scalar("cpus", 2, role="peloton"), scalar("cpus", 1, revocable=True)))
    with mesos(tmp_path, (spec,), offer_hold_secs=1.0, decline_refuse_secs=0.2) as rig:
        host = rig.recorder.hosts["big"]
        assert host.capacity == Resources(cpu=10, mem_mb=1000, disk_mb=500)
        assert host.revocable_cpu == 1 and host.ports == (PortRange(31000, 31009),)
        assert [str(label) for label in host.labels] == ["rack=r1"]
        wait_for(lambda: len(rig.master.framework().offers) == 1, 5, "an offer held")
        assert rig.calls("DECLINE") == []
        wait_for(lambda: bool(rig.calls("DECLINE")), 5, "the offer declined after the hold time")
        assert rig.calls("DECLINE")[0]["decline"]["filters"] == {"refuse_seconds": 0.2}
        wait_for(lambda: len(rig.master.framework().offers) == 1, 5, "offered again")


def test_launch_waits_for_room_and_uses_resources_as_offered(tmp_path: Path) -> None:
    spec = AgentSpec("h", cpus=1, extra=(scalar("cpus", 2, role="peloton"),))
    with mesos(tmp_path, (spec,)) as rig:
        first, second = task("sleep 30", grace=0.1), task("true")
        first = type(first)(first.run_id, type(first.spec)(
            resources=Resources(cpu=2.5), command=first.spec.command, kill_grace_period_secs=0.1))
        rig.backend.launch("h", [first])
        rig.state(first.run_id, S.RUNNING)
        accepted = rig.calls("ACCEPT")[0]["accept"]
        cpus = sorted((r["role"], r["scalar"]["value"])
                      for r in accepted["operations"][0]["launch"]["task_infos"][0]["resources"])
        assert cpus == [("*", 1.0), ("peloton", 1.5)]
        assert accepted["filters"] == {"refuse_seconds": 0.0}
        second = type(second)(second.run_id, type(second.spec)(
            resources=Resources(cpu=1.0), command=second.spec.command))
        rig.backend.launch("h", [second])  # 0.5 cpus free: it waits for the first to end
        assert not rig.recorder.of(second.run_id)
        rig.backend.kill("h", [first.run_id], 0.1)
        rig.state(second.run_id, S.SUCCEEDED)


def test_a_run_no_offer_has_room_for_fails_and_a_waiting_run_can_be_killed(tmp_path: Path) -> None:
    with mesos(tmp_path, launch_wait_secs=0.5) as rig:
        huge, other = task("true"), task("true")
        huge = type(huge)(huge.run_id, type(huge.spec)(resources=Resources(cpu=100)))
        other = type(other)(other.run_id, type(other.spec)(resources=Resources(cpu=100)))
        rig.backend.launch("mesos-agent-0", [huge, other])
        rig.backend.kill("mesos-agent-0", [other.run_id], 0.1)
        failed = rig.recorder.wait_state(huge.run_id, S.FAILED)
        assert failed.reason == "REASON_INVALID_OFFERS" and "no Mesos offer" in failed.message
        assert rig.recorder.states(other.run_id) == [S.KILLED]
        assert rig.calls("ACCEPT") == []


def test_updates_are_acknowledged_only_when_the_host_manager_says_so(tmp_path: Path) -> None:
    with mesos(tmp_path, auto_ack=False) as rig:
        launch = task("true")
        rig.backend.launch("mesos-agent-0", [launch])
        wait_for(lambda: len(rig.recorder.of(launch.run_id)) >= 3, 10, "STARTING re-sent")
        starting = rig.recorder.of(launch.run_id)
        assert {u.uuid for u in starting} == {starting[0].uuid}  # the same update, again
        assert starting[0].state is S.STARTING and rig.master.acks == []
        rig.backend.acknowledge([starting[0]])
        rig.recorder.wait_state(launch.run_id, S.RUNNING)
        assert rig.master.acks == [(launch.run_id, uuid_to_json(starting[0].uuid))]


def test_master_failover_resubscribes_as_the_same_framework(tmp_path: Path) -> None:
    with mesos(tmp_path) as rig:
        before = task("sleep 30", grace=0.1)
        rig.backend.launch("mesos-agent-0", [before])
        rig.state(before.run_id, S.RUNNING)
        rig.master.fail_over()
        wait_for(lambda: len(rig.ids.saved) == 2, 10, "subscribed again")
        (first_id, first_stream), (second_id, second_stream) = rig.ids.saved
        assert first_id == second_id and first_stream != second_stream
        after = task("true")
        wait_for(lambda: _launched(rig, after), 10, "launch accepted after the failover")
        rig.state(after.run_id, S.SUCCEEDED)
        rig.backend.kill("mesos-agent-0", [before.run_id], 0.1)  # still there, still ours
        rig.state(before.run_id, S.KILLED)


def test_a_master_that_is_down_for_a_while_is_reconnected(tmp_path: Path) -> None:
    with mesos(tmp_path) as rig:
        rig.master.pause()
        wait_for(lambda: not rig.backend.subscribed, 10, "the backend sees the master gone")
        with pytest.raises(Unavailable):
            rig.backend.launch("mesos-agent-0", [task("true")])
        time.sleep(0.5)  # down long enough for the link to be refused and back off
        rig.master.resume()
        wait_for(lambda: rig.backend.subscribed, 20, "subscribed again")
        assert len({fid for fid, _ in rig.ids.saved}) == 1


def test_a_silent_stream_is_replaced(tmp_path: Path) -> None:
    master = FakeMesosMaster(tmp_path / "mesos", heartbeat_secs=0.2).start()
    try:
        recorder, ids = Recorder(), Ids()
        backend = start_backend(master.url, recorder, ids)
        wait_for(lambda: len(ids.saved) == 1, 10, "subscribed")
        master.mute()  # no heartbeat for three intervals: the backend subscribes again
        wait_for(lambda: len(ids.saved) == 2, 10, "subscribed on a new stream")
        assert master.subscriptions == 2 and ids.saved[0][0] == ids.saved[1][0]
        backend.stop()
    finally:
        master.stop()


def test_a_restarted_backend_is_the_same_framework_and_tasks_survive(tmp_path: Path) -> None:
    with mesos(tmp_path) as rig:
        launch = task("sleep 30", grace=0.1)
        rig.backend.launch("mesos-agent-1", [launch])
        rig.state(launch.run_id, S.RUNNING)
        rig.backend.stop()
        assert rig.calls("TEARDOWN") == []
        proc = rig.master.agent("mesos-agent-1").tasks[launch.run_id].proc
        assert proc is not None and proc.poll() is None
        recorder = Recorder()
        rig.backend = start_backend(rig.master.url, recorder, rig.ids, **FAST)
        wait_for(lambda: "mesos-agent-1" in recorder.hosts, 10, "hosts again")
        rig.backend.reconcile(None)
        again = recorder.wait_state(launch.run_id, S.RUNNING)
        assert again.reason == "REASON_RECONCILIATION" and len(rig.master.frameworks) == 1
        rig.backend.kill("mesos-agent-1", [launch.run_id], 0.1)
        recorder.wait_state(launch.run_id, S.KILLED)


def test_agents_that_go_away_are_hosts_gone(tmp_path: Path) -> None:
    with mesos(tmp_path) as rig:
        launch = task("sleep 30")
        rig.backend.launch("mesos-agent-2", [launch])
        rig.state(launch.run_id, S.RUNNING)
        rig.master.remove_agent("mesos-agent-2")
        lost = rig.recorder.wait_state(launch.run_id, S.LOST)
        assert lost.reason == "REASON_AGENT_REMOVED" and lost.hostname == "mesos-agent-2"
        wait_for(lambda: ("mesos-agent-2", "the Mesos master lost the agent") in rig.recorder.gone,
                 5, "host gone on FAILURE")
        rig.master.disconnect_agent("mesos-agent-0")
        wait_for(lambda: any(h == "mesos-agent-0" for h, _ in rig.recorder.gone), 5,
                 "host gone when its agent disconnects")
        rig.master.disconnect_agent("mesos-agent-0", connected=True)
        wait_for(lambda: rig.recorder.host_ups.count("mesos-agent-0") == 2, 5, "host up again")


def test_reconcile_names_runs_with_their_agent_or_asks_for_all(tmp_path: Path) -> None:
    with mesos(tmp_path, auto_ack=False) as rig:
        ghost = f"{task('x').run_id}"
        rig.backend.reconcile([ghost])
        lost = rig.recorder.wait_state(ghost, S.LOST)
        wait_for(lambda: len(rig.recorder.of(ghost)) >= 2, 5, "the answer re-delivered")
        assert {u.uuid for u in rig.recorder.of(ghost)} == {lost.uuid}
        rig.backend.acknowledge([lost])
        assert rig.master.acks == []  # a reconciliation answer is not Mesos' to forget
        rig.backend.reconcile(None)
        wait_for(lambda: any(not c["reconcile"]["tasks"] for c in rig.calls("RECONCILE")), 5,
                 "an implicit RECONCILE")
        named = [c["reconcile"]["tasks"] for c in rig.calls("RECONCILE") if c["reconcile"]["tasks"]]
        assert named == [[{"task_id": {"value": ghost}}]]


def test_a_removed_framework_registers_anew(tmp_path: Path) -> None:
    with mesos(tmp_path) as rig:
        old = rig.ids.saved[-1][0]
        with rig.master.lock:
            rig.master._on_teardown(rig.master.framework(), {})  # an operator's teardown
        wait_for(lambda: rig.ids.saved[-1][0] not in ("", old), 15, "a new framework id")
        assert ("", "") in rig.ids.saved


def test_a_standby_master_redirects_to_the_leader(tmp_path: Path) -> None:
    with mesos(tmp_path) as rig:
        standby = FakeMesosMaster(tmp_path / "standby", (), redirect_to=rig.master.address).start()
        try:
            recorder = Recorder()
            other = start_backend(standby.url, recorder, Ids(), framework_name="other")
            wait_for(lambda: len(recorder.hosts) == 3, 15, "the leader's agents")
            other.stop()
        finally:
            standby.stop()


def test_refused_subscriptions_are_retried_without_touching_the_process(
        tmp_path: Path) -> None:
    before = signal.getsignal(signal.SIGINT)
    master = FakeMesosMaster(tmp_path / "mesos", retry_secs=0.3).start()
    master.fail_subscribes = 3  # HTTP 500 three times, then the master subscribes us
    try:
        recorder, ids = Recorder(), Ids()
        backend = start_backend(master.url, recorder, ids)
        wait_for(lambda: len(recorder.hosts) == 3, 15, "subscribed on the fourth try")
        assert signal.getsignal(signal.SIGINT) is before  # no handler of the driver's own
        backend.stop()
    finally:
        master.stop()


def _launched(rig: Rig, launch: Any) -> bool:
    try:
        rig.backend.launch("mesos-agent-0", [launch])
        return True
    except Unavailable:
        return False


def test_a_second_scheduler_with_the_framework_id_takes_over_and_the_first_stays_away(
        tmp_path: Path) -> None:
    # A host manager failover: the new leader subscribes with the stored framework id while
    # the old one may still hold the stream.  The master tells the old one "Framework failed
    # over"; it must not subscribe again (it would take the framework back), and the new one
    # learns the running task by reconciliation.
    with mesos(tmp_path) as rig:
        launch = task("sleep 30", grace=0.1)
        rig.backend.launch("mesos-agent-0", [launch])
        rig.state(launch.run_id, S.RUNNING)
        recorder = Recorder()
        standby = start_backend(rig.master.url, recorder, rig.ids)
        try:
            again = recorder.wait_state(launch.run_id, S.RUNNING)
            assert again.reason == "REASON_RECONCILIATION"
            assert len(rig.master.frameworks) == 1 and len({f for f, _ in rig.ids.saved}) == 1
            wait_for(lambda: not rig.backend.subscribed, 5, "the first scheduler cut off")
            time.sleep(1.0)  # several of the first one's ticks: it stays away
            assert rig.master.subscriptions == 2 and standby.subscribed
            standby.kill("mesos-agent-0", [launch.run_id], 0.1)
            recorder.wait_state(launch.run_id, S.KILLED)
        finally:
            standby.stop()


def test_a_framework_away_longer_than_its_failover_timeout_is_removed(tmp_path: Path) -> None:
    with mesos(tmp_path, failover_timeout_secs=0.5) as rig:
        launch = task("sleep 30", grace=0.1)
        rig.backend.launch("mesos-agent-1", [launch])
        rig.state(launch.run_id, S.RUNNING)
        old = rig.ids.saved[-1][0]
        rig.backend.stop()
        proc = rig.master.agent("mesos-agent-1").tasks[launch.run_id].proc
        assert proc is not None
        wait_for(lambda: old in rig.master.removed, 10, "the master to remove the framework")
        wait_for(lambda: proc.poll() is not None, 10, "its task killed")
        recorder = Recorder()
        rig.backend = start_backend(rig.master.url, recorder, rig.ids, failover_timeout_secs=0.5)
        # "Framework has been removed": the backend registers as a new framework.
        wait_for(lambda: rig.ids.saved[-1][0] not in ("", old), 15, "a new framework id")
        wait_for(lambda: len(recorder.hosts) == 3, 10, "hosts under the new framework")
