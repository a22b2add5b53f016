"""Health checks the agent runs against its tasks (command, HTTP and gRPC probes).

One checker per running task with an enabled check: wait the initial
delay, then probe every interval, each probe bounded by its timeout.  The
first success makes the task HEALTHY; `max_consecutive_failures` failures
in a row make it UNHEALTHY.  Only changes are reported, so a steady task
costs no status traffic.  Checkers are threads (greenlets under gevent).
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import signal
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from peloton.core.model.task import HealthCheckSpec, HealthCheckType
from peloton.core.states import HealthState

log = logging.getLogger(__name__)

#: Called with (run id, new health, detail of the last probe).
OnChange = Callable[[str, HealthState, str], None]


def probe(spec: HealthCheckSpec, port: int, env: Mapping[str, str], cwd: Path,
          exec_as: Sequence[str] = ()) -> tuple[bool, str]:
    """Run one probe; (passed, detail).  A command probe runs through `exec_as` (the
    supervisor's `-x` mode: as the task's user) when given."""
    try:
        if spec.type is HealthCheckType.COMMAND:
            return _command_probe(spec, env, cwd, exec_as)
        if spec.type is HealthCheckType.HTTP:
            url = f"{spec.http_scheme or 'http'}://127.0.0.1:{port}{spec.http_path or '/'}"
            try:
                with urllib.request.urlopen(url, timeout=spec.timeout_secs) as reply:
                    return 200 <= reply.status < 400, f"GET {url}: HTTP {reply.status}"
            except urllib.error.HTTPError as exc:
                return False, f"GET {url}: HTTP {exc.code}"
        return _grpc_probe(port, spec.timeout_secs)
    except (OSError, ValueError) as exc:
        return False, str(exc)


#: The probe's shell enters the sandbox itself (posix_spawn has no cwd): $1 is the sandbox,
#: $2 the check's command.  It also writes the command's exit code last on stderr: a SIGCHLD
#: reaper elsewhere in the process (gevent's, once anything used gevent.subprocess) may collect
#: the shell before we do, and then that line is the only record of how the check ended.
_IN_SANDBOX = ('[ "$1" = . ] || cd -- "$1" || exit 126; (eval "$2"); rc=$?; '
               'printf "\\n%s%d" "$3" "$rc" >&2; exit $rc')
_RC_MARK = "@@peloton-health-rc="


def _command_probe(spec: HealthCheckSpec, env: Mapping[str, str], cwd: Path,
                   exec_as: Sequence[str] = ()) -> tuple[bool, str]:
    """Run the check's command in the sandbox, in a session of its own, for at most its timeout.

    Spawned with posix_spawn, not fork: under gevent, subprocess forks in Python, so the
    agent's gRPC fork handlers run in the child, whose poller then dies on the descriptors the
    child closes (the probe exits with SIGABRT: a healthy task reported UNHEALTHY).  At the
    timeout the probe's whole process group is killed: killing only the shell would leave its
    children holding stderr, and waiting for stderr to close would then take as long as the
    probe hangs.
    """
    deadline = time.monotonic() + spec.timeout_secs
    read_end, write_end = os.pipe()
    # Through `exec_as` the directory is entered before the user is switched (the task's
    # user may not be able to walk the path to its sandbox), so the shell stays where it is.
    where = "." if exec_as else str(cwd)
    shell = ["/bin/sh", "-c", _IN_SANDBOX, "health-check", where, spec.command, _RC_MARK]
    # supervisor.c -x takes the program, then its argv (argv[0] included).
    argv = [*exec_as, "/bin/sh", *shell] if exec_as else shell
    try:
        pid = os.posix_spawn(
            argv[0], argv,
            dict(env), setsid=True,
            file_actions=[(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                          (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
                          (os.POSIX_SPAWN_DUP2, write_end, 2)])
    except BaseException:
        os.close(read_end)
        raise
    finally:
        os.close(write_end)
    err = b""
    try:
        status = None
        while status is None:
            if read_end >= 0 and select.select([read_end], [], [], max(0.0, min(
                    0.05, deadline - time.monotonic())))[0]:
                chunk = os.read(read_end, 4096)
                if chunk:
                    err = (err + chunk)[-4096:]
                else:  # stderr closed; the process may still run
                    os.close(read_end)
                    read_end = -1
            try:
                done, raw = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:  # collected by another reaper: the rc line tells
                done, raw = (pid, -1) if read_end < 0 else (0, 0)
            if done:
                status = raw
            elif time.monotonic() >= deadline:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
                _reap(pid)
                return False, f"timed out after {spec.timeout_secs:g} s"
            elif read_end < 0:
                time.sleep(0.01)
        if read_end >= 0 and select.select([read_end], [], [], 0)[0]:
            err = (err + os.read(read_end, 4096))[-4096:]  # what it wrote just before exiting
    finally:
        if read_end >= 0:
            os.close(read_end)
    text, mark, reported = err.decode(errors="replace").rpartition(_RC_MARK)
    if status == -1:  # reaped elsewhere
        if not reported.strip().isdigit():
            return False, "health check ended without an exit status"
        code = int(reported.strip())
    else:
        code = os.waitstatus_to_exitcode(status)
    if not mark:
        text = reported  # no rc line (the shell was killed or could not enter the sandbox)
    tail = text.strip()[-200:]
    return code == 0, f"command exited with code {code}" + (f": {tail}" if tail else "")


def _reap(pid: int, within: float = 5.0) -> None:
    """Collect a killed probe, polling: gevent's blocking waitpid waits for a SIGCHLD that may
    have come before it started waiting, for a child it did not fork."""
    end = time.monotonic() + within
    with contextlib.suppress(ChildProcessError):  # already collected elsewhere
        while not os.waitpid(pid, os.WNOHANG)[0] and time.monotonic() < end:
            time.sleep(0.01)


def _grpc_probe(port: int, timeout: float) -> tuple[bool, str]:
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=""), timeout=timeout)
        except grpc.RpcError as exc:
            return False, f"gRPC health: {exc.code().name}"
    ok = reply.status == health_pb2.HealthCheckResponse.SERVING
    return ok, f"gRPC health: {health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)}"


class HealthChecker:
    """Probes one task until stopped; reports changes of its health."""

    def __init__(self, run_id: str, spec: HealthCheckSpec, port: int, env: Mapping[str, str],
                 cwd: Path, on_change: OnChange, *, exec_as: Sequence[str] = ()) -> None:
        self.run_id, self.spec, self.port, self.env, self.cwd = run_id, spec, port, env, cwd
        self.on_change = on_change
        self.exec_as = tuple(exec_as)
        self.health = HealthState.HEALTH_UNKNOWN
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"health-{run_id}", daemon=True)

    def start(self) -> None:
        """Begin probing after the initial delay."""
        self._thread.start()

    def stop(self) -> None:
        """Stop probing; a probe in flight finishes within its timeout and is ignored."""
        self._stop.set()

    def _loop(self) -> None:
        failures = 0
        if self._stop.wait(max(0.0, self.spec.initial_interval_secs)):
            return
        while not self._stop.is_set():
            passed, detail = probe(self.spec, self.port, self.env, self.cwd, self.exec_as)
            if self._stop.is_set():
                return
            failures = 0 if passed else failures + 1
            new = self.health
            if passed:
                new = HealthState.HEALTHY
            elif failures >= max(1, self.spec.max_consecutive_failures):
                new = HealthState.UNHEALTHY
            if new is not self.health:
                self.health = new
                message = ("health check passed" if passed else
                           f"health check failed {failures} time(s) in a row: {detail}")
                try:
                    self.on_change(self.run_id, new, message)
                except Exception:  # a reporting bug must not kill the checker
                    log.exception("reporting health of %s", self.run_id)
            if self._stop.wait(max(0.01, self.spec.interval_secs)):
                return
