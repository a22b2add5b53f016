"""One contract, every host backend: local agents (real processes), simulated hosts,
Mesos (our HTTP client against the fake master of tests/harness/fake_mesos.py, whose agents run
real processes), and Kubernetes (a real kube-apiserver and etcd, kwok's fake nodes, the backend
signed in as the least-privilege service account of docs/deploy/kubernetes/rbac.yaml).

Each test gets a `rig`: a started backend with one host, a Recorder as its
listener, and `settle(predicate)`, which waits (local, mesos: polls real time;
sim: advances a manual clock) until the predicate holds.  Task commands
are shell lines; the simulated backend is given a behaviour that reads
`exit N` and `sleep N` from them, and on Kubernetes the same words become the
annotations kwok's stages end a pod by (tests/harness/kwok_stages.yaml), so all run
the same tests.
"""

from __future__ import annotations

import random
import re
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from peloton.agent.app import AgentApp
from peloton.agent.config import AgentConfig
from peloton.api.grpc_server import GrpcServer
from peloton.core.errors import NotFound
from peloton.core.model.constraints import Label
from peloton.core.model.sched import LaunchSpec
from peloton.core.states import TaskState
from peloton.hostmgr.backends.base import HostBackend, StatusUpdate
from peloton.hostmgr.backends.k8s import KubeBackend
from peloton.hostmgr.backends.k8s_config import KubeConfig
from peloton.hostmgr.backends.local import LocalBackend
from peloton.hostmgr.backends.mesos import MesosBackend, MesosConfig
from peloton.hostmgr.backends.sim import SimBackend, SimOutcome
from peloton.hostmgr.backends.sim_clock import ManualClock
from tests.harness.agents import Recorder, run_id, task
from tests.harness.fake_mesos import FakeMesosMaster
from tests.harness.kube import KubeControlPlane
from tests.harness.procs import wait_for

RESEND_SECS = 0.3


@dataclass
class Rig:
    """A started backend with one host and a recording listener."""

    backend: HostBackend
    recorder: Recorder
    hostname: str
    settle: Callable[[Callable[[], bool], str], None]
    quiesce: Callable[[], object]  # let every re-delivery that is due happen (result unused)


def _sim_behaviour(launch: LaunchSpec, rng: random.Random) -> SimOutcome:
    cmd = launch.spec.command.value
    code = re.search(r"exit (\d+)", cmd)
    sleep = re.search(r"sleep (\d+)", cmd)
    return SimOutcome(float(sleep.group(1)) if sleep else 0.0, int(code.group(1)) if code else 0)


def _sim_rig(auto_ack: bool) -> Iterator[Rig]:
    clock = ManualClock()
    backend = SimBackend(hosts=3, clock=clock, behaviour=_sim_behaviour, resend_secs=RESEND_SECS,
                         start_secs=0.05)
    recorder = Recorder(backend, auto_ack)
    backend.start(recorder)

    def settle(predicate: Callable[[], bool], what: str) -> None:
        for _ in range(2000):
            if predicate():
                return
            clock.advance(0.05)
        raise AssertionError(f"simulated time ran out waiting for {what}")

    settle(lambda: len(recorder.hosts) == 3, "hosts")
    yield Rig(backend, recorder, "sim-00001", settle, lambda: clock.advance(RESEND_SECS * 5))
    backend.stop()


def _local_rig(tmp_path: Path, auto_ack: bool) -> Iterator[Rig]:
    server = GrpcServer("127.0.0.1:0")
    backend = LocalBackend(heartbeat_secs=0.2, heartbeat_timeout_secs=5, reregister_grace_secs=0)
    backend.register_on(server)
    server.start()
    recorder = Recorder(backend, auto_ack)
    backend.start(recorder)
    name = f"contract-{uuid.uuid4().hex[:8]}"
    agent = AgentApp(AgentConfig(work_dir=tmp_path / "agent", name=name,
                                 hostmgr=f"127.0.0.1:{server.port}", resend_secs=RESEND_SECS,
                                 scan_secs=0.5))
    agent.start()

    def settle(predicate: Callable[[], bool], what: str) -> None:
        wait_for(predicate, 20, what)

    def quiesce() -> None:
        # Nothing left to re-send once the agent holds no unacknowledged update;
        # then give one resend period to show that nothing more arrives.
        wait_for(lambda: agent.reporter.pending_count() == 0, 10, "agent has nothing pending")
        time.sleep(RESEND_SECS * 3)

    try:
        settle(lambda: name in recorder.hosts, "agent registration")
        yield Rig(backend, recorder, name, settle, quiesce)
    finally:
        agent.stop(kill_tasks=True, grace_secs=0.1)
        backend.stop()
        server.stop(0)


