"""Sandbox directories and the supervisor's records in them.

Each run has `<work-dir>/sandboxes/<run-id>/` (made by its supervisor) holding:

    stdout, stderr   the task's output (and the supervisor's own diagnostics)
    run.json         once the program was exec'd: supervisor and task pids, start
                     time, and the agent's RunSpec (for adoption after a restart)
    status.exit      the supervisor's record once the task ended (or failed to start)
    kill             a kill request: the grace period in milliseconds

The supervisor holds an exclusive flock on the directory while it lives;
`supervisor_alive()` probes it.  The exit record is one line of
`key=value` fields (see supervisor.c); each file is written once,
atomically, so a reader sees either nothing or all of it.

Runs whose terminal status was acknowledged are listed in
`<work-dir>/acked.log` (appended per acknowledgement batch, rewritten
when sandboxes are collected), so a restarted agent does not report them
again.  A log, not a marker file per run: the agent's hot path creates no
inode at all (see supervisor.c on why inodes are the scarce thing here).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from peloton.agent.model import RunSpec
from peloton.core.errors import InvalidArgument, NotFound

RUN_JSON = "run.json"
EXIT = "status.exit"
KILL = "kill"


@dataclass(frozen=True, slots=True)
class SupervisorRecord:
    """One line the supervisor wrote (or sent through the notification pipe)."""

    state: str  # running | exited | failed
    run_id: str
    supervisor_pid: int = 0
    pid: int = 0
    started: float = 0.0
    finished: float = 0.0
    code: int = -1
    signal: int = 0
    oom: bool = False
    killed: bool = False
    stage: str = ""
    errno: int = 0
    grace_ms: int = 0
    #: Stopped by the supervisor itself: no agent could adopt it any more (supervisor.c).
    orphaned: bool = False

    @staticmethod
    def parse(line: str) -> SupervisorRecord | None:
        """Parse one record; None if it is not one (torn or foreign input)."""
        fields = {}
        for part in line.split():
            key, _, value = part.partition("=")
            fields[key] = value
        state, run_id = fields.get("state", ""), fields.get("run", "")
        if state not in ("running", "exited", "failed") or not run_id:
            return None
        try:
            return SupervisorRecord(
                state=state, run_id=run_id,
                supervisor_pid=int(fields.get("supervisor", 0)), pid=int(fields.get("pid", 0)),
                started=float(fields.get("started", 0)), finished=float(fields.get("finished", 0)),
                code=int(fields.get("code", -1)), signal=int(fields.get("signal", 0)),
                oom=fields.get("oom") == "1", killed=fields.get("killed") == "1",
                stage=fields.get("stage", ""), errno=int(fields.get("errno", 0)),
                grace_ms=int(fields.get("grace_ms", 0)), orphaned=fields.get("orphaned") == "1")
        except ValueError:
            return None

    @property
    def terminal(self) -> bool:
        """The task has ended (or never started)."""
        return self.state != "running"


#: ioctl numbers and the "top of directory hierarchy" inode flag (linux/fs.h).
_FS_IOC_GETFLAGS, _FS_IOC_SETFLAGS, _FS_TOPDIR_FL = 0x80086601, 0x40086602, 0x00020000


def _mark_topdir(directory: Path) -> None:
    """Ask ext2/3/4 to spread the sandboxes over block groups (chattr +T).

    Without it every sandbox lands in the group of `sandboxes/`, and a group
    where many inodes were freed lately (old sandboxes collected, other
    programs' churn) makes each inode allocation scan past them (ext4
    without a journal skips inodes freed in the last 30 s to 5 min).  Other
    filesystems do not know the flag; that is fine.
    """
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        flags = bytearray(4)
        fcntl.ioctl(fd, _FS_IOC_GETFLAGS, flags)
        value = int.from_bytes(flags, "little") | _FS_TOPDIR_FL
        fcntl.ioctl(fd, _FS_IOC_SETFLAGS, value.to_bytes(4, "little"))
    except OSError:
        pass
    finally:
        os.close(fd)


class Sandboxes:
    """The sandboxes under one work directory."""

    def __init__(self, work_dir: Path) -> None:
        self.root = work_dir / "sandboxes"
        self.root.mkdir(parents=True, exist_ok=True)
        _mark_topdir(self.root)
        self._log = work_dir / "acked.log"
        self._log_lock = threading.Lock()
        try:
            self._acked = set(self._log.read_text().split())
        except FileNotFoundError:
            self._acked = set()

    def path(self, run_id: str) -> Path:
        """Where a run's sandbox lives; a name that could leave the root is NotFound."""
        if "/" in run_id or run_id in ("", ".", ".."):
            raise NotFound(f"no sandbox for run {run_id!r}")
        return self.root / run_id

    def exists(self, run_id: str) -> bool:
        """Whether the run has a sandbox (it was launched here before)."""
        return os.path.isdir(self.path(run_id))

    def run_ids(self) -> list[str]:
        """Every run with a sandbox, acknowledged ones included."""
        return [e.name for e in os.scandir(self.root) if e.is_dir()]

    def exit_record(self, run_id: str) -> SupervisorRecord | None:
        """How the run ended, once its supervisor wrote that down."""
        try:
            return SupervisorRecord.parse((self.root / run_id / EXIT).read_text())
        except OSError:
            return None

    def _run_json(self, run_id: str) -> dict[str, Any] | None:
        try:
            doc = json.loads((self.root / run_id / RUN_JSON).read_text())
        except (OSError, ValueError):
            return None
        return doc if isinstance(doc, dict) else None

    def running_record(self, run_id: str) -> SupervisorRecord | None:
        """The start of the run (pids and time) from run.json, once the program was exec'd."""
        doc = self._run_json(run_id)
        if doc is None:
            return None
        try:
            return SupervisorRecord("running", run_id, int(doc["supervisor"]), int(doc["pid"]),
                                    float(doc["started"]))
        except (KeyError, TypeError, ValueError):
            return None

    def read_spec(self, run_id: str) -> RunSpec | None:
        """The RunSpec the agent launched the run with (None before run.json, or if damaged)."""
        doc = self._run_json(run_id)
        try:
            return None if doc is None or doc.get("spec") is None else RunSpec.from_dict(doc["spec"])
        except (KeyError, TypeError, ValueError):
            return None

    def latest_record(self, run_id: str) -> SupervisorRecord | None:
        """The exit record if there is one, else the running record."""
        return self.exit_record(run_id) or self.running_record(run_id)

    def supervisor_alive(self, run_id: str) -> bool:
        """Whether a supervisor holds the run's sandbox lock right now."""
        try:
            fd = os.open(self.root / run_id, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)  # closing releases the probe's lock, if it got one
        return False

    def request_kill(self, run_id: str, grace_secs: float) -> None:
        """Leave the grace period where the supervisor reads it on SIGTERM."""
        directory = self.path(run_id)
        directory.mkdir(exist_ok=True)  # the supervisor may not have made it yet
        tmp = directory / "kill.tmp"
        tmp.write_text(str(max(0, int(grace_secs * 1000))))
        os.rename(tmp, directory / KILL)

    def kill_requested(self, run_id: str) -> bool:
        """Whether a kill was ever asked for this run."""
        return (self.root / run_id / KILL).exists()

    def mark_acked(self, run_ids: list[str]) -> None:
        """Everything about these runs was reported and acknowledged."""
        if not run_ids:
            return
        with self._log_lock:
            self._acked.update(run_ids)
            with open(self._log, "a") as log:
                log.write("\n".join(run_ids) + "\n")

    def is_acked(self, run_id: str) -> bool:
        """Whether the run's terminal status was acknowledged."""
        return run_id in self._acked

    def collect(self, ttl_secs: float) -> int:
        """Remove acknowledged sandboxes untouched for `ttl_secs`; rewrite the log; returns how many."""
        cutoff = time.time() - ttl_secs
        removed = 0
        with self._log_lock:
            for run_id in list(self._acked):
                path = self.root / run_id
                try:
                    if path.stat().st_mtime >= cutoff:
                        continue
                    shutil.rmtree(path)
                except FileNotFoundError:
                    pass
                except OSError:
                    continue
                self._acked.discard(run_id)
                removed += 1
            if removed:
                tmp = self._log.with_suffix(".tmp")
                tmp.write_text("".join(f"{r}\n" for r in sorted(self._acked)))
                os.replace(tmp, self._log)
        return removed

    # -- browsing -------------------------------------------------------
    def resolve(self, run_id: str, rel: str) -> Path:
        """A path inside the run's sandbox; rejects escapes such as `../..` or symlinks out."""
        base = self.path(run_id)
        if not base.is_dir():
            raise NotFound(f"no sandbox for run {run_id!r}")
        target = (base / rel.lstrip("/")).resolve()
        if target != base.resolve() and base.resolve() not in target.parents:
            raise InvalidArgument(f"path {rel!r} is outside the sandbox", field="path")
        return target

    def listdir(self, run_id: str, rel: str = "") -> list[tuple[str, int, bool, float]]:
        """(name, size, is_dir, mtime) of the entries under a sandbox path, sorted by name."""
        target = self.resolve(run_id, rel)
        if not target.is_dir():
            raise NotFound(f"{rel!r} is not a directory in the sandbox of {run_id}")
        out = []
        for entry in os.scandir(target):
            st = entry.stat(follow_symlinks=False)
            out.append((entry.name, st.st_size, entry.is_dir(follow_symlinks=False), st.st_mtime))
        return sorted(out)

    def read(self, run_id: str, rel: str, offset: int, length: int) -> tuple[bytes, int]:
        """Up to `length` bytes from `offset` of a sandbox file, and the file's size."""
        target = self.resolve(run_id, rel)
        if not target.is_file():
            raise NotFound(f"no file {rel!r} in the sandbox of {run_id}")
        with open(target, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            f.seek(max(0, offset))
            return f.read(max(0, length)), size
