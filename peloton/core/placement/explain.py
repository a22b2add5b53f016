"""Reason reports: how many hosts each filter rejected for a task that found none.

A report runs the whole filter chain over every host and counts each host
once, under the first filter that rejects it.  Two shortcuts keep that
close to O(classes + hosts with enough cpu) instead of O(hosts x filters):

* static filters depend only on the host class, so a rejected class is
  counted in one step;
* when resources are the first dynamic filter (as the stack wires it), gpu
  being the first resource it checks, a GPU task is refused by every host
  of the gpu-less partition at once; and for a task without gpus, cpu is
  effectively checked first, so the hosts of a passing class whose free
  cpu is below the task's -- the prefix of the partition's sorted keys --
  are counted by subtraction, and only hosts with enough cpu are checked
  one by one.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from peloton.core.placement.filters import (
    NO_CPU,
    NO_GPU,
    CompiledNeeds,
    HostFilter,
    ResourceFilter,
)
from peloton.core.placement.hosts import INDEX_MASK, HostIndex, HostRecord, lower_key
from peloton.core.placement.report import PlacementReport, RejectCode, Rejection
from peloton.core.placement.request import TaskRequest

NOT_DESIRED = Rejection(RejectCode.NOT_DESIRED_HOST)



class _Tally:
    """Counts per rejection; keyed by identity while counting (most rejections are
    shared constants, and hashing a dataclass per host is slow), merged by value at
    the end."""

    __slots__ = ("counts", "seen")

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}
        self.seen: dict[int, Rejection] = {}

    def add(self, rejection: Rejection, n: int = 1) -> None:
        """Count `n` hosts rejected with `rejection`."""
        key = id(rejection)
        if key in self.counts:
            self.counts[key] += n
        else:
            self.seen[key] = rejection
            self.counts[key] = n

    def merged(self) -> dict[Rejection, int]:
        """Counts per distinct rejection value."""
        out: dict[Rejection, int] = {}
        for key, n in self.counts.items():
            if n:
                rej = self.seen[key]
                out[rej] = out.get(rej, 0) + n
        return out


def static_rejection(static: Sequence[HostFilter], host: HostRecord,
                     cn: CompiledNeeds) -> Rejection | None:
    """The first static filter's rejection of `host`'s class (cached in `cn`)."""
    cls_id = host.cls.class_id
    if cls_id in cn.static_why:
        return cn.static_why[cls_id]
    out = None
    for f in static:
        out = f.check(host, cn)
        if out is not None:
            break
    cn.static_why[cls_id] = out
    return out


def _dynamic(dynamic: Sequence[HostFilter], host: HostRecord, cn: CompiledNeeds,
             tally: _Tally) -> bool:
    """Run the dynamic chain on one host; True if it fits, else tally the rejection."""
    for f in dynamic:
        rejection = f.check(host, cn)
        if rejection is not None:
            tally.add(rejection)
            return False
    return True


def explain(index: HostIndex, static: Sequence[HostFilter], dynamic: Sequence[HostFilter],
            cn: CompiledNeeds, req: TaskRequest) -> PlacementReport:
    """The report for `req` against the hosts of `index` as they are now."""
    tally = _Tally()
    fit = 0
    if req.desired_host_only:
        target = index.by_name.get(req.desired_host)
        others = len(index) - (target is not None)
        if others:
            tally.add(NOT_DESIRED, others)
        if target is not None:
            rejection = static_rejection(static, target, cn)
            if rejection is not None:
                tally.add(rejection)
            elif _dynamic(dynamic, target, cn, tally):
                fit += 1
        return PlacementReport.from_counts(len(index), fit, tally.merged())
    passing: dict[bool, set[int]] = {False: set(), True: set()}
    passing_hosts = {False: 0, True: 0}
    for members in index.by_class.values():
        if not members:
            continue
        first = next(iter(members.values()))
        rejection = static_rejection(static, first, cn)
        if rejection is not None:
            tally.add(rejection, len(members))
        else:
            gpu_host = first.cls.has_gpu
            passing[gpu_host].add(first.cls.class_id)
            passing_hosts[gpu_host] += len(members)
    shortcut = bool(dynamic) and isinstance(dynamic[0], ResourceFilter)
    for gpu_host, classes in passing.items():
        if not classes:
            continue
        if shortcut and cn.gpu > 0 and not gpu_host:
            # No gpus at all, and gpu is the first resource checked.
            tally.add(NO_GPU, passing_hosts[gpu_host])
        elif shortcut and cn.gpu <= 0:
            # Passing static filters implies UP, so these hosts are all in the
            # partition; those below the cpu bound fail on cpu (gpu passes: none asked).
            keys = index.partitions[gpu_host]
            ordered = keys.rcpu_keys if cn.revocable else keys.cpu_keys
            checked = 0
            for key in ordered[bisect.bisect_left(ordered, lower_key(cn.cpu)):]:
                host = index.hosts[key & INDEX_MASK]
                assert host is not None
                if host.cls.class_id in classes:
                    checked += 1
                    fit += _dynamic(dynamic, host, cn, tally)
            tally.add(NO_CPU, passing_hosts[gpu_host] - checked)
        else:
            for cls_id in classes:
                for host in index.by_class[cls_id].values():
                    fit += _dynamic(dynamic, host, cn, tally)
    return PlacementReport.from_counts(len(index), fit, tally.merged())
