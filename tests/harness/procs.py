"""Start and stop real processes for tests: free ports, readiness waits, stop by PID."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PELOTON = str(Path(sys.executable).with_name("peloton"))
#: A Python interpreter tasks can run: they run as unprivileged users (peloton/agent/identity.py),
#: who may not reach the test's own interpreter (a pyenv under /root, mode 0700).
TASK_PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(predicate: Callable[[], bool], timeout: float, what: str, interval: float = 0.05) -> None:
    """Poll `predicate` until it is true or `timeout` seconds pass (then AssertionError)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


class OutputTail:
    """Collects a process's stdout lines on a background thread, so tests can wait on them."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        self._cond = threading.Condition()
        self._proc = proc
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            with self._cond:
                self.lines.append(line.rstrip("\n"))
                self._cond.notify_all()

    def wait_for(self, needle: str, timeout: float) -> str:
        """The first line containing `needle`, waiting up to `timeout` seconds."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for line in self.lines:
                    if needle in line:
                        return line
                left = deadline - time.monotonic()
                if left <= 0 or (self._proc.poll() is not None and not self._cond.wait(0.2)):
                    raise AssertionError(
                        f"no line with {needle!r} within {timeout}s; output: {self.lines[-30:]}")
                self._cond.wait(min(left, 0.2))


def stop(proc: subprocess.Popen[str], sig: int = signal.SIGTERM, timeout: float = 15) -> int:
    """Signal `proc` by PID, wait for it, kill it if it will not go; returns its exit code."""
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    return proc.returncode
