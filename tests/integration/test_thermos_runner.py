"""The Thermos runner with real processes: the command the bridge gives an Aurora task
(aurorabridge/atop/thermos.py, the runner's source inside it) and `python3 -m
aurorabridge.thermos_runner`, both with the machine's /usr/bin/python3, in temporary
sandboxes.  Every wait polls with a deadline; no sleep stands for a state."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aurorabridge.atop.thermos import thermos_command
from tests.harness.procs import REPO, TASK_PYTHON, wait_for

pytestmark = pytest.mark.timeout(60)
NOBODY = 65534
AS_NOBODY = os.geteuid() == 0 and shutil.which("setpriv") is not None


@pytest.fixture
def box() -> Iterator[Path]:
    """A sandbox any user can reach and write (tmp_path is private to root)."""
    top = Path(tempfile.mkdtemp(prefix="thermos-runner-", dir="/tmp"))
    top.chmod(0o777)
    sandbox = top / "sandbox"
    sandbox.mkdir(mode=0o777)
    sandbox.chmod(0o777)
    try:
        yield sandbox
    finally:
        shutil.rmtree(top, ignore_errors=True)


def process(name: str, cmdline: str, **kw: Any) -> dict[str, Any]:
    return {"name": name, "cmdline": cmdline, "min_duration": 0, **kw}


def executor_data(*processes: dict[str, Any], **task: Any) -> str:
    """Thermos executor data as Aurora's client sends it."""
    return json.dumps({"role": "www", "environment": "devel", "name": "job",
                       "task": {"name": "job", "processes": list(processes), **task}})


class Started:
    """A runner process with its stdout and stderr in files beside the sandbox."""

    def __init__(self, argv: list[str], sandbox: Path, env: dict[str, str]) -> None:
        self.out_path = sandbox.parent / "stdout"
        self.err_path = sandbox.parent / "stderr"
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(argv, cwd=sandbox, env=env, stdout=out, stderr=err,
                                         stdin=subprocess.DEVNULL, start_new_session=True)

    def wait(self, timeout: float = 30) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            raise

    @property
    def out(self) -> str:
        return self.out_path.read_text()

    @property
    def err(self) -> str:
        return self.err_path.read_text()

    def lines(self, prefix: str = "[") -> list[str]:
        """The processes' echoed lines (or the runner's own, with prefix "thermos:")."""
        return [line for line in self.out.splitlines() if line.startswith(prefix)]


def task_env(sandbox: Path) -> dict[str, str]:
    """What the agent gives a task: no PYTHONPATH, no repository anywhere."""
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "PELOTON_INSTANCE_ID": "3",
            "PELOTON_TASK_ID": "job-3-1", "MESOS_SANDBOX": str(sandbox), "HOME": str(sandbox)}


def as_task(data: str, sandbox: Path) -> Started:
    """The bridge's command for `data`, run by sh as the agent would (as nobody when root)."""
    argv = ["/bin/sh", "-c", thermos_command(data)]
    if AS_NOBODY:
        argv = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--", *argv]
    return Started(argv, sandbox, task_env(sandbox))


def as_module(doc: dict[str, Any], sandbox: Path) -> Started:
    """`python3 -m aurorabridge.thermos_runner FILE` from this checkout."""
    path = sandbox.parent / "task.json"
    path.write_text(json.dumps(doc))
    env = {**task_env(sandbox), "PYTHONPATH": str(REPO)}
    return Started([TASK_PYTHON, "-m", "aurorabridge.thermos_runner", str(path)], sandbox, env)


def test_ordered_processes_then_the_final_one_run_as_the_task_in_order(box: Path) -> None:
    data = executor_data(
        process("main", "cat ready && echo main {{mesos.instance}} $(id -u)"),  # declared first
        process("prepare", "echo prepared > ready && echo prepare"),
        process("cleanup", "echo cleanup; echo cleanup-err >&2", final=True),
        constraints=[{"order": ["prepare", "main"]}])
    run = as_task(data, box)
    assert run.wait() == 0, run.out + run.err
    uid = NOBODY if AS_NOBODY else os.geteuid()
    assert run.lines() == ["[prepare] prepare", "[main] prepared", f"[main] main 3 {uid}",
                           "[cleanup] cleanup"]
    assert "[cleanup] cleanup-err" in run.err
    logs = box / ".logs"
    assert (logs / "main/0/stdout").read_text() == f"prepared\nmain 3 {uid}\n"
    assert (logs / "cleanup/0/stderr").read_text() == "cleanup-err\n"
    assert sorted(p.name for p in logs.iterdir()) == ["cleanup", "main", "prepare"]
    assert "task succeeded" in run.lines("thermos:")[-1]


