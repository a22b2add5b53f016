"""`peloton agent` with real processes: environment, sandboxes, kills, memory limits,
adoption after `kill -9`, health checks, and a host manager that goes away.

The host manager side (GrpcServer + LocalBackend + a recording listener)
runs in the test process; every agent is a real `peloton agent` process
on 127.0.0.1, stopped by PID.  Everything waits with deadlines.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from peloton.agent.remote_volumes import remote_root
from peloton.api.grpc_server import GrpcServer
from peloton.core.model.sched import LaunchSpec
from peloton.core.model.task import HealthCheckSpec, HealthCheckType, PortSpec, UriSpec
from peloton.core.states import HealthState, TaskState
from peloton.hostmgr.backends.base import StatusUpdate
from peloton.hostmgr.backends.local import LocalBackend
from tests.harness.agents import AgentProcess, Recorder, sandbox, task, wait_file
from tests.harness.procs import PELOTON, TASK_PYTHON, free_port, wait_for


@dataclass
class Hostmgr:
    """The host manager side of the tests."""

    server: GrpcServer
    backend: LocalBackend
    recorder: Recorder

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.server.port}"

    def stop(self) -> None:
        self.backend.stop()
        self.server.stop(0)


def start_hostmgr(port: int = 0) -> Hostmgr:
    server = GrpcServer(f"127.0.0.1:{port}")
    backend = LocalBackend(heartbeat_secs=0.2, heartbeat_timeout_secs=5, reregister_grace_secs=0)
    backend.register_on(server)
    server.start()
    recorder = Recorder(backend)
    backend.start(recorder)
    return Hostmgr(server, backend, recorder)


@pytest.fixture(scope="module")
def hostmgr() -> Iterator[Hostmgr]:
    hm = start_hostmgr()
    yield hm
    hm.stop()


@pytest.fixture(scope="module")
def agent(hostmgr: Hostmgr, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentProcess]:
    proc = AgentProcess(tmp_path_factory.mktemp("agent"), hostmgr.address, name="it-agent").start()
    wait_for(lambda: "it-agent" in hostmgr.recorder.hosts, 20, "agent registration")
    yield proc
    proc.stop()


def gone(pid: int) -> bool:
    """The process no longer runs (a zombie waiting for its reaper counts as gone)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_registration_carries_the_agents_resources_and_labels(hostmgr: Hostmgr,
                                                               agent: AgentProcess) -> None:
    host = hostmgr.recorder.hosts["it-agent"]
    assert host.capacity.cpu == 2 and host.capacity.mem_mb == 2048
    assert [(lb.key, lb.value) for lb in host.labels] == [("rack", "r1")]
    assert host.address == f"127.0.0.1:{agent.port}"


def test_task_sees_its_environment_and_ports(hostmgr: Hostmgr, agent: AgentProcess) -> None:
    launch = task("env > env.txt", ports=[PortSpec("http", env_name="HTTP_PORT"), PortSpec("admin")],
                  assigned=[("http", 31001), ("admin", 31002)], env=[("GREETING", "hello world")])
    hostmgr.backend.launch("it-agent", [launch])
    hostmgr.recorder.wait_state(launch.run_id, TaskState.SUCCEEDED)
    box = sandbox(agent.work_dir, launch.run_id)
    env = dict(line.split("=", 1) for line in (box / "env.txt").read_text().splitlines() if "=" in line)
    job, instance, _ = launch.run_id.rsplit("-", 2)
    assert env["PELOTON_JOB_ID"] == job and env["PELOTON_INSTANCE_ID"] == instance
    assert env["PELOTON_TASK_ID"] == launch.run_id
    assert env["MESOS_SANDBOX"] == str(box)
    assert (env["PORT0"], env["PORT1"], env["PORT"]) == ("31001", "31002", "31001")
    assert (env["PORT_HTTP"], env["PORT_ADMIN"], env["HTTP_PORT"]) == ("31001", "31002", "31001")
    assert env["GREETING"] == "hello world"


def test_output_goes_to_sandbox_files(hostmgr: Hostmgr, agent: AgentProcess) -> None:
    launch = task("echo to-out; echo to-err >&2; exit 4")
    hostmgr.backend.launch("it-agent", [launch])
    failed = hostmgr.recorder.wait_state(launch.run_id, TaskState.FAILED)
    assert failed.exit_code == 4 and failed.message == "exited with code 4"
    assert hostmgr.backend.read_sandbox("it-agent", launch.run_id, "stdout") == b"to-out\n"
    assert hostmgr.backend.read_sandbox("it-agent", launch.run_id, "stderr") == b"to-err\n"


