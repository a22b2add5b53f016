"""Which completion-time windows an archive pass queries, and how they move.

Peloton's engine starts with the window [start - age - step, start - age)
and, after every pass, slides it one step back in time, forever: a
catch-up of history, cheap once it runs past the oldest job.  Two gaps in
that scheme are closed here, without changing what it archives:

1. Jobs that finish *after* the archiver started are never in a window
   that slides backwards (Peloton's code leaves this as a TODO).  A
   forward window [newest, now - age) follows the clock: each pass covers
   what aged past `archive_age` since the previous pass.
2. A window with more terminal jobs than one page (`max_archive_entries`)
   lost the rest when it slid on.  Here a window stays put while its page
   comes back full, and the next pass asks for the page after the jobs
   that stayed in hot storage (stream-only mode, other job types, failed
   deletes): pages are sorted by completion time, so deleted jobs simply
   drop out and kept ones are skipped by `offset`.

A window moves only when its pass succeeded; a failed pass (the API or the
sink down) repeats the same windows next time.  State lives in memory: a
restarted archiver starts again at now - age, which is safe because
archiving is idempotent (sinks deduplicate) and hot storage still holds
every job not yet deleted.  Windows are half-open, [lo, hi).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Window:
    """A completion-time range [lo, hi) and the page offset to query it from."""

    lo: float
    hi: float
    offset: int = 0
    #: "forward" (new completions) or "backward" (Peloton's sliding catch-up).
    kind: str = "backward"


class Windows:
    """The forward and backward windows of one archiver; see the module docstring."""

    def __init__(self, start: float, age: float, step: float) -> None:
        head = max(0.0, start - age)
        self.age, self.step = age, step
        self.newest = head
        self.forward_offset = 0
        self.backward = Window(max(0.0, head - step), head)

    def due(self, now: float) -> list[Window]:
        """The windows to archive in a pass at `now`, forward first."""
        due = []
        hi = now - self.age
        if hi > self.newest:
            due.append(Window(self.newest, hi, self.forward_offset, "forward"))
        if self.backward.hi > 0:  # the epoch: nothing can have completed before it
            due.append(self.backward)
        return due

    def done(self, window: Window, kept: int, full: bool) -> None:
        """Record a successful pass over `window`: `kept` jobs stay in hot storage; `full` page?

        A full page means more jobs may wait in the window: stay, skipping
        the kept ones.  Otherwise the forward window catches up to its end
        and the backward one slides one step back (Peloton's move).
        """
        if window.kind == "forward":
            if full:
                self.forward_offset = window.offset + kept
            else:
                self.newest, self.forward_offset = window.hi, 0
            return
        if full:
            self.backward = Window(window.lo, window.hi, window.offset + kept)
        else:
            self.backward = Window(max(0.0, window.lo - self.step), window.lo)
