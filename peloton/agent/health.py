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
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import gevent

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
#: $2 the check's command.  $1 is `.` when the supervisor's `-x` already entered it.
_IN_SANDBOX = '[ "$1" = . ] || cd -- "$1" || exit 126; eval "$2"'


def _command_probe(spec: HealthCheckSpec, env: Mapping[str, str], cwd: Path,
                   exec_as: Sequence[str] = ()) -> tuple[bool, str]:
    """Run the check's command in the sandbox, in a session of its own, for at most its timeout.

    Children follow the process's one rule (peloton/jobmgr/README.md, "Child processes"):
    in the monkey-patched agent, `os.posix_spawn` and `os.waitpid` are gevent's, so the
    probe is watched from birth, its exit status is kept for us however SIGCHLD is
    reaped, and every wait below lets other greenlets run.  posix_spawn rather than a
    Python fork: nothing of this process runs in the child before its exec.  At the
    timeout the probe's whole process group is killed: killing only the shell would leave
    its children holding stderr.
    """
    read_end, write_end = os.pipe()
    # Through `exec_as` the directory is entered before the user is switched (the task's
    # user may not be able to walk the path to its sandbox), so the shell stays where it is.
    where = "." if exec_as else str(cwd)
    shell = ["/bin/sh", "-c", _IN_SANDBOX, "health-check", where, spec.command]
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
    ended: list[int] = []  # the wait status, once the probe ended within its timeout
    try:
        with gevent.Timeout(max(0.0, spec.timeout_secs), False):
            while chunk := _read(read_end):  # until stderr closes: the probe has ended
                err = (err + chunk)[-4096:]
            ended.append(os.waitpid(pid, 0)[1])
    finally:
        os.close(read_end)
    if not ended:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        return False, f"timed out after {spec.timeout_secs:g} s"
    code = os.waitstatus_to_exitcode(ended[0])
    tail = err.decode(errors="replace").strip()[-200:]
    return code == 0, f"command exited with code {code}" + (f": {tail}" if tail else "")


def _read(fd: int) -> bytes:
    """The next bytes of a pipe, waiting (cooperatively) until it has some or closes."""
    select.select([fd], [], [])
    return os.read(fd, 4096)


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