def test_argv_commands_keep_every_argument(hostmgr: Hostmgr, agent: AgentProcess) -> None:
    # Mesos' rule: `value` is the program, `arguments` its whole argv (argv[0] included).
    launch = task("ignored")
    argv = ("sh", "-c", 'printf "%s|" "$0" "$1" "$2" > args.txt', "zero", "", "two words")
    launch = type(launch)(launch.run_id, type(launch.spec)(
        command=type(launch.spec.command)(value="/bin/sh", shell=False, arguments=argv)))
    hostmgr.backend.launch("it-agent", [launch])
    hostmgr.recorder.wait_state(launch.run_id, TaskState.SUCCEEDED)
    assert (sandbox(agent.work_dir, launch.run_id) / "args.txt").read_text() == "zero||two words|"


def test_a_command_that_cannot_run_fails_with_the_reason(hostmgr: Hostmgr, agent: AgentProcess) -> None:
    launch = task("ignored")
    launch = type(launch)(launch.run_id, type(launch.spec)(
        command=type(launch.spec.command)(value="/no/such/program", shell=False)))
    hostmgr.backend.launch("it-agent", [launch])
    failed = hostmgr.recorder.wait_state(launch.run_id, TaskState.FAILED)
    assert "cannot execute '/no/such/program': No such file or directory" in failed.message


def test_kill_sends_sigterm_then_sigkill_to_the_whole_process_group(hostmgr: Hostmgr,
                                                                     agent: AgentProcess) -> None:
    # The shell shrugs off SIGTERM; its background child ignores it too.
    launch = task("trap 'echo got-term' TERM; (trap '' TERM; exec sleep 300) & echo $! > child.pid; "
                  "echo $$ > main.pid; while :; do sleep 0.05; done", grace=0.5)
    hostmgr.backend.launch("it-agent", [launch])
    hostmgr.recorder.wait_state(launch.run_id, TaskState.RUNNING)
    box = sandbox(agent.work_dir, launch.run_id)
    main_pid, child_pid = int(wait_file(box / "main.pid")), int(wait_file(box / "child.pid"))
    hostmgr.backend.kill("it-agent", [launch.run_id], 0.5)
    killed = hostmgr.recorder.wait_state(launch.run_id, TaskState.KILLED)
    assert killed.message == "killed on request (SIGKILL after the 0.5 s grace period)"
    assert "got-term" in (box / "stdout").read_text()  # TERM came first, and was survived
    wait_for(lambda: gone(main_pid) and gone(child_pid), 10, "the whole process group gone")


def test_memory_limit_exceeded_fails_with_a_clear_message(hostmgr: Hostmgr, agent: AgentProcess) -> None:
    launch = task(f"{TASK_PYTHON} -c \"x = b'x' * (200 << 20); print(len(x))\"", mem_mb=50)
    hostmgr.backend.launch("it-agent", [launch])
    failed = hostmgr.recorder.wait_state(launch.run_id, TaskState.FAILED, timeout=60)
    running = hostmgr.recorder.wait_state(launch.run_id, TaskState.RUNNING)
    if "cgroup" in running.message:
        assert "memory limit of 50 MB exceeded" in failed.message
        assert failed.reason == "REASON_CONTAINER_LIMITATION_MEMORY"
    else:  # no writable cgroup on this machine: RLIMIT_AS makes the allocation fail
        assert "RLIMIT_AS" in failed.message
    assert b"209715200" not in hostmgr.backend.read_sandbox("it-agent", launch.run_id, "stdout")


def test_memory_below_32_mb_is_raised_to_32_mb_as_mesos_does(hostmgr: Hostmgr,
                                                              agent: AgentProcess) -> None:
    # Peloton job files ask for 0.1 MB and ran on Mesos, which enforces at least 32 MB.
    launch = task("echo small", mem_mb=0.1)
    hostmgr.backend.launch("it-agent", [launch])
    done = hostmgr.recorder.wait_state(launch.run_id, TaskState.SUCCEEDED, timeout=30)
    assert done.message == "exited with code 0"
    running = hostmgr.recorder.wait_state(launch.run_id, TaskState.RUNNING)
    assert "memory limit 32 MB via" in running.message
    assert hostmgr.backend.read_sandbox("it-agent", launch.run_id, "stdout") == b"small\n"


