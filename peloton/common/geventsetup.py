"""Make the process cooperative: the one concurrency model of every daemon and component test.

`setup()` must run before anything imports socket/threading users (grpc, kazoo,
psycopg); every entry point (`peloton up`, `peloton <daemon>`, `peloton agent`, the
bridge, the archiver, the UI) and tests/conftest.py call it first.  It:

* monkey-patches the standard library: threads, locks, sleeps, sockets, select and
  subprocess become greenlets and cooperative waits on one hub per process;
* initialises gRPC's gevent mode, whose blocking calls park on the hub's thread pool.
  That pool is enlarged because with the default 10 threads, nine or more concurrent
  in-process gRPC calls deadlock (seen on these machines).  Nothing else uses that
  pool: blocking C calls (sqlite3) go to their own `peloton.common.blocking` pool;
* caps the process's malloc arenas before its threads start (peloton.common.mallocpolicy),
  so native thread pools do not each keep a big write's high-water mark;
* sets the garbage collector's thresholds for a process holding much long-lived
  state (peloton.common.gcpolicy), and a shorter GIL switch interval: a SQLite
  thread gives the GIL up around every row it steps (executemany), and each time it
  wants it back it waits for the hub to reach a switch point; at Python's default of
  5 ms a 20,000-row insert beside a busy hub took twice as long as at 1 ms;
* installs gevent's SIGCHLD handling: from here on gevent reaps every child process,
  and keeps the exit status of each one it watches.  `os.posix_spawn`, `os.fork` and
  `subprocess` are gevent's (patched), which watch a child from its birth, and
  `os.waitpid` / `Popen.wait` are cooperative and return that status.  So the rule for
  children: start them only through those functions (never the original ones, never a
  SIGCHLD handler of one's own), and wait for them with those functions.
"""

from __future__ import annotations

import os
import sys

from peloton.common import gcpolicy, mallocpolicy

# Set before gRPC starts (importing this module comes first in every daemon and in `peloton`).
# Our processes fork only to exec; gevent's subprocess forks in Python, and gRPC's fork
# handlers then restart its poller in the child, which closes every descriptor before exec:
# the child printed "epoll_wait error: Bad file descriptor" and hung or aborted (a probe of
# `true` failed; an agent started by a benchmark never came up).  No child here uses gRPC.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

_done = False

#: Seconds a thread may hold the GIL while another waits for it (Python's default: 0.005).
SWITCH_INTERVAL = 0.001
#: Threads gRPC may park blocking calls on; 64 was enough in every measurement here.
HUB_THREADPOOL_SIZE = 64


def setup() -> None:
    """Patch the standard library for gevent, initialise gRPC's gevent support and
    gevent's child reaping; idempotent."""
    global _done
    if _done:
        return
    mallocpolicy.limit_arenas()
    from gevent import monkey

    monkey.patch_all()
    import gevent
    import grpc.experimental.gevent as grpc_gevent

    hub = gevent.get_hub()
    hub.threadpool.maxsize = HUB_THREADPOOL_SIZE
    grpc_gevent.init_gevent()
    # Without this, a child started by the patched os.posix_spawn is watched but never
    # reported until something else installs the handler (gevent.subprocess does): its
    # waitpid would wait forever.
    hub.loop.install_sigchld()
    gcpolicy.tune()
    sys.setswitchinterval(SWITCH_INTERVAL)
    _done = True
