"""Task port ranges for test clusters: below the kernel's ephemeral range, one per cluster.

Placement cannot know what else on the machine holds a port.  A range inside the kernel's
ephemeral range (net.ipv4.ip_local_port_range, 32768-60999 by default) shares its ports with
every outgoing connection on the machine (gRPC channels, store connections, other test
processes): one such connection on a task's port and the task exits "Address already in
use" and is retried with a service's backoff (30 s, 60 s, 120 s, ...).  When placement gave
the lowest free ports, the retry got the same port again and a rolling create never
finished: the README tour's service block hung for its 200 s that way
(tests/e2e/test_readme_tour.py).  Placement now draws a retry's ports elsewhere
(peloton/core/placement/portpool.py), but a test waiting on a service would still lose a
backoff to each held port.  Two clusters of concurrent pytest processes given the same
range collide the same way.

So each cluster claims a block of `BLOCK` ports below the ephemeral range and above the
privileged ones, clear of `peloton up`'s default agent range (31000-32767, a `make run`
cluster on the same machine) and of the Kubernetes backend's default hostPorts
(28000-29999), with an exclusive `flock` on a file in a directory every test process
shares.  The claim is held until `release` (or until the process ends: the
kernel drops the lock of a killed process, so no claim goes stale).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import random
import time
import weakref
from pathlib import Path

from peloton.agent.config import EPHEMERAL_RANGE_FILE, ephemeral_range

#: Ports of one cluster: `peloton up`'s agents take the first 1000, extra agents the rest.
BLOCK = 2000
#: Where blocks may start: 10000 to 26000, below the Kubernetes backend's hostPorts.
BASES = tuple(range(10000, 28000, BLOCK))
#: The claim files every test process on the machine shares.
CLAIMS = Path("/tmp/peloton-test-task-ports")
#: How long a cluster waits for another process to release a block when all are claimed.
WAIT_S = 120.0


def ephemeral_low(path: Path = EPHEMERAL_RANGE_FILE) -> int:
    """The lowest port the kernel may hand an outgoing connection (32768 when unknown;
    the agent reads the same file to warn of task ports inside the range)."""
    found = ephemeral_range(path)
    return 32768 if found is None else found.begin


def usable_bases(low: int) -> tuple[int, ...]:
    """The block starts whose whole block lies below ephemeral port `low`."""
    return tuple(base for base in BASES if base + BLOCK <= low)


class PortBlock:
    """A claimed block of task ports [base, base + BLOCK), held until `release`."""

    def __init__(self, base: int, fd: int) -> None:
        self.base = base
        self._release = weakref.finalize(self, os.close, fd)

    def release(self) -> None:
        """Give the block back (idempotent)."""
        self._release()


def claim(*, claims: Path = CLAIMS, bases: tuple[int, ...] | None = None,
          wait_s: float = WAIT_S) -> PortBlock:
    """Claim a free block, waiting up to `wait_s` while every block is claimed by others."""
    bases = usable_bases(ephemeral_low()) if bases is None else bases
    if not bases:
        raise AssertionError(f"no task port block of {BLOCK} fits below the ephemeral range "
                             f"(starts at {ephemeral_low()})")
    with contextlib.suppress(FileExistsError):  # another test process made it first
        claims.mkdir(parents=True)
        claims.chmod(0o1777)  # shared by every user's test processes, as /tmp is
    deadline = time.monotonic() + wait_s
    while True:
        # A random starting block: clusters of one process spread out too.
        first = random.randrange(len(bases))
        for base in bases[first:] + bases[:first]:
            block = _try(claims / f"{base}.lock", base)
            if block is not None:
                return block
        if time.monotonic() >= deadline:
            raise AssertionError(f"every task port block in {claims} stayed claimed "
                                 f"for {wait_s:g}s")
        time.sleep(0.5)


def _try(path: Path, base: int) -> PortBlock | None:
    # Read-only is enough to lock, and opens another user's claim file too.
    fd = os.open(path, os.O_RDONLY | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return None
        raise
    return PortBlock(base, fd)
