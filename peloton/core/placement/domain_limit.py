"""The DOMAIN-limit filter: at most N tasks with a label per value of a host attribute.

Aurora's `limit` constraint on any attribute (rack, zone, ...) becomes a
DOMAIN leaf (peloton/core/model/constraints.py): "fewer than N tasks carrying
label L on all hosts whose attribute A has this host's value".  The count is
over every host of the index, including tasks placed earlier in the same
batch, so a batch cannot overfill a rack.  A host without attribute A does not
satisfy the leaf; a host with several values of A must satisfy it for each.

Sums per (attribute, value, label) are computed from the index once per change
of its task labels (`HostIndex.task_label_version`), only for the leaves the
needs being placed actually have: other needs never pay for this filter.
"""

from __future__ import annotations

from peloton.core.model.constraints import (
    Label,
    LabelConstraint,
    LabelKind,
    Verdict,
    evaluate,
    explain_mismatch,
)
from peloton.core.placement.filters import CompiledNeeds
from peloton.core.placement.hosts import HostIndex, HostRecord
from peloton.core.placement.report import RejectCode, Rejection

#: The count a host without the domain attribute gets: no limit is that high.
MISSING_ATTRIBUTE = 1 << 62


class DomainLimitFilter:
    """DOMAIN leaves against per-domain task-label counts over the whole index."""

    static = False

    def __init__(self, index: HostIndex) -> None:
        self.index = index
        self._version = -1
        #: (attribute, label) -> {attribute value: tasks with the label on hosts with that value}
        self._sums: dict[tuple[str, Label], dict[str, int]] = {}

    def _counts(self, attribute: str, label: Label) -> dict[str, int]:
        if self._version != self.index.task_label_version:
            self._sums.clear()
            self._version = self.index.task_label_version
        key = (attribute, label)
        sums = self._sums.get(key)
        if sums is None:
            sums = {}
            for host in self.index.records():
                n = host.task_labels.get(label, 0)
                for lb in host.cls.labels:
                    if lb.key == attribute:
                        sums[lb.value] = sums.get(lb.value, 0) + n
            self._sums[key] = sums
        return sums

    def count(self, host: HostRecord, leaf: LabelConstraint) -> int:
        """Tasks with the leaf's label in the host's domain (the largest, for several values)."""
        values = [lb.value for lb in host.cls.labels if lb.key == leaf.domain]
        if not values:
            return MISSING_ATTRIBUTE
        sums = self._counts(leaf.domain, leaf.label)
        return max(sums.get(v, 0) for v in values)

    def ok(self, host: HostRecord, cn: CompiledNeeds) -> bool:
        """Whether `host` passes, for the search."""
        constraint = cn.constraint
        if constraint is None or not cn.domain_leaves:
            return True
        return evaluate(constraint, LabelKind.DOMAIN, lambda lb: 0,
                        lambda leaf: self.count(host, leaf)) is not Verdict.MISMATCH

    def check(self, host: HostRecord, cn: CompiledNeeds) -> Rejection | None:
        """None if `host` passes, else the rejection a report shows."""
        if self.ok(host, cn):
            return None
        assert cn.constraint is not None
        culprit = explain_mismatch(cn.constraint, LabelKind.DOMAIN, lambda lb: 0,
                                   lambda leaf: self.count(host, leaf))
        if isinstance(culprit, LabelConstraint) and culprit.kind is LabelKind.DOMAIN:
            return Rejection(RejectCode.TASK_CONSTRAINT, self._phrase(host, culprit))
        return Rejection(RejectCode.TASK_CONSTRAINT, str(culprit))

    def _phrase(self, host: HostRecord, leaf: LabelConstraint) -> str:
        """The host in words, as the report's other constraint phrases ("lacks label rack")."""
        count = self.count(host, leaf)
        if count == MISSING_ATTRIBUTE:
            return f"lacks label {leaf.domain}"
        # LESS_THAN n on the tasks already there: n tasks per domain at most, this one included.
        return (f"already has {count} tasks labelled {leaf.label.key}={leaf.label.value} in its "
                f"{leaf.domain} (the limit is {leaf.requirement} per {leaf.domain})")
