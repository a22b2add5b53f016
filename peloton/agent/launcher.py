"""Starting supervisors: find (or build) peloton-supervisor and feed its spawner.

The agent keeps one spawner process (`peloton-supervisor --serve`) and
writes one framed request per run to its stdin; the spawner forks a
supervisor per request.  Forking that tiny C process instead of exec'ing a
new supervisor each time is what keeps a task's cost near one fork/exec.
The spawner starts in its own session, so Ctrl-C in a terminal running the
agent does not reach it, and it exits when the agent's end of the pipe
closes; supervisors it forked live on.

Without the C binary and without a C compiler to build it, the agent runs
the same protocol in Python (pysupervisor.py), much slower; it says so
loudly.
"""

from __future__ import annotations

import logging
import os
import select
import shutil
import struct
import subprocess
import sys
import threading
from pathlib import Path

from peloton.core.errors import InvalidArgument

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("supervisor") / "supervisor.c"
FLAGS_FILE = SOURCE.with_name("flags.mk")
BINARY_NAME = "peloton-supervisor"


def build_flags(path: Path = FLAGS_FILE) -> dict[str, list[str]]:
    """The `NAME := flags` lines of flags.mk (the Makefile builds with the same ones)."""
    out: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():
        name, sep, value = line.partition(":=")
        if sep and not line.lstrip().startswith("#"):
            out[name.strip()] = value.split()
    return out


def _fresh(binary: Path) -> bool:
    return binary.is_file() and os.access(binary, os.X_OK) and (
        not SOURCE.exists() or binary.stat().st_mtime >= SOURCE.stat().st_mtime)


def _compile(out: Path) -> bool:
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc or not SOURCE.exists() or not FLAGS_FILE.exists():
        return False
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    flags = build_flags()
    # Static when libc.a is there: a static binary execs faster; fall back to dynamic.
    for extra in (flags["SUPERVISOR_LDFLAGS_STATIC"], flags["SUPERVISOR_LDFLAGS_DYNAMIC"]):
        done = subprocess.run([cc, *flags["SUPERVISOR_CFLAGS"], *extra, "-o", str(tmp),
                               str(SOURCE)],
                              capture_output=True, text=True, check=False)
        if done.returncode == 0:
            os.replace(tmp, out)
            return True
    log.warning("compiling %s failed: %s", SOURCE, done.stderr.strip()[-500:])
    return False


def supervisor_command(cache_dir: Path) -> list[str]:
    """The command that starts a spawner: the C binary if found or buildable, else Python.

    Looked up in $PELOTON_SUPERVISOR ("python" forces the fallback), next to the Python interpreter
    (`make setup` puts it in .venv/bin), on PATH, then built into
    `cache_dir` with the system's C compiler.
    """
    forced = os.environ.get("PELOTON_SUPERVISOR", "")
    if forced == "python":  # tests of the fallback
        log.error("*** PELOTON_SUPERVISOR=python: tasks run under the slow PYTHON supervisor ***")
        return [sys.executable, "-m", "peloton.agent.pysupervisor"]
    if forced:  # an explicit choice (e.g. the sanitizer build in `make test`) is never skipped
        if not _fresh(Path(forced)):
            raise RuntimeError(f"PELOTON_SUPERVISOR={forced} is not an executable built from "
                               f"the current {SOURCE.name}")
        return [forced]
    candidates = [str(Path(sys.executable).with_name(BINARY_NAME)),
                  shutil.which(BINARY_NAME) or "", str(cache_dir / BINARY_NAME)]
    for cand in filter(None, candidates):
        if _fresh(Path(cand)):
            return [cand]
    built = cache_dir / BINARY_NAME
    if _compile(built):
        log.info("built %s", built)
        return [str(built)]
    log.error("*** NO C COMPILER: tasks run under the PYTHON supervisor, many times slower per "
              "task. Install gcc and run `make setup` for the fast one. ***")
    return [sys.executable, "-m", "peloton.agent.pysupervisor"]


def encode_request(args: list[str], env: dict[str, str]) -> bytes:
    """One spawner request: length, then NUL-terminated strings: #args, #env, args, "K=V"s.

    Raises InvalidArgument for a NUL byte, which no argument or variable can carry.
    """
    strings = [str(len(args)), str(len(env)), *args, *(f"{k}={v}" for k, v in env.items())]
    if any("\0" in s for s in strings):
        raise InvalidArgument("command, arguments and environment cannot contain NUL bytes",
                              field="command")
    payload = "\0".join(strings).encode() + b"\0"
    return struct.pack("=I", len(payload)) + payload


class Spawner:
    """One spawner process and the pipe to it; restarted if it dies."""

    def __init__(self, command: list[str], log_path: Path) -> None:
        self.command = command
        self.log_path = log_path
        self._lock = threading.Lock()
        self._pid = 0
        self._fd = -1

    @property
    def python_fallback(self) -> bool:
        """Whether the slow Python supervisor is in use."""
        return self.command[0] == sys.executable

    def _start(self) -> None:
        read_end, write_end = os.pipe()
        logfd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            self._pid = os.posix_spawn(
                self.command[0], [*self.command, "--serve"], dict(os.environ),
                file_actions=[(os.POSIX_SPAWN_DUP2, read_end, 0), (os.POSIX_SPAWN_DUP2, logfd, 1),
                              (os.POSIX_SPAWN_DUP2, logfd, 2),
                              (os.POSIX_SPAWN_CLOSE, write_end)],
                setsid=True)
        finally:
            os.close(read_end)
            os.close(logfd)
        os.set_inheritable(write_end, False)
        os.set_blocking(write_end, False)
        self._fd = write_end

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                n = os.write(self._fd, view)
                view = view[n:]
            except BlockingIOError:
                # The spawner is behind: wait cooperatively (select is gevent-patched).
                select.select([], [self._fd], [], 1.0)

    def spawn(self, request: bytes) -> None:
        """Hand one request to the spawner, restarting it once if it is gone."""
        with self._lock:
            for attempt in (1, 2):
                if self._fd < 0:
                    self._start()
                try:
                    self._write_all(request)
                    return
                except BrokenPipeError:
                    log.warning("supervisor spawner %d exited; restarting it", self._pid)
                    self._close()
                    if attempt == 2:
                        raise

    def _close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        if self._pid:
            # gevent's waitpid (the agent is monkey-patched): the spawner was watched from
            # posix_spawn on, so its status is kept for us and the wait is cooperative.
            os.waitpid(self._pid, 0)
            self._pid = 0

    def stop(self) -> None:
        """Close the pipe; the spawner exits, the supervisors it forked keep running."""
        with self._lock:
            self._close()