def test_fd_limit_is_not_enforced_by_default(hostmgr: Hostmgr, agent: AgentProcess) -> None:
    # Peloton never applied fdLimit; a job file's fdLimit 3 must not break the task.
    launch = task("ulimit -n", fd_limit=3)
    hostmgr.backend.launch("it-agent", [launch])
    hostmgr.recorder.wait_state(launch.run_id, TaskState.SUCCEEDED, timeout=30)
    limit = hostmgr.backend.read_sandbox("it-agent", launch.run_id, "stdout").decode().strip()
    assert limit != "3"


def test_fd_limit_is_enforced_when_the_agent_is_told_to(hostmgr: Hostmgr, tmp_path: Path) -> None:
    proc = AgentProcess(tmp_path / "fd", hostmgr.address, name="fd-agent",
                        extra_args=["--enforce-fd-limit"]).start()
    try:
        wait_for(lambda: "fd-agent" in hostmgr.recorder.hosts, 20, "agent registration")
        launch = task("ulimit -n", fd_limit=64)
        hostmgr.backend.launch("fd-agent", [launch])
        hostmgr.recorder.wait_state(launch.run_id, TaskState.SUCCEEDED, timeout=30)
        assert hostmgr.backend.read_sandbox("fd-agent", launch.run_id, "stdout") == b"64\n"
    finally:
        proc.stop()


def test_agent_offers_fixed_and_usage_slack(hostmgr: Hostmgr, tmp_path: Path) -> None:
    # --revocable-cpus is offered from registration on; with --slack-from-usage the cpu an
    # idle non-revocable run was given is offered too, and taken back when the run ends.
    proc = AgentProcess(tmp_path / "slack", hostmgr.address, name="slack-agent",
                        extra_args=["--revocable-cpus", "1.5", "--slack-from-usage"]).start()
    try:
        wait_for(lambda: "slack-agent" in hostmgr.recorder.hosts, 20, "agent registration")
        assert hostmgr.recorder.hosts["slack-agent"].revocable_cpu == 1.5
        idle = task("sleep 60")                       # given 0.1 cpu, uses none
        hostmgr.backend.launch("slack-agent", [idle])
        hostmgr.recorder.wait_state(idle.run_id, TaskState.RUNNING)
        wait_for(lambda: hostmgr.recorder.hosts["slack-agent"].revocable_cpu == 1.6, 20,
                 "the idle run's cpu offered as slack")
        hostmgr.backend.kill("slack-agent", [idle.run_id], 0.5)
        hostmgr.recorder.wait_state(idle.run_id, TaskState.KILLED)
        wait_for(lambda: hostmgr.recorder.hosts["slack-agent"].revocable_cpu == 1.5, 20,
                 "slack back to the fixed part")
    finally:
        proc.stop()


def test_command_health_check_reports_transitions(hostmgr: Hostmgr, agent: AgentProcess) -> None:
    check = HealthCheckSpec(type=HealthCheckType.COMMAND, command="test -e healthy",
                            initial_interval_secs=0, interval_secs=0.1, timeout_secs=5,
                            max_consecutive_failures=2)
    launch = task("sleep 300", health=check, grace=0.1)
    hostmgr.backend.launch("it-agent", [launch])
    rid, rec = launch.run_id, hostmgr.recorder
    box = sandbox(agent.work_dir, rid)
    wait_for(lambda: HealthState.UNHEALTHY in rec.health(rid), 20, "UNHEALTHY")
    (box / "healthy").touch()
    wait_for(lambda: rec.health(rid)[-1:] == [HealthState.HEALTHY], 20, "HEALTHY")
    (box / "healthy").unlink()
    wait_for(lambda: rec.health(rid).count(HealthState.UNHEALTHY) == 2, 20, "UNHEALTHY again")
    assert rec.health(rid) == [HealthState.HEALTH_UNKNOWN, HealthState.UNHEALTHY,
                               HealthState.HEALTHY, HealthState.UNHEALTHY]
    assert all(u.state is TaskState.RUNNING for u in rec.of(rid) if u.healthy is not None)
    assert any("failed 2 time(s) in a row" in u.message for u in rec.of(rid))
    hostmgr.backend.kill("it-agent", [rid], 0.1)


