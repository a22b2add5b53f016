"""Aurora SLA policies and tiers as Peloton for Python's SLA settings.

A task's `slaPolicy` and whether its tier is production travel with the pod as the label
`peloton/sla-policy` (peloton.core.sla.task_sla_label), which SLA-aware host drains read:
Aurora's default tiers make only `preferred` production (getTierConfigs), and a task with
no tier is in the default tier, `preemptible`.  slaDrainHosts' default policy becomes the
drain request's (see handlers/maintenance.py).
"""

from __future__ import annotations

from typing import Any

from peloton.core.model.constraints import Label
from peloton.core.model.sla_policy import CoordinatorSla, CountSla, PercentageSla, SlaPolicy
from peloton.core.sla import TaskSla, task_sla_label

#: Aurora's production tier (not preemptible, not revocable) among the bridge's tiers.
PRODUCTION_TIERS = frozenset({"preferred"})


def policy(sla: Any) -> SlaPolicy | None:
    """A Thrift SlaPolicy (already range-checked) as a core policy."""
    if sla is None:
        return None
    if sla.percentageSlaPolicy is not None:
        inner = sla.percentageSlaPolicy
        return PercentageSla(float(inner.percentage or 0.0), int(inner.durationSecs or 0))
    if sla.countSlaPolicy is not None:
        inner = sla.countSlaPolicy
        return CountSla(int(inner.count or 0), int(inner.durationSecs or 0))
    if sla.coordinatorSlaPolicy is not None:
        inner = sla.coordinatorSlaPolicy
        return CoordinatorSla(str(inner.coordinatorUrl or ""), str(inner.statusKey or "drain"))
    return None


def sla_label(task: Any) -> Label:
    """The pod label carrying `task`'s own SLA policy and whether it is production."""
    return task_sla_label(TaskSla(policy(task.slaPolicy), task.tier in PRODUCTION_TIERS))
