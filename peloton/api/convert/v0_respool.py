"""v0 respool.ResourcePoolConfig <-> core ResourcePoolConfig, and ResourcePoolInfo out.

Only rules about the wire shape are checked here: each resource kind is one
of cpu / memory / disk / gpu and given once, amounts are finite and >= 0,
percentages are within 0..100, the name is a single path segment.  The tree
rules (limit >= reservation, children within their parent, unique sibling
names, ...) belong to the core pool tree.

Unset wire values: reservation type UNKNOWN_TYPE reads as ELASTIC and policy
UNKNOWN as PriorityFIFO (Peloton's defaults), so a pool written back shows
the explicit values.  A missing controllerLimit / slackLimit message is None
in the core (unchecked / default 20%), a present one keeps its percentage.
"""

from __future__ import annotations

from collections.abc import Sequence

from peloton.api.convert.common import require_amount
from peloton.api.gen.peloton.api.v0.respool import respool_pb2
from peloton.core.errors import InvalidArgument
from peloton.core.model.ids import ROOT_POOL_ID
from peloton.core.model.resources import KINDS, ResourceKind, Resources
from peloton.core.model.respool import (
    ReservationType,
    ResourceConfig,
    ResourcePoolConfig,
    SchedulingPolicy,
)

_TYPES = {respool_pb2.UNKNOWN_TYPE: ReservationType.ELASTIC,
          respool_pb2.ELASTIC: ReservationType.ELASTIC, respool_pb2.STATIC: ReservationType.STATIC}
_TYPES_TO_V0 = {ReservationType.ELASTIC: respool_pb2.ELASTIC,
                ReservationType.STATIC: respool_pb2.STATIC}


def _percent(value: float, field: str) -> float:
    require_amount(value, field)
    if value > 100:
        raise InvalidArgument(f"{field} must be <= 100, got {value}", field=field)
    return value


def resource_config_from_v0(rc: respool_pb2.ResourceConfig, field: str) -> ResourceConfig:
    """One v0 ResourceConfig -> core (kind name checked, amounts >= 0)."""
    try:
        kind = ResourceKind(rc.kind)
    except ValueError:
        names = ", ".join(k.value for k in KINDS)
        raise InvalidArgument(f"{field}.kind: unknown resource kind {rc.kind!r} (use {names})",
                              field=f"{field}.kind") from None
    if rc.type not in _TYPES:
        raise InvalidArgument(f"{field}.type: unknown reservation type {rc.type}",
                              field=f"{field}.type")
    return ResourceConfig(kind=kind,
                          reservation=require_amount(rc.reservation, f"{field}.reservation"),
                          limit=require_amount(rc.limit, f"{field}.limit"),
                          share=require_amount(rc.share, f"{field}.share"), type=_TYPES[rc.type])


def respool_config_from_v0(config: respool_pb2.ResourcePoolConfig) -> ResourcePoolConfig:
    """A v0 ResourcePoolConfig -> core; an unset parent means the root pool."""
    if not config.name or "/" in config.name:
        raise InvalidArgument("name: a pool name is required and may not contain '/'", field="name")
    resources: list[ResourceConfig] = []
    for i, rc in enumerate(config.resources):
        converted = resource_config_from_v0(rc, f"resources[{i}]")
        if any(r.kind is converted.kind for r in resources):
            raise InvalidArgument(f"resources[{i}].kind: {rc.kind!r} is configured twice",
                                  field=f"resources[{i}].kind")
        resources.append(converted)
    if config.policy not in (respool_pb2.UNKNOWN, respool_pb2.PriorityFIFO):
        raise InvalidArgument(f"policy: unknown scheduling policy {config.policy}", field="policy")
    return ResourcePoolConfig(
        name=config.name, parent_id=config.parent.value or ROOT_POOL_ID,
        resources=tuple(resources), owning_team=config.owningTeam,
        ldap_groups=tuple(config.ldapGroups), description=config.description,
        policy=SchedulingPolicy.PRIORITY_FIFO,
        controller_limit_percent=(_percent(config.controllerLimit.maxPercent,
                                           "controllerLimit.maxPercent")
                                  if config.HasField("controllerLimit") else None),
        slack_limit_percent=(_percent(config.slackLimit.maxPercent, "slackLimit.maxPercent")
                             if config.HasField("slackLimit") else None))


def respool_config_to_v0(config: ResourcePoolConfig) -> respool_pb2.ResourcePoolConfig:
    """A core pool config -> v0 ResourcePoolConfig."""
    out = respool_pb2.ResourcePoolConfig(
        name=config.name, owningTeam=config.owning_team, ldapGroups=list(config.ldap_groups),
        description=config.description, policy=respool_pb2.PriorityFIFO)
    out.parent.value = config.parent_id
    for rc in config.resources:
        out.resources.add(kind=rc.kind.value, reservation=rc.reservation, limit=rc.limit,
                          share=rc.share, type=_TYPES_TO_V0[rc.type])
    if config.controller_limit_percent is not None:
        out.controllerLimit.maxPercent = config.controller_limit_percent
    if config.slack_limit_percent is not None:
        out.slackLimit.maxPercent = config.slack_limit_percent
    return out


def respool_path_from_v0(path: respool_pb2.ResourcePoolPath, field: str = "path") -> str:
    """A pool path: absolute, `/` for the root, no empty segments, no trailing slash."""
    value = path.value
    if not value.startswith("/") or (value != "/" and (value.endswith("/") or "//" in value)):
        raise InvalidArgument(f"{field}: a pool path looks like /a/b, got {value!r}", field=field)
    return value


def respool_info_to_v0(pool_id: str, config: ResourcePoolConfig, *, path: str,
                       children: Sequence[str] = (), allocation: Resources | None = None,
                       slack: Resources | None = None) -> respool_pb2.ResourcePoolInfo:
    """A pool as Get / Query show it: config, tree links and per-kind usage (allocation, slack)."""
    out = respool_pb2.ResourcePoolInfo(config=respool_config_to_v0(config))
    out.id.value = pool_id
    out.path.value = path
    if pool_id != ROOT_POOL_ID:
        out.parent.value = config.parent_id
    for child in children:
        out.children.add(value=child)
    if allocation is not None or slack is not None:
        used = allocation or Resources()
        spare = slack or Resources()
        for kind in KINDS:
            out.usage.add(kind=kind.value, allocation=used.get(kind), slack=spare.get(kind))
    return out