def test_http_health_check_follows_the_server(hostmgr: Hostmgr, agent: AgentProcess) -> None:
    port = free_port()
    check = HealthCheckSpec(type=HealthCheckType.HTTP, http_path="/ok", initial_interval_secs=0,
                            interval_secs=0.1, timeout_secs=2, max_consecutive_failures=1)
    launch = task(f"exec {TASK_PYTHON} -m http.server --bind 127.0.0.1 $PORT0", health=check,
                  ports=[PortSpec("http")], assigned=[("http", port)], grace=0.1)
    hostmgr.backend.launch("it-agent", [launch])
    rid, rec = launch.run_id, hostmgr.recorder
    wait_for(lambda: HealthState.UNHEALTHY in rec.health(rid), 20, "UNHEALTHY while /ok is 404")
    (sandbox(agent.work_dir, rid) / "ok").write_text("fine")
    wait_for(lambda: rec.health(rid)[-1:] == [HealthState.HEALTHY], 20, "HEALTHY once /ok exists")
    hostmgr.backend.kill("it-agent", [rid], 0.1)


def _first_health(rec: Recorder, rid: str, health: HealthState) -> StatusUpdate:
    return next(u for u in rec.of(rid) if u.healthy is health)


def test_health_check_waits_its_initial_delay(hostmgr: Hostmgr, agent: AgentProcess) -> None:
    check = HealthCheckSpec(type=HealthCheckType.COMMAND, command="true",
                            initial_interval_secs=2, interval_secs=0.1, timeout_secs=1,
                            max_consecutive_failures=1)
    launch = task("sleep 300", health=check, grace=0.1)
    hostmgr.backend.launch("it-agent", [launch])
    rid, rec = launch.run_id, hostmgr.recorder
    running = rec.wait_state(rid, TaskState.RUNNING)
    assert running.healthy is HealthState.HEALTH_UNKNOWN
    wait_for(lambda: HealthState.HEALTHY in rec.health(rid), 10, "HEALTHY after the delay")
    healthy = _first_health(rec, rid, HealthState.HEALTHY)
    # Both stamps come from the agent's clock: the first probe ran no sooner than 2 s after
    # the task started running, and not much later (the probe itself is instant).
    assert 2.0 <= healthy.timestamp - running.timestamp < 4.0, \
        healthy.timestamp - running.timestamp
    assert rec.health(rid) == [HealthState.HEALTH_UNKNOWN, HealthState.HEALTHY]
    hostmgr.backend.kill("it-agent", [rid], 0.1)


def test_a_probe_that_hangs_is_cut_at_its_timeout(hostmgr: Hostmgr, agent: AgentProcess) -> None:
    check = HealthCheckSpec(type=HealthCheckType.COMMAND, command="sleep 5",
                            initial_interval_secs=0, interval_secs=0.1, timeout_secs=0.5,
                            max_consecutive_failures=1)
    launch = task("sleep 300", health=check, grace=0.1)
    hostmgr.backend.launch("it-agent", [launch])
    rid, rec = launch.run_id, hostmgr.recorder
    running = rec.wait_state(rid, TaskState.RUNNING)
    wait_for(lambda: HealthState.UNHEALTHY in rec.health(rid), 10, "UNHEALTHY on the timeout")
    unhealthy = _first_health(rec, rid, HealthState.UNHEALTHY)
    assert unhealthy.state is TaskState.RUNNING
    assert "timed out after 0.5 s" in unhealthy.message, unhealthy.message
    # Cut at 0.5 s, not left to run its 5 s.
    assert unhealthy.timestamp - running.timestamp < 3.0, unhealthy.timestamp - running.timestamp
    hostmgr.backend.kill("it-agent", [rid], 0.1)