def test_a_failing_process_is_retried_until_max_failures_then_fails_the_task(box: Path) -> None:
    doc = {"task": {"processes": [process("flaky", "echo try; exit 3", max_failures=2,
                                          min_duration=0.3),
                                  process("fine", "echo fine")]}}
    run = as_module(doc, box)
    assert run.wait() == 1, run.out + run.err
    runs = sorted(p.name for p in (box / ".logs/flaky").iterdir())
    assert runs == ["0", "1"]  # one retry, then no more
    assert [line for line in run.lines() if "flaky" in line] == ["[flaky] try", "[flaky] try"]
    events = "\n".join(run.lines("thermos:"))
    assert "flaky: run 0 exited 3: failure 1 of 2: retried in 0.3s" in events
    assert "flaky: run 1 exited 3: failed for good (failure 2 of 2)" in events
    assert "task failed" in run.err
    # min_duration: the second run started 0.3 s after the first one wrote its line (file
    # times come from the kernel's coarse clock: allow it a few milliseconds).
    first_end = (box / ".logs/flaky/0/stdout").stat().st_mtime
    second_start = (box / ".logs/flaky/1").stat().st_mtime
    assert second_start - first_end >= 0.3 - 0.02


def test_sigterm_stops_the_processes_then_runs_the_final_ones(box: Path) -> None:
    data = executor_data(
        process("serve", "trap 'echo stopping; exit 0' TERM; echo up; while :; do sleep 0.05; done"),
        process("sleeper", "sleep 1000"),
        process("save", "echo saved", final=True),
        finalization_wait=20)
    run = as_task(data, box)
    wait_for(lambda: "[serve] up" in run.out, 20, "serve to start")
    wait_for(lambda: "sleeper: run 0 started" in run.out, 20, "sleeper to start")
    run.proc.send_signal(signal.SIGTERM)
    assert run.wait() == 143, run.out + run.err
    lines = run.lines()
    assert lines.index("[serve] stopping") < lines.index("[save] saved")
    events = "\n".join(run.lines("thermos:"))
    assert "received SIGTERM" in events and "sleeper: run 0 killed by SIGTERM: killed" in events
    assert "task killed" in events


def test_what_an_ended_process_leaves_behind_is_killed(box: Path) -> None:
    doc = {"task": {"processes": [process("spawner", "sleep 1000 & echo $! > bg.pid; echo spawned")]}}
    run = as_module(doc, box)
    assert run.wait() == 0, run.out + run.err  # the sleep holds its stdout: no wait for EOF
    pid = int((box / "bg.pid").read_text())
    wait_for(lambda: not Path(f"/proc/{pid}").exists() or
             Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z",
             10, "the background sleep to be killed")


def test_daemons_run_again_and_ephemeral_processes_do_not_hold_the_task(box: Path) -> None:
    count = 'n=$(cat ticks 2>/dev/null | wc -l)'
    doc = {"task": {"processes": [
        process("ticker", "echo tick >> ticks", daemon=True, ephemeral=True, min_duration=0.05),
        process("logger", "sleep 1000", ephemeral=True),
        process("main", f"{count}; while [ $n -lt 3 ]; do sleep 0.05; {count}; done; echo saw $n"),
    ]}}
    run = as_module(doc, box)
    assert run.wait() == 0, run.out + run.err
    assert len((box / "ticks").read_text().splitlines()) >= 3
    events = "\n".join(run.lines("thermos:"))
    assert "ticker: run 0 exited 0: daemon: runs again" in events
    assert "stopping" in events and "logger" in events and "task succeeded" in events


def test_the_sandbox_thermos_profile_is_sourced(box: Path) -> None:
    (box / ".thermos_profile").write_text("export FROM_PROFILE=yes\n")
    run = as_task(executor_data(process("show", "echo profile=$FROM_PROFILE")), box)
    assert run.wait() == 0, run.out + run.err
    assert run.lines() == ["[show] profile=yes"]


def test_a_task_that_cannot_run_exits_2_saying_why(box: Path) -> None:
    run = Started([TASK_PYTHON, "-m", "aurorabridge.thermos_runner", "--json",
                   '{"task": {"processes": []}}'], box, {**task_env(box), "PYTHONPATH": str(REPO)})
    assert run.wait() == 2
    assert "no processes" in run.err


def test_a_process_that_cannot_start_counts_as_a_failed_run(box: Path) -> None:
    from aurorabridge.thermos_runner import Runner
    from peloton.core.thermos_spec import parse_task

    spec = parse_task({"processes": [process("p", "true", max_failures=2)]})
    not_a_dir = box / "file"
    not_a_dir.write_text("")
    with open(box.parent / "out", "wb") as out, open(box.parent / "err", "wb") as err:
        code = Runner(spec, str(not_a_dir), out_fd=out.fileno(), err_fd=err.fileno()).run()
    assert code == 1
    events = (box.parent / "out").read_text()
    assert "p: run 0 could not start" in events and "p: run 1 could not start" in events
    assert "failed for good (failure 2 of 2)" in (box.parent / "err").read_text()
