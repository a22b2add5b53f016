"""The Thermos runner: what an Aurora task's command becomes on a Peloton agent.

    python3 -m aurorabridge.thermos_runner TASK.json
    python3 -m aurorabridge.thermos_runner --json '{"processes": [...], ...}'
    PELOTON_THERMOS_TASK='{...}' python3 -m aurorabridge.thermos_runner

Aurora runs a task's processes with its Thermos executor; Peloton agents have none, so
the bridge makes each task's command run this module (aurorabridge/atop/thermos.py ships
its source, with peloton/core/thermos_spec.py and thermos_plan.py, inside the command:
the task's machine needs only a `python3`, 3.8 or newer).  All decisions are the pure
plan's (thermos_plan.TaskPlan); this module only does what it says:

- starts each process as `bash -c CMDLINE` (`sh -c` where there is no bash; Thermos uses
  bash, and sources `.thermos_profile` from the sandbox through BASH_ENV when it exists)
  in the sandbox ($MESOS_SANDBOX, else the current directory), in a session of its own,
  with the task's environment (ports, $PELOTON_INSTANCE_ID, ... that the bridge's
  template bindings refer to);
- copies each run's stdout and stderr into `.logs/<process>/<run>/stdout|stderr` in the
  sandbox, as Thermos lays them out, and line by line, prefixed `[<process>] `, into the
  runner's own stdout and stderr, so the task's logs show everything in order; its own
  events are lines starting `thermos: ` on stdout;
- when a run ends, kills what it left in its process group (Thermos kills the process
  tree of an ended process) and reports how it ended: exit 0, non-zero, or killed by a
  signal (Thermos's "lost": run again, not counted as a failure);
- on SIGTERM, SIGINT or SIGHUP asks the plan for a kill: running processes get SIGTERM
  (their whole process group), final processes run, and whatever still runs when
  finalization_wait is over gets SIGKILL;
- exits 0 when the task succeeded, 1 when it failed, 143 when it was killed, 2 when the
  task cannot run at all (bad JSON, invalid Thermos task).

Single-threaded: one select() loop over the processes' pipes and a wake-up pipe that
signals (SIGCHLD included) write to, with the plan's next wake-up time as its timeout.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from peloton.core import thermos_plan as plan
from peloton.core.thermos_spec import ProcessSpec, TaskSpec, parse_task

TASK_ENV = "PELOTON_THERMOS_TASK"
KILL_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
#: A line longer than this is echoed in pieces (the log files get everything as it came).
LINE_LIMIT = 64 * 1024
#: How long the runner waits for processes it SIGKILLed before it exits anyway.
REAP_SECS = 5.0
EXIT_CODES = {plan.Outcome.SUCCEEDED: 0, plan.Outcome.FAILED: 1, plan.Outcome.KILLED: 128 + 15}
USAGE = "usage: python3 -m aurorabridge.thermos_runner (TASK.json | --json TEXT), or $" + TASK_ENV


def _write(fd: int, data: bytes) -> None:
    """Write all of `data` to `fd`; a closed or full stream is not the task's problem."""
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view):]
        except BlockingIOError:
            continue
        except OSError:
            return


