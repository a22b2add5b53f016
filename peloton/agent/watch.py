"""How the agent learns what its supervisors did: the notification pipe,
periodic sandbox scans, and adoption of runs after a restart.

The pipe (`<work-dir>/notify`, a FIFO) is the fast path: supervisors write
one record line per event and the reader drains many per read().  It can
miss records (a supervisor gives up on a full pipe after ~2 s, or wrote
while no agent was reading), so sandboxes are the truth: runs still
STARTING after `start_check_secs` are checked on every scan, every other
live run every `full_scan_secs`, and a run whose supervisor is gone
without an exit record is LOST.  At start, every sandbox not in the
acked log is adopted: a live supervisor keeps its run RUNNING (same
processes), a finished one reports how it ended.  A record on the pipe
for a run the agent does not know (its supervisor was spawned just before
a crash) is adopted the same way.
"""

from __future__ import annotations

import fcntl
import logging
import os
import select
import threading
import time
from pathlib import Path

from peloton.agent.executor import Executor
from peloton.agent.sandbox import SupervisorRecord
from peloton.core.states import TaskState

log = logging.getLogger(__name__)

F_SETPIPE_SZ = 1031  # fcntl.F_SETPIPE_SZ, missing from Python 3.11's fcntl on some builds
PIPE_BYTES = 1 << 20


class Watcher:
    """Reader of the notification pipe plus the periodic sandbox scanner."""

    def __init__(self, executor: Executor, fifo: Path, *, scan_secs: float = 2.0,
                 start_check_secs: float = 5.0, full_scan_secs: float = 30.0,
                 start_timeout_secs: float = 60.0, sandbox_ttl_secs: float = 7 * 86400) -> None:
        self.executor = executor
        self.sandboxes = executor.sandboxes
        self.fifo = fifo
        self.scan_secs, self.start_check_secs = scan_secs, start_check_secs
        self.full_scan_secs, self.start_timeout_secs = full_scan_secs, start_timeout_secs
        self.sandbox_ttl_secs = sandbox_ttl_secs
        self._stop = threading.Event()
        self._fds: list[int] = []

    def open_pipe(self) -> None:
        """Create and open the FIFO before any supervisor may write to it."""
        if self.fifo.exists() and not self.fifo.is_fifo():
            self.fifo.unlink()
        if not self.fifo.exists():
            os.mkfifo(self.fifo, 0o600)
        # Only the agent's user may write records (a task writing here could fake another
        # task's end); chmod too, for a FIFO made by an older agent.
        os.chmod(self.fifo, 0o600)
        read_fd = os.open(self.fifo, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        # Our own writer keeps the pipe from reading EOF between supervisors.
        keep_fd = os.open(self.fifo, os.O_WRONLY | os.O_CLOEXEC)
        try:
            fcntl.fcntl(read_fd, F_SETPIPE_SZ, PIPE_BYTES)
        except OSError:
            pass  # above /proc/sys/fs/pipe-max-size: the default 64 KiB still works
        self._fds = [read_fd, keep_fd]

    def start(self) -> None:
        """Start reading records and scanning."""
        threading.Thread(target=self._read_loop, name="agent-notify", daemon=True).start()
        threading.Thread(target=self._scan_loop, name="agent-scan", daemon=True).start()

    def stop(self) -> None:
        """Stop both loops and close the pipe (supervisors then leave records in sandboxes only)."""
        self._stop.set()
        fds, self._fds = self._fds, []
        for fd in fds:
            os.close(fd)

    # -- the fast path ------------------------------------------------------
    def _read_loop(self) -> None:
        fd = self._fds[0]
        tail = b""
        while not self._stop.is_set():
            try:
                ready, _, _ = select.select([fd], [], [], 0.5)
                if not ready:
                    continue
                data = os.read(fd, PIPE_BYTES)
            except (OSError, ValueError):
                return  # closed by stop()
            *lines, tail = (tail + data).split(b"\n")
            for line in lines:
                record = SupervisorRecord.parse(line.decode(errors="replace"))
                if record is not None:
                    self._apply(record)

    def _apply(self, record: SupervisorRecord) -> None:
        try:
            if record.run_id not in self.executor.runs and not self.sandboxes.is_acked(record.run_id):
                self.adopt(record.run_id)  # a run from before a restart, not scanned yet
            else:
                self.executor.on_record(record)
        except Exception:  # one bad record must not stop the reader
            log.exception("applying %s", record)

    # -- the safety net -----------------------------------------------------
    def _scan_loop(self) -> None:
        last_full = last_gc = time.monotonic()
        while not self._stop.wait(self.scan_secs):
            now = time.monotonic()
            full = now - last_full >= self.full_scan_secs
            last_full = now if full else last_full
            try:
                self.scan(full)
                if now - last_gc >= min(3600.0, self.sandbox_ttl_secs):
                    last_gc = now
                    self.sandboxes.collect(self.sandbox_ttl_secs)
            except Exception:
                log.exception("sandbox scan")

    def scan(self, full: bool) -> None:
        """Check live runs against their sandboxes (STARTING ones always, all when `full`)."""
        now = time.monotonic()
        for run_id, run in list(self.executor.runs.items()):
            if run.state.terminal or run.fetching:  # a fetching run has no sandbox yet
                continue
            if run.state is TaskState.STARTING and now - run.since < self.start_check_secs:
                continue
            if run.state is not TaskState.STARTING and not full:
                continue
            self.check(run_id, starting_for=now - run.since if run.state is TaskState.STARTING else None)

    def check(self, run_id: str, starting_for: float | None = None) -> None:
        """Bring one run up to date with its sandbox."""
        record = self.sandboxes.latest_record(run_id)
        if record is not None:
            self.executor.on_record(record)
            if record.terminal:
                return
        if self.sandboxes.supervisor_alive(run_id):
            return
        # The supervisor may have written its exit record just before it released the lock.
        record = self.sandboxes.exit_record(run_id)
        if record is not None:
            self.executor.on_record(record)
        elif starting_for is None or starting_for > self.start_timeout_secs:
            self.executor.lose(run_id, "the task's supervisor ended without recording how the "
                                       "task ended" if starting_for is None else
                                       "the task's supervisor never started")

    def adopt_all(self) -> int:
        """Adopt every unacknowledged sandbox (at start); returns how many runs were adopted."""
        count = 0
        for run_id in self.sandboxes.run_ids():
            if run_id not in self.executor.runs and not self.sandboxes.is_acked(run_id):
                self.adopt(run_id)
                count += 1
        return count

    def adopt(self, run_id: str) -> None:
        """Take over one run found on disk, as its sandbox describes it."""
        # No spec yet (run.json not written) or a damaged one: still tracked, with less detail.
        spec = self.sandboxes.read_spec(run_id)
        record = self.sandboxes.latest_record(run_id)
        self.executor.adopt(run_id, spec, record)
        log.info("adopted %s (%s)", run_id, record.state if record else "no record yet")
        if record is None or not record.terminal:
            # Its supervisor had all the time before the restart to start: no grace.
            self.check(run_id, starting_for=self.start_timeout_secs + 1 if record is None else None)
