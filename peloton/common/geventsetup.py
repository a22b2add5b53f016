"""Make the process cooperative: gevent monkey-patching plus gRPC's gevent mode.

Must run before anything imports socket/threading users (grpc, kazoo,
psycopg).  The hub threadpool is enlarged because gRPC's gevent mode
parks blocking calls there: with the default 10 threads, nine or more
concurrent in-process gRPC calls deadlock (seen on these machines).
"""

from __future__ import annotations

import os

# Set before gRPC starts (importing this module comes first in every daemon and in `peloton`).
# Our processes fork only to exec; gevent's subprocess forks in Python, and gRPC's fork
# handlers then restart its poller in the child, which closes every descriptor before exec:
# the child printed "epoll_wait error: Bad file descriptor" and hung or aborted (a probe of
# `true` failed; an agent started by a benchmark never came up).  No child here uses gRPC.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

_done = False

#: Threads gRPC may park blocking calls on; 64 was enough in every measurement here.
HUB_THREADPOOL_SIZE = 64


def setup() -> None:
    """Patch the standard library for gevent and initialise gRPC's gevent support; idempotent."""
    global _done
    if _done:
        return
    from gevent import monkey

    monkey.patch_all()
    import gevent
    import grpc.experimental.gevent as grpc_gevent

    gevent.get_hub().threadpool.maxsize = HUB_THREADPOOL_SIZE
    grpc_gevent.init_gevent()
    _done = True