def _mesos_rig(tmp_path: Path, auto_ack: bool) -> Iterator[Rig]:
    master = FakeMesosMaster(tmp_path / "mesos", retry_secs=RESEND_SECS).start()
    backend = MesosBackend(MesosConfig(master=master.url, resend_secs=RESEND_SECS, tick_secs=0.05,
                                       agent_refresh_secs=1.0))
    recorder = Recorder(backend, auto_ack)
    backend.start(recorder)

    def settle(predicate: Callable[[], bool], what: str) -> None:
        wait_for(predicate, 20, what)

    def quiesce() -> None:
        # Nothing left to re-send once the agents and the backend hold no unacknowledged
        # update; then give a few resend periods to show that nothing more arrives.
        wait_for(lambda: master.pending_updates() == 0 and backend.pending_count() == 0, 10,
                 "nothing left unacknowledged")
        time.sleep(RESEND_SECS * 3)

    try:
        settle(lambda: len(recorder.hosts) == 3, "agents reported as hosts")
        yield Rig(backend, recorder, "mesos-agent-1", settle, quiesce)
    finally:
        backend.stop()
        master.stop()


class _KwokCommands(KubeBackend):
    """The Kubernetes backend, with each run's `exit N` / `sleep N` told to kwok as the
    annotations its stages end a pod by (what the command would do on a real node)."""

    def launch(self, hostname: str, tasks: Sequence[LaunchSpec]) -> None:
        told = []
        for launch in tasks:
            cmd = launch.spec.command.value
            code = re.search(r"exit (\d+)", cmd)
            sleep = re.search(r"sleep (\d+)", cmd)
            fake = (Label("pelotonpy.dev/fake-exit-code", code.group(1) if code else "0"),
                    Label("pelotonpy.dev/fake-run-secs", sleep.group(1) if sleep else "0"))
            told.append(replace(launch, spec=replace(launch.spec,
                                                     labels=(*launch.spec.labels, *fake))))
        super().launch(hostname, told)


def _k8s_rig(kube: KubeControlPlane, kubeconfig: Path, auto_ack: bool) -> Iterator[Rig]:
    # Nodes and pods of this rig alone: its own node label and its own cluster name.
    tag = uuid.uuid4().hex[:8]
    names = kube.nodes.add(3, prefix=f"contract-{tag}-", labels={"contract": tag})
    backend = _KwokCommands(KubeConfig(source=str(kubeconfig), node_selector=f"contract={tag}",
                                       cluster_name=f"contract-{tag}", resend_secs=RESEND_SECS,
                                       finished_pod_ttl_secs=0.0))
    recorder = Recorder(backend, auto_ack)
    backend.start(recorder)

    def settle(predicate: Callable[[], bool], what: str) -> None:
        wait_for(predicate, 30, what)

    def quiesce() -> None:
        wait_for(lambda: backend.pending_count() == 0, 10, "nothing left unacknowledged")
        time.sleep(RESEND_SECS * 3)

    try:
        settle(lambda: len(recorder.hosts) == 3, "nodes reported as hosts")
        yield Rig(backend, recorder, names[1], settle, quiesce)
    finally:
        backend.stop()
        for name in names:
            kube.nodes.delete(name)


RIGS = {"local": _local_rig, "sim": lambda _, auto_ack: _sim_rig(auto_ack), "mesos": _mesos_rig}


@pytest.fixture(params=[*sorted(RIGS), "k8s"])
def make_rig(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[bool], Rig]]:
    """A factory: make_rig(auto_ack) -> Rig, torn down after the test."""
    gens: list[Iterator[Rig]] = []
    if request.param == "k8s":
        # Asked for only here, so the other backends' runs start no control plane.
        kube = request.getfixturevalue("kube")
        kubeconfig = request.getfixturevalue("kube_scheduler")

    def make(auto_ack: bool = True) -> Rig:
        if request.param == "k8s":
            gen = _k8s_rig(kube, kubeconfig, auto_ack)
        else:
            gen = RIGS[request.param](tmp_path, auto_ack)
        gens.append(gen)
        return next(gen)

    yield make
    for gen in gens:
        next(gen, None)


@pytest.fixture
def rig(make_rig: Callable[[bool], Rig]) -> Rig:
    return make_rig(True)


def test_launch_reports_starting_running_succeeded(rig: Rig) -> None:
    launch = task("echo $PELOTON_TASK_ID")
    rig.backend.launch(rig.hostname, [launch])
    rig.settle(lambda: rig.recorder.has(launch.run_id, TaskState.SUCCEEDED), "SUCCEEDED")
    assert rig.recorder.states(launch.run_id) == [TaskState.STARTING, TaskState.RUNNING,
                                                  TaskState.SUCCEEDED]
    done = rig.recorder.last(launch.run_id)
    assert done is not None and done.exit_code == 0
    assert done.hostname == rig.hostname and done.agent_id == rig.recorder.hosts[rig.hostname].agent_id


