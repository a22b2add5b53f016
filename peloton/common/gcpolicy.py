"""How often the cyclic garbage collector runs in a daemon process.

CPython's defaults (a young collection every 700 net container allocations, a
full one every 100 young ones, subject to the 25 % rule) suit short scripts.  A job
manager holds hundreds of thousands of long-lived task runtimes, specs and dicts,
and a full collection walks all of them: with the defaults, full collections took
a quarter of the scheduler's CPU in the 30,000-task benchmark (2 s of 11.6 s), and
they grow with the number of tasks held.  Almost nothing we keep forms reference
cycles (frozen dataclasses, tuples, dicts of them); the cycles that do arise
(exceptions with their tracebacks, greenlet frames) die young and are still
collected by the young generations.  So the young generation is made large and
full collections rare; `freeze()` moves everything alive now into the permanent
generation, which no collection walks (called once a daemon has loaded its state).
"""

from __future__ import annotations

import gc

#: Young-generation size and the collections between older ones (CPython: 700, 10, 10).
THRESHOLDS = (50_000, 50, 100)


def tune() -> None:
    """Set the thresholds above (idempotent)."""
    gc.set_threshold(*THRESHOLDS)


def freeze() -> None:
    """Exempt every object alive now from future collections (state loaded at start)."""
    gc.collect()
    gc.freeze()
