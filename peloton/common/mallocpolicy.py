"""How many malloc arenas a daemon process may use.

glibc gives each thread that allocates while another holds the main arena an arena of
its own, up to eight per core, and an arena keeps what its busiest moment needed.  Our
daemons run SQLite transactions and gRPC on pools of native threads, so a 10,000-task
write leaves its high-water mark in whichever arenas its threads happened to use, and
the next big job's threads pick others: the process's RSS climbed about 7 MB for every
big job deleted although the Python heap did not grow (tests/security/test_memory.py;
with two arenas the same jobs added about 4 MB each, the bounded caches).  With the GIL
held for almost every allocation, more arenas buy no parallelism here.

`limit_arenas()` sets the limit through mallopt(3) before the daemon starts its threads;
an operator's MALLOC_ARENA_MAX (read by glibc itself) wins, and on a C library without
mallopt (musl, macOS) nothing is changed.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

#: mallopt's parameter number for the arena limit (glibc's M_ARENA_MAX).
M_ARENA_MAX = -8
#: Arenas a daemon may use.
ARENAS = 2


def limit_arenas(arenas: int = ARENAS) -> bool:
    """Cap this process's malloc arenas at `arenas`; True if the limit was set here."""
    if os.environ.get("MALLOC_ARENA_MAX"):
        return False
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_ARENA_MAX, arenas))
