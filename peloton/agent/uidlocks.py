"""Machine-wide claims on dynamic uids: one flock'ed file per uid, as systemd's DynamicUser.

`<dir>/<uid>.lock` is held (flock, exclusive) by the agent whose run has the
uid, from the launch until the run's terminal update; its content names that
run's sandbox.  Every agent on the machine, of every cluster, claims in the
same directory, so a uid one agent holds is skipped by all the others
(uidpool.py gives the rule; this module only does the file work).

Why a flock: the kernel drops it when the agent closes the file or dies,
`kill -9` included, so no uid is leaked by a crash and nothing has to be
cleaned up.  Why the sandbox in the file: the run outlives an agent killed
with `kill -9` (its supervisor lives on and a restarted agent adopts it), but
the agent's flock does not.  A claim therefore also fails while the recorded
sandbox's supervisor lives (it holds that sandbox's flock, sandbox.py); the
adopting agent takes the lock again (`reclaim`).

Which directory: `/run/pelotonpy/uids` - /run is the machine's runtime
state, a tmpfs emptied at boot, where systemd keeps its own dynamic-uid
locks (/run/systemd/dynamic-uid).  Where /run is not writable (a read-only
container root), `/var/lib/peloton/uids`, beside the shared sandboxes.  The
directory is *not* configurable and not derived from a work dir or cluster:
an agent claiming elsewhere would guard nothing against the others.  Every
agent walks the same list and takes the first usable entry, so agents on
one machine agree.  A directory owned by another user or writable by others
is refused (whoever could remove a lock file could take a uid in use), not
skipped: skipping would split the agents between two directories.

Cost: one open file per live dynamic-uid run (the agent's descriptor limit
bounds its dynamic-uid runs), an open and a flock per claim, a truncate and
a close per release.  Only an agent that runs as root switches users, so
only such an agent uses this (app.py).
"""

from __future__ import annotations

import fcntl
import logging
import os
import stat
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from peloton.agent.sandbox import supervised
from peloton.core.errors import FailedPrecondition, Unavailable

log = logging.getLogger(__name__)

#: Where agents claim dynamic uids, in order of preference (see the module docstring).
MACHINE_DIRS = (Path("/run/pelotonpy/uids"), Path("/var/lib/peloton/uids"))
#: How long `reclaim` waits for another agent's check of a uid to end.
RECLAIM_TRIES, RECLAIM_PAUSE_SECS = 20, 0.05


def machine_dir(candidates: Sequence[Path] = MACHINE_DIRS) -> Path:
    """The first of `candidates` that is (or can be made) a directory this agent may write
    and nobody else may.  Raises FailedPrecondition when none is usable, or when one
    exists but others could write it."""
    errors = []
    for directory in candidates:
        try:
            directory.mkdir(mode=0o755, parents=True, exist_ok=True)
        except OSError as exc:
            errors.append(f"{directory}: {exc.strerror}")
            continue
        st = os.stat(directory, follow_symlinks=False)
        if (not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid()
                or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)):
            raise FailedPrecondition(
                f"{directory} (the machine's dynamic uid locks) must be a directory owned by uid "
                f"{os.geteuid()} and writable by nobody else (found uid {st.st_uid}, mode "
                f"{stat.filemode(st.st_mode)})")
        if not os.access(directory, os.W_OK):  # e.g. an existing directory on a read-only /run
            errors.append(f"{directory}: not writable")
            continue
        return directory
    raise FailedPrecondition("no directory for the machine's dynamic uid locks: "
                             + "; ".join(errors))


class UidLockDir:
    """`uidpool.UidClaims` over `<directory>/<uid>.lock` files."""

    def __init__(self, directory: Path, *, alive: Callable[[str], bool] = supervised,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.directory = directory
        self._alive = alive
        self._sleep = sleep
        #: uid -> (the locked descriptor, the sandbox of the run holding it)
        self._held: dict[int, tuple[int, str]] = {}

    def claim(self, uid: int, holder: str) -> bool:
        return self._try(uid, holder) is True

    def reclaim(self, uid: int, holder: str) -> bool:
        for attempt in range(RECLAIM_TRIES):
            got = self._try(uid, holder)
            if got is not None:
                return got
            if attempt < RECLAIM_TRIES - 1:
                self._sleep(RECLAIM_PAUSE_SECS)
        return False

    def release(self, uid: int, holder: str) -> None:
        mine = self._held.get(uid)
        if mine is None or mine[1] != holder:
            return
        del self._held[uid]
        try:
            os.ftruncate(mine[0], 0)  # the next claimer need not probe a finished run
        except OSError:
            pass
        os.close(mine[0])

    def close(self) -> None:
        """Let go of every lock without forgetting the runs in the files (the agent stops;
        its runs may live on, protected by their recorded sandboxes)."""
        held, self._held = self._held, {}
        for fd, _holder in held.values():
            os.close(fd)

    def held(self) -> dict[int, str]:
        """uid -> sandbox of every claim this agent holds (for tests and diagnostics)."""
        return {uid: holder for uid, (_fd, holder) in self._held.items()}

    def _try(self, uid: int, holder: str) -> bool | None:
        """True: claimed (or already ours); False: another run has the uid; None: another
        process holds the lock, perhaps only to check it."""
        mine = self._held.get(uid)
        if mine is not None:
            return mine[1] == holder
        try:
            fd = os.open(self.directory / f"{uid}.lock",
                         os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as exc:  # out of descriptors, or the directory went away
            raise Unavailable(f"cannot lock dynamic uid {uid} in {self.directory}: "
                              f"{exc.strerror}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        try:
            recorded = os.pread(fd, 4096, 0).decode(errors="replace").strip()
            if recorded and recorded != holder and self._alive(recorded):
                # Its agent is gone but its run is not (the agent was killed; its
                # supervisor lives on): the uid stays that run's.
                os.close(fd)
                return False
            if recorded:  # a run that ended while its agent was away; release empties it
                os.ftruncate(fd, 0)
            os.pwrite(fd, f"{holder}\n".encode(), 0)
        except OSError as exc:
            os.close(fd)
            raise Unavailable(f"cannot lock dynamic uid {uid} in {self.directory}: "
                              f"{exc.strerror}") from exc
        self._held[uid] = (fd, holder)
        return True