def signal_name(number: int) -> str:
    """SIGTERM for 15; "signal N" when Python has no name for it."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


class _Pipe:
    """One output pipe of a process run: into its log file, and line by line with the
    process's prefix into one of the runner's own streams."""

    def __init__(self, fd: int, log_path: str, echo_fd: int, prefix: bytes) -> None:
        self.fd = fd
        os.set_blocking(fd, False)
        self.log = open(log_path, "wb", buffering=0)  # noqa: SIM115 - closed by close()
        self.echo_fd = echo_fd
        self.prefix = prefix
        self.partial = b""
        self.closed = False

    def pump(self) -> bool:
        """Copy what can be read now; False once the writers closed it."""
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except BlockingIOError:
                return True
            except OSError:
                return False
            if not chunk:
                return False
            self.log.write(chunk)
            lines = (self.partial + chunk).split(b"\n")
            self.partial = lines.pop()
            if len(self.partial) > LINE_LIMIT:
                lines.append(self.partial)
                self.partial = b""
            if lines:
                _write(self.echo_fd, b"".join(self.prefix + line + b"\n" for line in lines))

    def close(self) -> None:
        """Echo an unfinished last line and close both ends."""
        if self.closed:
            return
        self.closed = True
        if self.partial:
            _write(self.echo_fd, self.prefix + self.partial + b"\n")
        os.close(self.fd)
        self.log.close()


class _Run:
    """One run of a process."""

    def __init__(self, name: str, number: int, proc: subprocess.Popen[bytes],
                 pipes: list[_Pipe]) -> None:
        self.name = name
        self.number = number
        self.proc = proc
        self.pipes = pipes


def default_shell() -> str:
    """bash, as Thermos runs command lines, or sh where a slim image has no bash."""
    return "/bin/bash" if os.access("/bin/bash", os.X_OK) else "/bin/sh"


class Runner:
    """Runs one Thermos task in `sandbox` until it ends; `run()` returns the exit code."""

    def __init__(self, spec: TaskSpec, sandbox: str, *, out_fd: int = 1, err_fd: int = 2,
                 shell: str = "", clock: Callable[[], float] = time.monotonic) -> None:
        self.specs: dict[str, ProcessSpec] = {p.name: p for p in spec.processes}
        self.sandbox = sandbox
        self.out_fd = out_fd
        self.err_fd = err_fd
        self.shell = shell or default_shell()
        self.clock = clock
        self.plan = plan.TaskPlan(spec, clock())
        self.runs: dict[str, _Run] = {}
        self.selector = selectors.DefaultSelector()
        self.kill_signal = 0
        self.stage = plan.Stage.ACTIVE

    # -- output ---------------------------------------------------------------------------
    def say(self, text: str, *, error: bool = False) -> None:
        """One line of the runner's own, on stdout (and stderr too when `error`)."""
        line = f"thermos: {time.strftime('%H:%M:%S')} {text}\n".encode(errors="replace")
        _write(self.out_fd, line)
        if error:
            _write(self.err_fd, line)

    # -- the loop ---------------------------------------------------------------------------
    def run(self) -> int:
        """Run the task to its end; installs signal handlers for the time it runs."""
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        self.selector.register(wake_r, selectors.EVENT_READ, None)
        handlers = {sig: signal.signal(sig, self._on_kill_signal) for sig in KILL_SIGNALS}
        handlers[signal.SIGCHLD] = signal.signal(signal.SIGCHLD, self._on_child)
        old_wakeup = signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        try:
            names = ", ".join(self.specs)
            self.say(f"running {len(self.specs)} process(es): {names}; finalization_wait "
                     f"{self.plan.spec.finalization_wait:g}s; shell {self.shell}")
            return self._loop(wake_r)
        finally:
            signal.set_wakeup_fd(old_wakeup)
            for sig, handler in handlers.items():
                signal.signal(sig, handler)
            self.selector.close()
            os.close(wake_r)
            os.close(wake_w)

    def _on_kill_signal(self, signum: int, frame: Any) -> None:
        self.kill_signal = self.kill_signal or signum

    def _on_child(self, signum: int, frame: Any) -> None:
        """Nothing: the wake-up pipe already woke the loop."""

    def _loop(self, wake_r: int) -> int:
        while True:
            now = self.clock()
            if self.kill_signal and not self.plan.kill_requested:
                self.say(f"received {signal_name(self.kill_signal)}: killing the task")
                self.plan.request_kill(now)
            decision = self.plan.decide(now)
            self._note_stage(decision)
            for name in decision.terminate:
                self._signal(name, signal.SIGTERM)
            for name in decision.kill:
                self._signal(name, signal.SIGKILL)
            if decision.stage is plan.Stage.DONE:
                return self._finish(decision.outcome or plan.Outcome.FAILED)
            for name in decision.start:
                self._spawn(name, now)
            timeout = None if decision.wake_at is None else max(0.0, decision.wake_at - now)
            if decision.start:
                timeout = 0.0  # a start that failed is already reported: decide again at once
            for key, _ in self.selector.select(timeout):
                if key.data is None:
                    self._drain(wake_r)
                elif not key.data.pump():
                    self.selector.unregister(key.fd)
                    key.data.close()
            self._reap()

    @staticmethod
    def _drain(fd: int) -> None:
        try:
            while os.read(fd, 4096):
                pass
        except OSError:
            pass

    def _note_stage(self, decision: plan.Decision) -> None:
        if decision.stage is self.stage:
            return
        left_active = self.stage is plan.Stage.ACTIVE
        self.stage = decision.stage
        if left_active:
            outcome = self.plan.outcome.value if self.plan.outcome else "?"
            stopping = f"; stopping {', '.join(decision.terminate)}" if decision.terminate else ""
            self.say(f"regular processes over ({outcome}): {self.plan.reason}{stopping}")
        finals = [p.name for p in self.specs.values() if p.final]
        if decision.stage is plan.Stage.FINALIZING and finals:
            self.say(f"finalizing: {', '.join(finals)}")

    # -- processes --------------------------------------------------------------------------
    def _spawn(self, name: str, now: float) -> None:
        spec = self.specs[name]
        number = self.plan.status(name).runs - 1
        ends: list[int] = []
        try:
            logs = os.path.join(self.sandbox, ".logs", name, str(number))
            os.makedirs(logs, exist_ok=True)
            env = dict(os.environ)
            profile = os.path.join(self.sandbox, ".thermos_profile")
            if os.path.isfile(profile):
                env["BASH_ENV"] = profile
            out_r, out_w = os.pipe()
            err_r, err_w = os.pipe()
            ends = [out_r, out_w, err_r, err_w]
            proc = subprocess.Popen([self.shell, "-c", spec.cmdline], cwd=self.sandbox, env=env,
                                    stdin=subprocess.DEVNULL, stdout=out_w, stderr=err_w,
                                    start_new_session=True)
        except (OSError, subprocess.SubprocessError) as exc:
            for fd in ends:
                os.close(fd)
            self.say(f"{name}: run {number} could not start: {exc}", error=True)
            self._report(name, number, plan.Exit.FAILURE, now)
            return
        os.close(out_w)
        os.close(err_w)
        prefix = f"[{name}] ".encode()
        pipes = [_Pipe(out_r, os.path.join(logs, "stdout"), self.out_fd, prefix),
                 _Pipe(err_r, os.path.join(logs, "stderr"), self.err_fd, prefix)]
        for pipe in pipes:
            self.selector.register(pipe.fd, selectors.EVENT_READ, pipe)
        self.runs[name] = _Run(name, number, proc, pipes)
        self.say(f"{name}: run {number} started (pid {proc.pid})")

    def _signal(self, name: str, sig: int) -> None:
        run = self.runs.get(name)
        if run is None:
            return
        try:
            os.killpg(run.proc.pid, sig)
        except OSError:
            pass

    def _close_run(self, run: _Run) -> None:
        """Kill what the run left in its process group, then copy and close its pipes."""
        try:
            os.killpg(run.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        for pipe in run.pipes:
            if not pipe.closed:
                pipe.pump()
                self.selector.unregister(pipe.fd)
                pipe.close()
        self.runs.pop(run.name, None)

    def _reap(self) -> None:
        for run in list(self.runs.values()):
            code = run.proc.poll()
            if code is None:
                continue
            self._close_run(run)
            exit = plan.Exit.SUCCESS if code == 0 else plan.Exit.SIGNALED if code < 0 \
                else plan.Exit.FAILURE
            how = f"killed by {signal_name(-code)}" if code < 0 else f"exited {code}"
            self._report(run.name, run.number, exit, self.clock(), how)

    def _report(self, name: str, number: int, exit: plan.Exit, now: float, how: str = "") -> None:
        step = self.plan.exited(name, exit, now)
        spec = self.specs[name]
        tries = "forever" if spec.max_failures == 0 else f"of {spec.max_failures}"
        if step.state is plan.Proc.PENDING:
            wait = max(0.0, (step.ready_at or now) - now)
            why = {plan.Exit.SUCCESS: "daemon: runs again",
                   plan.Exit.FAILURE: f"failure {step.failures} {tries}: retried",
                   plan.Exit.SIGNALED: "lost: runs again"}.get(step.exit, "runs again")
            verdict = f"{why} in {wait:g}s"
        elif step.state is plan.Proc.FAILED:
            verdict = f"failed for good (failure {step.failures} {tries})"
        elif step.state is plan.Proc.FINISHED and step.exit is plan.Exit.FAILURE:
            verdict = "out of tries, finished (ephemeral)"
        else:
            verdict = step.state.value
        self.say(f"{name}: run {number} {how or step.exit.value}: {verdict}",
                 error=step.state is plan.Proc.FAILED)

    def _finish(self, outcome: plan.Outcome) -> int:
        deadline = self.clock() + REAP_SECS
        for run in list(self.runs.values()):
            self.say(f"{run.name}: run {run.number} killed (SIGKILL): the task is over")
            try:
                run.proc.wait(max(0.0, deadline - self.clock()))
            except subprocess.TimeoutExpired:
                self.say(f"{run.name}: still running after SIGKILL; leaving it", error=True)
            self._close_run(run)
        self.say(f"task {outcome.value}: {self.plan.reason}", error=outcome is not plan.Outcome.SUCCEEDED)
        return EXIT_CODES[outcome]


def load(argv: Sequence[str], environ: Any = None) -> Any:
    """The task's JSON document from the command line or $PELOTON_THERMOS_TASK."""
    env = os.environ if environ is None else environ
    if len(argv) == 2 and argv[0] == "--json":
        return json.loads(argv[1])
    if len(argv) == 1 and not argv[0].startswith("-"):
        with open(argv[0], encoding="utf-8") as fh:
            return json.load(fh)
    if not argv and env.get(TASK_ENV):
        return json.loads(env[TASK_ENV])
    raise ValueError(USAGE)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the task given on the command line; the process's exit code."""
    try:
        spec = parse_task(load(sys.argv[1:] if argv is None else argv))
    except (OSError, ValueError) as exc:
        _write(2, f"thermos: cannot run this task: {exc}\n".encode(errors="replace"))
        return 2
    sandbox = os.environ.get("MESOS_SANDBOX", "")
    return Runner(spec, sandbox if os.path.isdir(sandbox) else os.getcwd()).run()


if __name__ == "__main__":
    sys.exit(main())
