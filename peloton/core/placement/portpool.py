"""Dynamic ports: one host's free port numbers, and which of them a run gets.

A port the scheduler believes free may be held by something it does not
know about (an outgoing connection of another program that the kernel gave
a port of its ephemeral range).  A run bound to it exits "Address already
in use", and its retry is often placed on the same host.  Had placement
handed out the lowest free ports, the retry would get the same port and fail
the same way, forever.  Apache Aurora shuffles an offer's ports and takes the
first ones (its PortMapper); we do the same deterministically, so that the
what-if simulator and test harnesses replaying a round get the same ports:

* `port_draw(task, run)` is a number in [0, 2**32): a stable hash of the task
  id (crc32, not Python's salted `hash()`) plus `run` times 2**32 / phi
  (Fibonacci hashing).  So the same run always draws the same number, and
  successive runs of one task step by 0.618 of the way round the free ports:
  while a host's free ports are unchanged, run r + 1's ports never overlap
  run r's (when a run asks for at most 0.38 * free - 1 of them: 3 of 1,000
  easily), and the first runs land spread out rather than at random (the
  three-distance theorem).
* `PortPool.take(count, draw)` starts at the free port at position
  `draw * free / 2**32` and takes the next `count` free ports from there,
  wrapping round to the lowest.  One walk over the ranges per take, and at
  most one range split, so a host's free list stays short; a run's ports
  are adjacent where the free ranges allow.  A start drawn evenly over the
  free ports avoids a given busy port with probability 1 - count / free, the
  same as `count` independent draws would.

Invariant: `ranges` are sorted, disjoint, non-adjacent [begin, end] pairs
(each begin <= end), and `free` is the number of ports they hold.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable

from peloton.core.errors import InvalidArgument
from peloton.core.model.ids import TaskId
from peloton.core.model.resources import PortRange

#: Draws are fractions of the free ports, in units of 1 / 2**32.
DRAW_BITS = 32
_DRAW_MASK = (1 << DRAW_BITS) - 1
#: 2**32 / phi, rounded to odd: successive runs' draws step by 0.618 of the way round.
RUN_STEP = 0x9E3779B9


def port_draw(task_id: TaskId, run: int) -> int:
    """Where in a host's free ports run `run` of `task_id` starts taking, as a fraction of
    2**32 (see the module docstring): the same for the same run, 0.618 further on for the
    next run of the task."""
    return (zlib.crc32(f"{task_id.job_id}-{task_id.instance}".encode())
            + run * RUN_STEP) & _DRAW_MASK


class PortPool:
    """Free port numbers of one host as sorted, disjoint [begin, end] ranges."""

    __slots__ = ("free", "ranges")

    def __init__(self, ranges: Iterable[PortRange]) -> None:
        self.ranges, self.free = _merged(sorted([r.begin, r.end] for r in ranges))

    def take(self, count: int, draw: int = 0) -> tuple[int, ...]:
        """Remove and return `count` free ports: the next ones from the free port at position
        `draw * free / 2**32`, wrapping round to the lowest (`port_draw` gives `draw`).

        Draw 0 gives the lowest free ports.  Raises InvalidArgument when fewer than `count`
        ports are free.
        """
        free = self.free
        if count > free:
            raise InvalidArgument(f"{count} ports requested, {free} free", field="ports")
        if count <= 0:
            return ()
        skip = ((draw & _DRAW_MASK) * free) >> DRAW_BITS
        head = min(count, free - skip)
        out = self._take_from(*self._locate(skip), head)
        if head < count:
            # Wrapped: the ports before the start are where they were, lowest first.
            out.extend(self._take_from(0, 0, count - head))
        self.free = free - count
        return tuple(out)

    def _locate(self, skip: int) -> tuple[int, int]:
        """(range index, offset in it) of the free port at position `skip`, walking from
        whichever end of the ranges is nearer."""
        ranges = self.ranges
        if skip * 2 < self.free:
            i = 0
            rng = ranges[0]
            while skip > rng[1] - rng[0]:
                skip -= rng[1] - rng[0] + 1
                i += 1
                rng = ranges[i]
            return i, skip
        back = self.free - 1 - skip  # counted down from the highest free port
        i = len(ranges) - 1
        rng = ranges[i]
        while back > rng[1] - rng[0]:
            back -= rng[1] - rng[0] + 1
            i -= 1
            rng = ranges[i]
        return i, rng[1] - rng[0] - back

    def _take_from(self, i: int, offset: int, count: int) -> list[int]:
        """Remove `count` free ports from `offset` into range `i` on, in order (no
        wrapping: the caller asks for no more than there are up to the highest)."""
        ranges = self.ranges
        out: list[int] = []
        if offset:
            rng = ranges[i]
            start = rng[0] + offset
            end = rng[1]
            if start + count <= end:
                # Inside one range: it splits in two around the ports taken.
                ranges.insert(i + 1, [start + count, end])
                rng[1] = start - 1
                out.extend(range(start, start + count))
                return out
            rng[1] = start - 1
            out.extend(range(start, end + 1))
            count -= end - start + 1
            i += 1
        while count:
            rng = ranges[i]
            n = rng[1] - rng[0] + 1
            if n <= count:
                out.extend(range(rng[0], rng[1] + 1))
                del ranges[i]
                count -= n
            else:
                out.extend(range(rng[0], rng[0] + count))
                rng[0] += count
                count = 0
        return out

    def give(self, ports: Iterable[int]) -> None:
        """Return ports taken earlier (gang rollback or release)."""
        self.ranges, self.free = _merged(sorted(self.ranges + [[p, p] for p in ports]))


def _merged(spans: list[list[int]]) -> tuple[list[list[int]], int]:
    """Sorted [begin, end] spans (reused, not copied) with overlapping and adjacent ones
    joined, and how many ports they hold."""
    out: list[list[int]] = []
    free = 0
    last: list[int] | None = None
    for span in spans:
        if last is not None and span[0] <= last[1] + 1:
            if span[1] > last[1]:
                free += span[1] - last[1]
                last[1] = span[1]
        else:
            out.append(span)
            free += span[1] - span[0] + 1
            last = span
    return out, free