def test_failing_command_reports_failed_with_exit_code(rig: Rig) -> None:
    launch = task("exit 3")
    rig.backend.launch(rig.hostname, [launch])
    rig.settle(lambda: rig.recorder.has(launch.run_id, TaskState.FAILED), "FAILED")
    failed = rig.recorder.last(launch.run_id)
    assert failed is not None and failed.exit_code == 3
    assert "exited with code 3" in failed.message


def test_kill_ends_killed_and_is_idempotent(rig: Rig) -> None:
    launch = task("sleep 30", grace=0.2)
    rig.backend.launch(rig.hostname, [launch])
    rig.settle(lambda: rig.recorder.has(launch.run_id, TaskState.RUNNING), "RUNNING")
    rig.backend.kill(rig.hostname, [launch.run_id], 0.2)
    rig.backend.kill(rig.hostname, [launch.run_id, run_id()], 0.2)  # again, plus an unknown run
    rig.settle(lambda: rig.recorder.has(launch.run_id, TaskState.KILLED), "KILLED")
    rig.backend.kill(rig.hostname, [launch.run_id], 0.2)  # after the end
    rig.quiesce()
    assert rig.recorder.states(launch.run_id) == [TaskState.STARTING, TaskState.RUNNING,
                                                  TaskState.KILLED]


def test_unacknowledged_updates_are_redelivered_until_acknowledged(
        make_rig: Callable[[bool], Rig]) -> None:
    """Each update comes again until acknowledged, the terminal one too, and none after.

    A backend may hold a run's later updates back until the earlier ones are acknowledged
    (Mesos sends one unacknowledged update per task at a time), so acknowledgements go in
    rounds: wait until an unacknowledged update came twice and acknowledge it.
    """
    rig = make_rig(False)
    launch = task("true")
    rig.backend.launch(rig.hostname, [launch])
    acked: set[str] = set()

    def repeated() -> list[StatusUpdate]:
        seen = rig.recorder.of(launch.run_id)
        counts = Counter(u.uuid for u in seen)
        return list({u.uuid: u for u in seen if counts[u.uuid] >= 2 and u.uuid not in acked}
                    .values())

    for _ in range(10):
        rig.settle(lambda: bool(repeated()), "an unacknowledged update delivered twice")
        again = repeated()
        rig.backend.acknowledge(again)
        acked |= {u.uuid for u in again}
        if any(u.state is TaskState.SUCCEEDED for u in again):
            break
    else:
        raise AssertionError(f"the terminal update never came twice: {rig.recorder.of(launch.run_id)}")
    rig.quiesce()
    delivered = len(rig.recorder.of(launch.run_id))
    rig.quiesce()
    assert len(rig.recorder.of(launch.run_id)) == delivered


def test_reconcile_reports_unknown_run_lost_and_known_run_again(rig: Rig) -> None:
    launch = task("sleep 30", grace=0.1)
    rig.backend.launch(rig.hostname, [launch])
    rig.settle(lambda: rig.recorder.has(launch.run_id, TaskState.RUNNING), "RUNNING")
    before = len(rig.recorder.of(launch.run_id))
    ghost = run_id()
    rig.backend.reconcile([ghost, launch.run_id])
    rig.settle(lambda: rig.recorder.has(ghost, TaskState.LOST), "LOST for the unknown run")
    rig.settle(lambda: len(rig.recorder.of(launch.run_id)) > before, "the known run re-reported")
    assert rig.recorder.of(launch.run_id)[-1].state is TaskState.RUNNING
    rig.backend.kill(rig.hostname, [launch.run_id], 0.1)


def test_duplicate_launch_runs_once(rig: Rig) -> None:
    launch = task("true")
    rig.backend.launch(rig.hostname, [launch])
    rig.backend.launch(rig.hostname, [launch])
    rig.settle(lambda: rig.recorder.has(launch.run_id, TaskState.SUCCEEDED), "SUCCEEDED")
    rig.quiesce()
    starts = {u.uuid for u in rig.recorder.of(launch.run_id) if u.state is TaskState.STARTING}
    assert len(starts) == 1


def test_launch_on_unknown_host_is_not_found(rig: Rig) -> None:
    with pytest.raises(NotFound):
        rig.backend.launch("no-such-host", [task("true")])


def test_sandbox_holds_the_task_output(rig: Rig) -> None:
    if rig.backend.name == "k8s":
        pytest.skip("kwok's fake nodes have no kubelet to serve a pod's log; the k8s backend reads "
                    "it through pods/log (tests/unit/hostmgr/test_k8s_backend.py checks the call)")
    launch = task("echo $PELOTON_TASK_ID")
    rig.backend.launch(rig.hostname, [launch])
    rig.settle(lambda: rig.recorder.has(launch.run_id, TaskState.SUCCEEDED), "SUCCEEDED")
    names = [name for name, _ in rig.backend.list_sandbox(rig.hostname, launch.run_id)]
    assert "stdout" in names and "stderr" in names
    assert launch.run_id.encode() in rig.backend.read_sandbox(rig.hostname, launch.run_id, "stdout")