def test_agent_killed_with_sigkill_adopts_its_tasks_on_restart(hostmgr: Hostmgr, tmp_path: Path) -> None:
    work = tmp_path / "agent"
    first = AgentProcess(work, hostmgr.address, name="adopter").start()
    rec = hostmgr.recorder
    wait_for(lambda: "adopter" in rec.hosts, 20, "registration")
    keeps = task("echo $$ >> pids; sleep 300", grace=0.1)
    ends = task("echo $$ >> pids; while [ ! -e go ]; do sleep 0.05; done; exit 7")
    hostmgr.backend.launch("adopter", [keeps, ends])
    rec.wait_state(keeps.run_id, TaskState.RUNNING)
    rec.wait_state(ends.run_id, TaskState.RUNNING)
    keep_pid = int(wait_file(sandbox(work, keeps.run_id) / "pids"))

    first.stop(signal.SIGKILL)
    (sandbox(work, ends.run_id) / "go").touch()  # finishes while no agent is there
    wait_file(sandbox(work, ends.run_id) / "status.exit")
    ups = rec.host_ups.count("adopter")

    second = AgentProcess(work, hostmgr.address, name="adopter").start()
    try:
        failed = rec.wait_state(ends.run_id, TaskState.FAILED)
        assert failed.exit_code == 7 and failed.message == "exited with code 7"
        wait_for(lambda: rec.host_ups.count("adopter") > ups, 20, "re-registration")
        assert psutil.pid_exists(keep_pid) and not gone(keep_pid)
        # Adopted, not started again: one line per start in `pids`.
        assert (sandbox(work, keeps.run_id) / "pids").read_text().split() == [str(keep_pid)]
        hostmgr.backend.kill("adopter", [keeps.run_id], 0.1)
        rec.wait_state(keeps.run_id, TaskState.KILLED)
        wait_for(lambda: gone(keep_pid), 10, "the adopted task killed")
    finally:
        second.stop()


def _with_uri(launch: LaunchSpec, url: str) -> LaunchSpec:
    command = dataclasses.replace(launch.spec.command, uris=(UriSpec(url, cache=True),))
    return dataclasses.replace(launch, spec=dataclasses.replace(launch.spec, command=command))


def test_the_remote_volume_cache_keeps_its_budget_across_a_restart(hostmgr: Hostmgr,
                                                                    tmp_path: Path) -> None:
    # 20 bytes of cache, entries of 15: one fits.  An entry a running task links to is kept
    # (over budget), also by the agent restarted after kill -9; an unheld one is evicted, and
    # fetched again by the next run that names it.
    served = Path(tempfile.mkdtemp(prefix="pelotonpy-served-", dir="/tmp"))
    os.chmod(served, 0o755)
    for name in "ab":
        (served / name).write_text(name * 14 + "\n")
        os.chmod(served / name, 0o644)
    work, rec = tmp_path / "agent", hostmgr.recorder
    args = ["--fetch-cache-mb", str(20 / 1024 / 1024)]
    first = AgentProcess(work, hostmgr.address, name="lru-agent", extra_args=args).start()
    second = None

    def blobs() -> set[str]:
        root = remote_root(work, sandbox(work, "x").parent)
        return {p.name for p in (root / "blobs").iterdir()}

    def entry(name: str) -> str:
        return hashlib.sha256((name * 14 + "\n").encode()).hexdigest()

    def cat(name: str) -> bytes:
        once = _with_uri(task(f"cat {name}"), f"file://{served}/{name}")
        hostmgr.backend.launch("lru-agent", [once])
        rec.wait_state(once.run_id, TaskState.SUCCEEDED, timeout=30)
        return hostmgr.backend.read_sandbox("lru-agent", once.run_id, "stdout")

    try:
        wait_for(lambda: "lru-agent" in rec.hosts, 20, "agent registration")
        assert cat("a") == b"a" * 14 + b"\n"
        holder = _with_uri(task("sleep 300", grace=0.1), f"file://{served}/b")
        hostmgr.backend.launch("lru-agent", [holder])
        rec.wait_state(holder.run_id, TaskState.RUNNING)
        assert blobs() == {entry("b")}  # a, no longer linked by a running task, went
        first.stop(signal.SIGKILL)
        second = AgentProcess(work, hostmgr.address, name="lru-agent", extra_args=args).start()
        wait_for(lambda: rec.host_ups.count("lru-agent") >= 2, 20, "re-registration")
        assert cat("a") == b"a" * 14 + b"\n"  # fetched again
        # b is still held by the adopted run: a went once its run ended.
        wait_for(lambda: blobs() == {entry("b")}, 10, "a evicted, b kept")
        hostmgr.backend.kill("lru-agent", [holder.run_id], 0.1)
        rec.wait_state(holder.run_id, TaskState.KILLED)
        assert blobs() == {entry("b")}  # released, and within the budget: kept
    finally:
        (second or first).stop()
        shutil.rmtree(served)


