"""The agent's pure parts: supervisor records, outcomes, run specs, the reporter, the sim clock."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from peloton.agent import outcome
from peloton.agent.isolation import MemoryIsolation, enforced_memory_mb
from peloton.agent.model import PortBinding, RunSpec, Update, stable_uuid
from peloton.agent.reporter import StatusReporter
from peloton.agent.sandbox import SupervisorRecord
from peloton.core.model.task import CommandSpec, HealthCheckSpec, HealthCheckType
from peloton.core.states import TaskState
from peloton.hostmgr.backends.sim_clock import ManualClock
from tests.harness.procs import wait_for

RUN = "6f1c1f5e-3c1b-4c59-9a53-2f7d6a1f0b11-3-2"
V1 = MemoryIsolation("cgroup v1", parent=Path("/sys/fs/cgroup/memory/x"))
RLIMIT = MemoryIsolation("rlimit")


def exited(**fields: object) -> SupervisorRecord:
    base = {"state": "exited", "run": RUN, "supervisor": 10, "pid": 11, "started": 1.5,
            "finished": 2.5, "code": 0, "signal": 0, "oom": 0, "killed": 0, "grace_ms": 5000}
    base.update(fields)
    record = SupervisorRecord.parse(" ".join(f"{k}={v}" for k, v in base.items()) + "\n")
    assert record is not None
    return record


def spec(mem_mb: float = 0.0, **kw: object) -> RunSpec:
    return RunSpec(run_id=RUN, command=CommandSpec("sleep 1"), mem_mb=mem_mb, **kw)  # type: ignore[arg-type]


def test_records_parse_and_torn_lines_are_rejected() -> None:
    record = exited(code=3)
    assert (record.run_id, record.pid, record.supervisor_pid, record.code) == (RUN, 11, 10, 3)
    assert record.terminal
    assert SupervisorRecord.parse("state=exi") is None
    assert SupervisorRecord.parse("state=exited run=x code=notanumber") is None


def test_outcomes_name_what_happened() -> None:
    assert outcome.ended(exited(), spec(), V1).state is TaskState.SUCCEEDED
    failed = outcome.ended(exited(code=3), spec(), V1)
    assert (failed.state, failed.message, failed.exit_code) == (TaskState.FAILED, "exited with code 3", 3)
    segv = outcome.ended(exited(code=-1, signal=11), spec(), V1)
    assert segv.message == "killed by signal SIGSEGV" and segv.exit_code is None
    oom = outcome.ended(exited(code=-1, signal=9, oom=1), spec(mem_mb=50), V1)
    assert oom.message == "memory limit of 50 MB exceeded (cgroup v1)"
    assert oom.reason == "REASON_CONTAINER_LIMITATION_MEMORY"
    killed = outcome.ended(exited(code=-1, signal=9, killed=1, grace_ms=2500), spec(), V1)
    assert (killed.state, killed.message) == (TaskState.KILLED,
                                              "killed on request (SIGKILL after the 2.5 s grace period)")
    assert outcome.ended(exited(code=0, killed=1), spec(), V1).message == "killed on request"
    limited = outcome.ended(exited(code=1), spec(mem_mb=64), RLIMIT)
    assert "RLIMIT_AS" in limited.message and limited.message.startswith("exited with code 1")
    never = SupervisorRecord.parse(f"state=failed run={RUN} supervisor=1 pid=2 stage=exec errno=2")
    assert never is not None
    assert outcome.ended(never, spec(), V1).message == \
        "cannot execute '/bin/sh': No such file or directory"


def test_run_spec_round_trips_through_json_and_builds_argv_and_environment() -> None:
    check = HealthCheckSpec(type=HealthCheckType.HTTP, http_port=8080, http_path="/health")
    original = RunSpec(run_id=RUN, name="web", mem_mb=128, kill_grace_secs=2.0,
                       command=CommandSpec("/bin/echo", shell=False, arguments=("echo", "hi"),
                                           environment=(("PORT", "override"), ("A", "1"))),
                       ports=(PortBinding("http", 31000, "HTTP"), PortBinding("admin", 31001)),
                       health_check=check)
    assert RunSpec.from_dict(json.loads(original.to_json())) == original
    assert original.argv() == ("/bin/echo", ["echo", "hi"])
    assert spec().argv() == ("/bin/sh", ["sh", "-c", "sleep 1"])
    bare = RunSpec(run_id=RUN, command=CommandSpec("/bin/true", shell=False))
    assert bare.argv() == ("/bin/true", ["/bin/true"])
    env = original.environment("/sb")
    assert (env["PELOTON_INSTANCE_ID"], env["PELOTON_TASK_ID"], env["MESOS_SANDBOX"]) == ("3", RUN, "/sb")
    assert (env["PORT0"], env["PORT1"], env["PORT_HTTP"], env["HTTP"]) == ("31000", "31001", "31000", "31000")
    assert env["PORT"] == "override" and env["A"] == "1"  # the spec's own variables win
    assert "PATH" in env


def test_isolation_arguments_per_mechanism() -> None:
    assert V1.supervisor_args(RUN, 0) == []
    assert V1.supervisor_args(RUN, 1 << 20) == ["-m", "1048576", "-c", f"/sys/fs/cgroup/memory/x/{RUN}",
                                                "-V", "1"]
    assert RLIMIT.supervisor_args(RUN, 1 << 20) == ["-m", "1048576", "-R"]
    assert RLIMIT.describe(0) == "no memory limit"


def test_memory_below_32_mb_is_enforced_as_32_mb_like_mesos() -> None:
    assert enforced_memory_mb(0.1) == 32 and enforced_memory_mb(31.9) == 32
    assert enforced_memory_mb(50) == 50 and enforced_memory_mb(0) == 0   # 0: no limit
    oom = outcome.ended(exited(code=-1, signal=9, oom=1), spec(mem_mb=0.1), V1)
    assert oom.message == "memory limit of 32 MB exceeded (cgroup v1)"


def test_reporter_sends_while_connected_and_settles_acknowledged_ended_runs() -> None:
    sent: list[list[Update]] = []

    def send(batch: Sequence[Update]) -> bool:
        sent.append(list(batch))
        return True

    reporter = StatusReporter(send, resend_secs=60)
    reporter.start()
    try:
        start = Update(stable_uuid(RUN, TaskState.STARTING), RUN, TaskState.STARTING, 1.0)
        done = Update(stable_uuid(RUN, TaskState.SUCCEEDED), RUN, TaskState.SUCCEEDED, 2.0)
        reporter.publish(start)
        reporter.publish(done, terminal=True)
        assert sent == []  # not connected yet: nothing goes out
        reporter.connected(True)
        wait_for(lambda: sum(len(b) for b in sent) == 2, 5, "both updates sent")
        assert [u.state for b in sent for u in b] == [TaskState.STARTING, TaskState.SUCCEEDED]
        assert reporter.acknowledge([start.uuid]) == []
        assert reporter.acknowledge([done.uuid, "unknown"]) == [RUN]
        assert reporter.pending_count() == 0
    finally:
        reporter.stop()


def test_manual_clock_runs_callbacks_in_time_then_schedule_order() -> None:
    clock, seen = ManualClock(), []
    clock.call_at(2.0, lambda: seen.append("b"))
    clock.call_at(1.0, lambda: seen.append("a1"))
    clock.call_at(1.0, lambda: seen.append("a2"))
    clock.call_at(1.0, lambda: clock.call_at(1.5, lambda: seen.append("nested")))
    assert clock.advance(1.0) == 3 and seen == ["a1", "a2"]
    clock.advance(5.0)
    assert seen == ["a1", "a2", "nested", "b"] and clock.now() == 6.0


def test_sim_failures_follow_the_seeded_rng() -> None:
    from peloton.core.model.sched import LaunchSpec
    from peloton.core.model.task import TaskSpec
    from peloton.hostmgr.backends.sim import SimBackend
    from tests.harness.agents import Recorder

    def outcomes(seed: int) -> list[TaskState]:
        clock = ManualClock()
        backend = SimBackend(hosts=2, clock=clock, task_secs=1.0, failure_probability=0.5, seed=seed)
        recorder = Recorder(backend)
        backend.start(recorder)
        runs = [f"{RUN[:-4]}-{i}-1" for i in range(40)]
        backend.launch("sim-00000", [LaunchSpec(r, TaskSpec()) for r in runs])
        clock.advance(2.0)
        ends = [recorder.last(r) for r in runs]
        assert all(u is not None and u.state.terminal for u in ends)
        return [u.state for u in ends if u is not None]

    first = outcomes(7)
    assert first == outcomes(7)  # same seed, same story
    assert 5 < first.count(TaskState.FAILED) < 35 and TaskState.SUCCEEDED in first


class _Spawner:
    """Records spawner requests instead of starting supervisors."""

    command = ["peloton-supervisor"]

    def __init__(self) -> None:
        self.requests: list[bytes] = []

    def spawn(self, data: bytes) -> None:
        self.requests.append(data)


def _args(request: bytes) -> list[str]:
    strings = request[4:].rstrip(b"\0").decode().split("\0")
    return strings[2:2 + int(strings[0])]


def test_the_supervisor_is_told_the_limits_the_user_and_where_the_agents_lock_is(
        tmp_path: Path) -> None:
    from peloton.agent.executor import Executor
    from peloton.agent.identity import IdentityPolicy
    from peloton.agent.sandbox import Sandboxes

    work, elsewhere = tmp_path / "work", tmp_path / "var" / "sandboxes" / "0123abcd"
    work.mkdir()
    spawner = _Spawner()
    reporter = StatusReporter(lambda batch: True)
    executor = Executor(sandboxes=Sandboxes(work, elsewhere), isolation=RLIMIT,
                        spawner=spawner, reporter=reporter,  # type: ignore[arg-type]
                        fifo=work / "notify", enforce_fd_limit=True, orphan_secs=90,
                        identities=IdentityPolicy(dynamic_uids=(70000, 70009)))
    executor.launch([spec(mem_mb=0.1, fd_limit=64)])
    args = _args(spawner.requests[0])
    assert args[args.index("-d") + 1] == str(elsewhere / RUN)
    # The sandbox is not under the work dir: its lock is named (supervisor.c, orphans).
    assert args[args.index("-o") + 1] == "90"
    assert args[args.index("-l") + 1] == str(work / "agent.lock")
    assert args[args.index("-m") + 1] == str(32 << 20)  # Mesos' 32 MB floor (i12a)
    assert args[args.index("-n") + 1] == "64"  # --enforce-fd-limit
    if executor.identities.can_switch:  # as root: a dynamic user of its own (i14)
        assert args[args.index("-u") + 1] == "70000:70000"
