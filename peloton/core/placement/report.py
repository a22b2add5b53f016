"""What placement returns: where each task goes, and why the others could not go anywhere.

Every task that is not placed carries a `PlacementReport` counting, for
each filter, how many hosts it rejected first (a host is counted once,
under the earliest filter in the chain that rejects it), so a user asking
why a task is pending reads e.g.

    0 of 5,000 hosts fit: 4,200 insufficient cpu, 800 lack label zone=a

(constraint rejections read as what the host is like, core/words.py).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from enum import StrEnum

from peloton.core import words
from peloton.core.model.ids import TaskId


class RejectCode(StrEnum):
    """Why a filter rejected a host; the value is the phrase used in reports."""

    NOT_DESIRED_HOST = "not the desired host"
    HOST_NOT_UP = "host not up"
    GPU_HOST_RESERVED = "gpu host kept for gpu tasks"
    EXCLUSIVE_HOST = "exclusive host"
    HOST_CONSTRAINT = "constraint"
    INSUFFICIENT_CPU = "insufficient cpu"
    INSUFFICIENT_MEMORY = "insufficient memory"
    INSUFFICIENT_DISK = "insufficient disk"
    INSUFFICIENT_GPU = "insufficient gpu"
    INSUFFICIENT_PORTS = "insufficient ports"
    TASK_CONSTRAINT = "task constraint"


#: Codes whose detail is the whole phrase (what a host failing the constraint is like).
_PHRASE = frozenset({RejectCode.HOST_CONSTRAINT, RejectCode.TASK_CONSTRAINT})


@dataclass(frozen=True, slots=True)
class Rejection:
    """One filter's verdict against one host: a code plus detail (e.g. the constraint).

    For constraint codes the detail is a phrase about the host ("lacks label zone=a",
    "already runs a task labelled job=j") and is what the report shows.
    """

    code: RejectCode
    detail: str = ""

    def __str__(self) -> str:
        if self.detail and self.code in _PHRASE:
            return self.detail
        return f"{self.code.value} {self.detail}" if self.detail else self.code.value


@dataclass(frozen=True, slots=True)
class PlacementReport:
    """Per-filter rejection counts over every host, for one task that was not placed.

    `hosts_fit` > 0 happens when the task itself fit but its gang did not;
    `note` then names the gang member that could not be placed.
    """

    hosts_total: int
    hosts_fit: int
    rejections: tuple[tuple[Rejection, int], ...]
    note: str = ""

    @staticmethod
    def from_counts(hosts_total: int, hosts_fit: int, counts: dict[Rejection, int],
                    note: str = "") -> PlacementReport:
        """Build with rejections sorted by count, most common first."""
        ordered = tuple(sorted(counts.items(), key=lambda kv: (-kv[1], str(kv[0]))))
        return PlacementReport(hosts_total, hosts_fit, ordered, note)

    def count(self, code: RejectCode) -> int:
        """Hosts rejected first by filters with this code."""
        return sum(n for r, n in self.rejections if r.code is code)

    def __str__(self) -> str:
        text = f"{self.hosts_fit:,} of {self.hosts_total:,} hosts fit"
        if self.rejections:
            text += ": " + ", ".join(
                f"{n:,} {words.for_many(str(r)) if n != 1 and r.code in _PHRASE else r}"
                for r, n in self.rejections)
        if self.note:
            text += f" ({self.note})"
        return text


@dataclass(frozen=True, slots=True)
class TaskPlacement:
    """A task assigned to a host, with the concrete port numbers picked for it."""

    task_id: TaskId
    hostname: str
    agent_id: str
    ports: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Unplaced:
    """A task left unplaced, with the reason."""

    task_id: TaskId
    report: PlacementReport


@dataclass(frozen=True, slots=True)
class PlacementPlan:
    """The outcome of one `Placer.place` call, in input order."""

    placed: tuple[TaskPlacement, ...]
    unplaced: tuple[Unplaced, ...]

    def by_host(self) -> dict[str, list[TaskPlacement]]:
        """Placements grouped per host (one launch call per host, as Peloton does)."""
        out: dict[str, list[TaskPlacement]] = defaultdict(list)
        for p in self.placed:
            out[p.hostname].append(p)
        return dict(out)