def test_tasks_keep_running_while_the_host_manager_is_away(tmp_path: Path) -> None:
    port = free_port()
    hm = start_hostmgr(port)
    proc = AgentProcess(tmp_path / "agent", hm.address, name="patient").start()
    try:
        wait_for(lambda: "patient" in hm.recorder.hosts, 20, "registration")
        launch = task("while [ ! -e go ]; do sleep 0.05; done; echo done")
        hm.backend.launch("patient", [launch])
        hm.recorder.wait_state(launch.run_id, TaskState.RUNNING)
        hm.stop()  # the host manager goes away ...
        (sandbox(proc.work_dir, launch.run_id) / "go").touch()
        wait_file(sandbox(proc.work_dir, launch.run_id) / "status.exit")
        hm = start_hostmgr(port)  # ... and comes back with no memory of anything
        done = hm.recorder.wait_state(launch.run_id, TaskState.SUCCEEDED, timeout=30)
        assert done.hostname == "patient" and done.exit_code == 0
        assert "patient" in hm.recorder.hosts
    finally:
        proc.stop()
        hm.stop()


def test_a_silent_agent_is_reported_gone_and_welcomed_back(tmp_path: Path) -> None:
    server = GrpcServer("127.0.0.1:0")
    backend = LocalBackend(heartbeat_secs=0.2, heartbeat_timeout_secs=1.0, reregister_grace_secs=0)
    backend.register_on(server)
    server.start()
    recorder = Recorder(backend)
    backend.start(recorder)
    hm = Hostmgr(server, backend, recorder)
    first = AgentProcess(tmp_path / "agent", hm.address, name="quiet").start()
    assert first.proc is not None  # started
    try:
        wait_for(lambda: "quiet" in recorder.hosts, 20, "registration")
        first.proc.send_signal(signal.SIGSTOP)  # alive but silent
        wait_for(lambda: [h for h, _ in recorder.gone] == ["quiet"], 20, "host gone")
        assert "no heartbeat" in recorder.gone[0][1]
        first.proc.send_signal(signal.SIGCONT)
        wait_for(lambda: recorder.host_ups.count("quiet") == 2, 20, "re-registration")
        assert [h.hostname for h in backend.hosts()] == ["quiet"]
    finally:
        first.stop()
        hm.stop()


def test_python_fallback_supervisor_speaks_the_same_protocol(hostmgr: Hostmgr, tmp_path: Path) -> None:
    proc = AgentProcess(tmp_path / "agent", hostmgr.address, name="py-agent",
                        extra_env={"PELOTON_SUPERVISOR": "python"}).start()
    try:
        rec = hostmgr.recorder
        wait_for(lambda: "py-agent" in rec.hosts, 20, "registration")
        ok, bad, slow = task("echo $PELOTON_TASK_ID"), task("exit 5"), task("sleep 300", grace=0.1)
        hostmgr.backend.launch("py-agent", [ok, bad, slow])
        assert rec.wait_state(ok.run_id, TaskState.SUCCEEDED).exit_code == 0
        assert rec.wait_state(bad.run_id, TaskState.FAILED).exit_code == 5
        rec.wait_state(slow.run_id, TaskState.RUNNING)
        hostmgr.backend.kill("py-agent", [slow.run_id], 0.1)
        rec.wait_state(slow.run_id, TaskState.KILLED)
        stdout = hostmgr.backend.read_sandbox("py-agent", ok.run_id, "stdout")
        assert stdout.decode().strip() == ok.run_id
        assert "PYTHON" in "\n".join(proc.tail.lines)
    finally:
        proc.stop()


def test_agent_cli_rejects_bad_options_and_a_second_agent_on_one_work_dir(
        agent: AgentProcess) -> None:
    bad = subprocess.run([PELOTON, "agent", "--ports", "9-x", "--work-dir", str(agent.work_dir)],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "bad port range" in bad.stderr
    second = subprocess.run([PELOTON, "agent", "--work-dir", str(agent.work_dir), "--port", "0",
                             "--hostmgr", "127.0.0.1:1"], capture_output=True, text=True, timeout=60)
    assert second.returncode != 0 and "another agent is using the work dir" in second.stderr
