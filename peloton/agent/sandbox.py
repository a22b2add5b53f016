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

A task may write into its sandbox (supervisor.c makes it root-owned, the task's
group, sticky), so nothing in it is trusted blindly: records are read only
when they are regular files owned by the agent's user, through no symlink;
the agent writes its kill request under a fresh name; and browsing opens
each path component without following symlinks (`open_beneath`), so a task
cannot make the agent read a file outside its own sandbox.

Runs whose terminal status was acknowledged are listed in
`<work-dir>/acked.log` (appended per acknowledgement batch, rewritten
when sandboxes are collected), so a restarted agent does not report them
again.  A log, not a marker file per run: the agent's hot path creates no
inode at all (see supervisor.c on why inodes are the scarce thing here).
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import stat
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from peloton.agent.caps import strip_cap
from peloton.agent.model import RunSpec
from peloton.core.errors import InvalidArgument, NotFound

RUN_JSON = "run.json"
EXIT = "status.exit"
KILL = "kill"
#: The lock an agent holds on its work dir while it runs (in the work dir, not a sandbox).
AGENT_LOCK = "agent.lock"


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


def read_owned(path: Path, limit: int = 1 << 20) -> str | None:
    """The text of `path` if it is a regular file owned by our user, reached through no
    symlink; None otherwise (absent, a task's forgery, a symlink)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if st.st_uid != os.geteuid() or not stat.S_ISREG(st.st_mode):
            return None
        return os.read(fd, limit).decode("utf-8", "replace")
    finally:
        os.close(fd)


def open_beneath(base: Path, rel: str, *, directory: bool = False) -> int:
    """An fd for `rel` under `base`, opened one component at a time without following any
    symlink (what openat2's RESOLVE_BENEATH does).  InvalidArgument for `..` or a symlink;
    FileNotFoundError when absent."""
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise InvalidArgument(f"path {rel!r} is outside the sandbox", field="path")
    flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW
    fd = os.open(base, flags | os.O_DIRECTORY)
    try:
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            try:
                nxt = os.open(part, flags | (os.O_DIRECTORY if not last or directory else 0)
                              | (os.O_NONBLOCK if last else 0), dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR) and _is_link(fd, part):
                    raise InvalidArgument(f"path {rel!r} goes through a symlink, which is not "
                                          "followed", field="path") from None
                raise
            os.close(fd)
            fd = nxt
        return fd
    except BaseException:
        os.close(fd)
        raise


def _is_link(dir_fd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


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


def supervised(sandbox: str) -> bool:
    """Whether a supervisor holds the lock of the sandbox at this path right now (of this
    agent's runs or, for uidlocks.py, of any agent's)."""
    try:
        fd = os.open(sandbox, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing releases the probe's lock, if it got one
    return False


class Sandboxes:
    """The sandboxes under one work directory."""

    def __init__(self, work_dir: Path, root: Path | None = None) -> None:
        """Sandboxes under `root` (default `<work_dir>/sandboxes`; elsewhere, the work dir's
        `sandboxes` is a symlink to it: see AgentConfig.sandbox_root)."""
        self.root = root or work_dir / "sandboxes"
        if self.root != work_dir / "sandboxes":
            for parent in reversed(self.root.parents):
                if not parent.exists():
                    parent.mkdir()
                    parent.chmod(0o711)  # mkdir's mode is cut by the agent's umask
            link = work_dir / "sandboxes"
            if not link.is_symlink():
                link.symlink_to(self.root, target_is_directory=True)
        self.root.mkdir(parents=True, exist_ok=True)
        # Tasks may pass through (to reach their own sandbox by its path) but not list it.
        os.chmod(self.root, 0o711)
        _mark_topdir(self.root)
        #: The agent's lock (app.py holds it while an agent runs on this work dir); a
        #: supervisor started with -o watches it (supervisor.c).
        self.agent_lock = work_dir / AGENT_LOCK
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
        text = read_owned(self.root / run_id / EXIT)
        return SupervisorRecord.parse(text) if text is not None else None

    def _run_json(self, run_id: str) -> dict[str, Any] | None:
        text = read_owned(self.root / run_id / RUN_JSON, 64 << 20)
        try:
            doc = json.loads(text) if text is not None else None
        except ValueError:
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
        return supervised(str(self.root / run_id))

    def request_kill(self, run_id: str, grace_secs: float) -> None:
        """Leave the grace period where the supervisor reads it on SIGTERM."""
        directory = self.path(run_id)
        directory.mkdir(mode=0o700, exist_ok=True)  # the supervisor may not have made it yet
        tmp = directory / "kill.tmp"
        try:
            tmp.unlink()  # whatever a task may have left under that name
        except FileNotFoundError:
            pass
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        try:
            os.write(fd, str(max(0, int(grace_secs * 1000))).encode())
        finally:
            os.close(fd)
        os.rename(tmp, directory / KILL)

    def kill_requested(self, run_id: str) -> bool:
        """Whether a kill was ever asked for this run (by the agent, not forged by the task)."""
        return read_owned(self.root / run_id / KILL, 64) is not None

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
    def open(self, run_id: str, rel: str, *, directory: bool = False) -> int:
        """An fd for a path inside the run's sandbox (see `open_beneath`): no `..`, no
        symlink followed, so nothing outside this sandbox can be reached."""
        base = self.path(run_id)
        if not base.is_dir():
            raise NotFound(f"no sandbox for run {run_id!r}")
        try:
            return open_beneath(base, strip_cap(rel), directory=directory)
        except (FileNotFoundError, NotADirectoryError):
            kind = "directory" if directory else "file"
            raise NotFound(f"no {kind} {rel!r} in the sandbox of {run_id}") from None

    def listdir(self, run_id: str, rel: str = "") -> list[tuple[str, int, bool, float]]:
        """(name, size, is_dir, mtime) of the entries under a sandbox path, sorted by name."""
        fd = self.open(run_id, rel, directory=True)
        out = []
        try:
            for entry in os.scandir(fd):
                st = entry.stat(follow_symlinks=False)
                out.append((entry.name, st.st_size, entry.is_dir(follow_symlinks=False),
                            st.st_mtime))
        finally:
            os.close(fd)
        return sorted(out)

    def read(self, run_id: str, rel: str, offset: int, length: int) -> tuple[bytes, int]:
        """Up to `length` bytes from `offset` of a sandbox file, and the file's size."""
        fd = self.open(run_id, rel)
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise NotFound(f"no file {rel!r} in the sandbox of {run_id}")
            f.seek(max(0, offset))
            return f.read(max(0, length)), st.st_size
