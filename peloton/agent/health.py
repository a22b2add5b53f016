"""Health checks the agent runs against its tasks (command, HTTP and gRPC probes).

One checker per running task with an enabled check: wait the initial
delay, then probe every interval, each probe bounded by its timeout.  The
first success makes the task HEALTHY; `max_consecutive_failures` failures
in a row make it UNHEALTHY.  Only changes are reported, so a steady task
costs no status traffic.  Checkers are threads (greenlets under gevent).
"""

from __future__ import annotations

import logging
import subprocess
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path

from peloton.core.model.task import HealthCheckSpec, HealthCheckType
from peloton.core.states import HealthState

log = logging.getLogger(__name__)

#: Called with (run id, new health, detail of the last probe).
OnChange = Callable[[str, HealthState, str], None]


def probe(spec: HealthCheckSpec, port: int, env: Mapping[str, str], cwd: Path) -> tuple[bool, str]:
    """Run one probe; (passed, detail)."""
    try:
        if spec.type is HealthCheckType.COMMAND:
            done = subprocess.run(["/bin/sh", "-c", spec.command], cwd=cwd, env=dict(env),
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, timeout=spec.timeout_secs,
                                  start_new_session=True, check=False)
            tail = done.stderr.decode(errors="replace").strip()[-200:]
            return done.returncode == 0, f"command exited with code {done.returncode}" + (
                f": {tail}" if tail else "")
        if spec.type is HealthCheckType.HTTP:
            url = f"{spec.http_scheme or 'http'}://127.0.0.1:{port}{spec.http_path or '/'}"
            try:
                with urllib.request.urlopen(url, timeout=spec.timeout_secs) as reply:
                    return 200 <= reply.status < 400, f"GET {url}: HTTP {reply.status}"
            except urllib.error.HTTPError as exc:
                return False, f"GET {url}: HTTP {exc.code}"
        return _grpc_probe(port, spec.timeout_secs)
    except subprocess.TimeoutExpired:
        return False, f"timed out after {spec.timeout_secs:g} s"
    except (OSError, ValueError) as exc:
        return False, str(exc)


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
                 cwd: Path, on_change: OnChange) -> None:
        self.run_id, self.spec, self.port, self.env, self.cwd = run_id, spec, port, env, cwd
        self.on_change = on_change
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
            passed, detail = probe(self.spec, self.port, self.env, self.cwd)
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
