"""Quota and tiers: getQuota, setQuota (AuroraAdmin), getTierConfigs.

Aurora keeps a quota per role; Peloton budgets resource pools.  Each role's
jobs run in the role's own pool (`/AuroraBridge/<role>`, created on first
use: respool_loader.py), so a role's quota is its pool's limit (cpu cores,
memory MB, disk MB, GPUs): getQuota reads it (zero for a role that has no
pool yet; reads create nothing), setQuota creates the pool if needed and sets
its reservation and limit to the quota (Aurora's quota is a guarantee, and
Peloton runs non-preemptible tasks only within a reservation), growing the
bridge's pool to hold it, and the same on the role's GPU pool when it has one.
The resource manager enforces them: a role's tasks beyond its quota wait
PENDING in its pool, with the reason in getPendingReason.
Consumption is computed per role from its live jobs (instances x task
resources), production tasks apart from the others; Peloton has no
dedicated hosts, so dedicated consumption is empty.

getTierConfigs answers Peloton's bridge's tiers: clients call it to check
the scheduler is alive and to validate tier names.
"""

from __future__ import annotations

from typing import Any

from aurorabridge.atop.job_key import check_identifier
from aurorabridge.handlers.context import BridgeContext, HandlerFn
from aurorabridge.handlers.jobs import listed_jobs
from aurorabridge.responses import ok
from aurorabridge.thrift_api import api
from peloton.core.errors import InvalidArgument
from peloton.core.model.resources import check_amount

#: Aurora resource field -> Peloton respool kind.
KINDS = (("numCpus", "cpu"), ("ramMb", "memory"), ("diskMb", "disk"), ("numGpus", "gpu"))


def _aggregate(amounts: dict[str, float]) -> Any:
    resources = [api.Resource(**{field: (amounts.get(field, 0.0) if field == "numCpus"
                                         else int(amounts.get(field, 0)))}) for field, _ in KINDS]
    return api.ResourceAggregate(resources=resources, numCpus=amounts.get("numCpus", 0.0),
                                 ramMb=int(amounts.get("ramMb", 0)), diskMb=int(amounts.get("diskMb", 0)))


def _task_amounts(task: Any) -> dict[str, float]:
    out: dict[str, float] = {}
    for res in task.resources or ():
        for field, _ in KINDS:
            value = getattr(res, field)
            if value is not None:
                out[field] = float(value)
    for field in ("numCpus", "ramMb", "diskMb"):
        if field not in out and getattr(task, field) is not None:
            out[field] = float(getattr(task, field))
    return out


def get_quota(ctx: BridgeContext, args: Any) -> Any:
    role = check_identifier(args.ownerRole, "ownerRole")
    limits: dict[str, float] = {}
    pool_id = ctx.respools.lookup(ctx.respools.path(False, role))
    if pool_id is not None:
        by_kind = {r.kind: r.limit for r in ctx.respools.get(pool_id).config.resources}
        limits = {field: by_kind.get(kind, 0.0) for field, kind in KINDS}
    prod: dict[str, float] = {}
    other: dict[str, float] = {}
    for summary, config in listed_jobs(ctx, role):
        bucket = prod if config.task_config.production else other
        for field, amount in _task_amounts(config.task_config).items():
            bucket[field] = bucket.get(field, 0.0) + amount * summary.instance_count
    result = api.GetQuotaResult(quota=_aggregate(limits), prodSharedConsumption=_aggregate(prod),
                                nonProdSharedConsumption=_aggregate(other),
                                prodDedicatedConsumption=_aggregate({}),
                                nonProdDedicatedConsumption=_aggregate({}))
    return ok(api.Result(getQuotaResult=result))


def set_quota(ctx: BridgeContext, args: Any) -> Any:
    role = check_identifier(args.ownerRole, "ownerRole")
    if args.quota is None:
        raise InvalidArgument("quota is required", field="quota")
    wanted = _task_amounts(args.quota)
    for field, value in wanted.items():  # the pools' rule, before any pool is touched
        check_amount(value, f"quota.{field}")
    if not wanted:
        raise InvalidArgument("quota names no resources", field="quota")
    wanted = {kind: wanted[field] for field, kind in KINDS if field in wanted}
    ctx.respools.set_limits(ctx.respools.load(False, role), wanted)
    paths = [ctx.respools.path(False, role)]
    gpu_path = ctx.respools.path(True, role)
    if gpu_path not in paths and (gpu_pool := ctx.respools.lookup(gpu_path)) is not None:
        ctx.respools.set_limits(gpu_pool, wanted)
        paths.append(gpu_path)
    return ok(None, f"quota of role {role} set on resource pool {' and '.join(paths)}")


def get_tier_configs(ctx: BridgeContext, args: Any) -> Any:
    tiers = [api.TierConfig(name="revocable", settings={"preemptible": "true", "revocable": "true"}),
             api.TierConfig(name="preferred", settings={"preemptible": "false", "revocable": "false"}),
             api.TierConfig(name="preemptible", settings={"preemptible": "true", "revocable": "false"})]
    return ok(api.Result(getTierConfigResult=api.GetTierConfigResult(defaultTierName="preemptible",
                                                                      tiers=tiers)))


HANDLERS: dict[str, HandlerFn] = {
    "getQuota": get_quota,
    "setQuota": set_quota,
    "getTierConfigs": get_tier_configs,
}
