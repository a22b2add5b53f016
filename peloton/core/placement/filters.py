"""Feasibility filters: can this host take this task?

Each filter answers twice: `ok` is the fast yes/no the placer calls while
searching; `check` returns the `Rejection` a report shows, or None when the
host passes, and is only used to explain tasks that found no host.  A
*static* filter reads only the host's class (state, labels, gpu-ness), so
the placer caches its verdict per (needs, class); the others read free
capacity and the labels of tasks already on, or assigned to, the host.  The
chain's order, cheapest first, is set in stack.py.

Constraint semantics follow Peloton's host manager: HOST leaves are
evaluated by `HostConstraintFilter` against host labels, TASK leaves by
`TaskConstraintFilter` against task-label counts, each treating leaves of
the other kind as not applicable (neutral inside AND / OR).  Every host also
has the label `hostname=<its name>`, as in Peloton; a constraint that names
`hostname` depends on the host, not only its class, so it is evaluated per
host by `HostnameConstraintFilter` instead of the cached class verdict.

To add a filter: write a class with `static`, `ok` and `check` (the
`HostFilter` protocol) and add it to the chain in stack.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from peloton.core import words
from peloton.core.model.constraints import (
    Label,
    LabelKind,
    Verdict,
    evaluate,
    explain_mismatch,
    has_kind,
    names_host_label_key,
)
from peloton.core.model.host import EXCLUSIVE_ATTRIBUTE, HOSTNAME_LABEL_KEY
from peloton.core.placement.hosts import HostRecord
from peloton.core.placement.report import RejectCode, Rejection
from peloton.core.placement.request import PlacementNeeds
from peloton.core.states import HostState

#: The resource rejections are shared constants (reports count them by identity).
NO_CPU = Rejection(RejectCode.INSUFFICIENT_CPU)
NO_MEMORY = Rejection(RejectCode.INSUFFICIENT_MEMORY)
NO_DISK = Rejection(RejectCode.INSUFFICIENT_DISK)
NO_GPU = Rejection(RejectCode.INSUFFICIENT_GPU)


class CompiledNeeds:
    """A `PlacementNeeds` with everything filters ask for precomputed, plus its verdict cache."""

    __slots__ = (
        "constraint",
        "cpu",
        "disk",
        "domain_leaves",
        "gpu",
        "host_leaves",
        "mem",
        "names_exclusive",
        "names_hostname",
        "needs",
        "ports",
        "revocable",
        "static_ok",
        "static_why",
        "task_leaves",
    )

    def __init__(self, needs: PlacementNeeds) -> None:
        self.needs = needs
        #: Fixed-point units, compared exactly with the host records' free capacity.
        self.cpu, self.mem, self.disk, self.gpu = needs.resources.units
        self.ports = needs.ports
        self.revocable = needs.revocable
        self.constraint = needs.constraint
        self.host_leaves = has_kind(needs.constraint, LabelKind.HOST)
        self.task_leaves = has_kind(needs.constraint, LabelKind.TASK)
        self.domain_leaves = has_kind(needs.constraint, LabelKind.DOMAIN)
        self.names_exclusive = names_host_label_key(needs.constraint, EXCLUSIVE_ATTRIBUTE)
        #: HOST leaves about `hostname`: the host constraint is then checked per host.
        self.names_hostname = names_host_label_key(needs.constraint, HOSTNAME_LABEL_KEY)
        #: class id -> passes every static filter (filled lazily by the placer).
        self.static_ok: dict[int, bool] = {}
        #: class id -> first static rejection, or None (filled lazily by reports).
        self.static_why: dict[int, Rejection | None] = {}


class HostFilter(Protocol):
    """One feasibility check."""

    #: True if the verdict depends only on the host's class (cacheable per class).
    static: bool

    def ok(self, host: HostRecord, cn: CompiledNeeds) -> bool:
        """The host passes."""

    def check(self, host: HostRecord, cn: CompiledNeeds) -> Rejection | None:
        """None if the host passes (exactly when `ok`), else why it does not."""


class HostUpFilter:
    """Only hosts in state UP take new tasks (DRAINING/DRAINED/DOWN do not)."""

    static = True
    _REJECT = Rejection(RejectCode.HOST_NOT_UP)

    def ok(self, host: HostRecord, cn: CompiledNeeds) -> bool:
        """Whether `host` passes, for the search."""
        return host.cls.state is HostState.UP

    def check(self, host: HostRecord, cn: CompiledNeeds) -> Rejection | None:
        """None if `host` passes, else the rejection a report shows."""
        return None if self.ok(host, cn) else self._REJECT


class ScarceGpuFilter:
    """GPU hosts are kept for tasks that use GPUs (Peloton's scarce_resource_types)."""

    static = True
    _REJECT = Rejection(RejectCode.GPU_HOST_RESERVED)

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled

    def ok(self, host: HostRecord, cn: CompiledNeeds) -> bool:
        """Whether `host` passes, for the search."""
        return not (self.enabled and host.cls.has_gpu and cn.gpu <= 0)

    def check(self, host: HostRecord, cn: CompiledNeeds) -> Rejection | None:
        """None if `host` passes, else the rejection a report shows."""
        return None if self.ok(host, cn) else self._REJECT


class ExclusiveHostFilter:
    """Hosts labelled `peloton/exclusive` only take tasks whose constraint names that label."""

    static = True
    _REJECT = Rejection(RejectCode.EXCLUSIVE_HOST)

    def ok(self, host: HostRecord, cn: CompiledNeeds) -> bool:
        """Whether `host` passes, for the search."""
        return cn.names_exclusive or not host.cls.exclusive

    def check(self, host: HostRecord, cn: CompiledNeeds) -> Rejection | None:
        """None if `host` passes, else the rejection a report shows."""
        return None if self.ok(host, cn) else self._REJECT


class HostConstraintFilter:
    """HOST-kind constraint leaves against the host's own labels (per class).

    Constraints naming `hostname` pass here and are checked per host by
    `HostnameConstraintFilter`.
    """

    static = True

    def ok(self, host: HostRecord, cn: CompiledNeeds) -> bool:
        """Whether `host` passes, for the search."""
        if not cn.host_leaves or cn.constraint is None or cn.names_hostname:
            return True
        counts = host.cls.label_counts
        return evaluate(cn.constraint, LabelKind.HOST,
                        lambda lb: counts.get(lb, 0)) is not Verdict.MISMATCH

    def check(self, host: HostRecord, cn: CompiledNeeds) -> Rejection | None:
        """None if `host` passes, else the rejection a report shows."""
        if self.ok(host, cn):
            return None
        assert cn.constraint is not None
        counts = host.cls.label_counts
        culprit = explain_mismatch(cn.constraint, LabelKind.HOST, lambda lb: counts.get(lb, 0))
        return Rejection(RejectCode.HOST_CONSTRAINT, words.unmet(culprit))


def _with_hostname(host: HostRecord) -> Callable[[Label], int]:
    """Label counts of a host's own labels plus `hostname=<name>` (Peloton adds it), counted
    once even when the backend reports it as a label too (Kubernetes nodes do), as the
    feasibility check counts it."""
    counts = host.cls.label_counts
    name = host.hostname

    def count(lb: Label) -> int:
        if lb.key == HOSTNAME_LABEL_KEY and lb.value == name:
            return max(counts.get(lb, 0), 1)
        return counts.get(lb, 0)
    return count


class HostnameConstraintFilter:
    """HOST-kind constraints that name `hostname`, per host, with `hostname` as a host label."""

    static = False

    def ok(self, host: HostRecord, cn: CompiledNeeds) -> bool:
        """Whether `host` passes, for the search."""
        if not cn.names_hostname or cn.constraint is None:
            return True
        return evaluate(cn.constraint, LabelKind.HOST,
                        _with_hostname(host)) is not Verdict.MISMATCH

    def check(self, host: HostRecord, cn: CompiledNeeds) -> Rejection | None:
        """None if `host` passes, else the rejection a report shows."""
        if self.ok(host, cn):
            return None
        assert cn.constraint is not None
        culprit = explain_mismatch(cn.constraint, LabelKind.HOST, _with_hostname(host))
        return Rejection(RejectCode.HOST_CONSTRAINT, str(culprit))


class ResourceFilter:
    """Free gpu, cpu (revocable cpu for revocable tasks), memory and disk cover the task."""

    static = False

    def ok(self, host: HostRecord, cn: CompiledNeeds) -> bool:
        """Whether `host` passes, for the search."""
        cpu = host.rcpu if cn.revocable else host.cpu
        return (cn.cpu <= cpu and cn.mem <= host.mem and cn.disk <= host.disk
                and cn.gpu <= host.gpu)

    def check(self, host: HostRecord, cn: CompiledNeeds) -> Rejection | None:
        """None if `host` passes, else the rejection a report shows."""
        # GPUs first: for a GPU task "insufficient gpu" is the useful answer, and
        # reports rely on this order to count whole partitions at once (explain.py).
        if cn.gpu > host.gpu:
            return NO_GPU
        cpu = host.rcpu if cn.revocable else host.cpu
        if cn.cpu > cpu:
            return NO_CPU
        if cn.mem > host.mem:
            return NO_MEMORY
        if cn.disk > host.disk:
            return NO_DISK
        return None


class PortFilter:
    """The host has as many free ports as the task asks for."""

    static = False
    _REJECT = Rejection(RejectCode.INSUFFICIENT_PORTS)

    def ok(self, host: HostRecord, cn: CompiledNeeds) -> bool:
        """Whether `host` passes, for the search."""
        return cn.ports <= host.ports.free

    def check(self, host: HostRecord, cn: CompiledNeeds) -> Rejection | None:
        """None if `host` passes, else the rejection a report shows."""
        return None if self.ok(host, cn) else self._REJECT


class TaskConstraintFilter:
    """TASK-kind leaves against labels of tasks on the host, including ones placed this batch.

    This is how "at most N instances of a job per host" works: the job's
    tasks carry a label, and the constraint is `task:<label> LESS_THAN N`.
    """

    static = False

    def ok(self, host: HostRecord, cn: CompiledNeeds) -> bool:
        """Whether `host` passes, for the search."""
        if not cn.task_leaves or cn.constraint is None:
            return True
        counts = host.task_labels
        return evaluate(cn.constraint, LabelKind.TASK,
                        lambda lb: counts.get(lb, 0)) is not Verdict.MISMATCH

    def check(self, host: HostRecord, cn: CompiledNeeds) -> Rejection | None:
        """None if `host` passes, else the rejection a report shows."""
        if self.ok(host, cn):
            return None
        assert cn.constraint is not None
        counts = host.task_labels
        culprit = explain_mismatch(cn.constraint, LabelKind.TASK, lambda lb: counts.get(lb, 0))
        return Rejection(RejectCode.TASK_CONSTRAINT, words.unmet(culprit))
