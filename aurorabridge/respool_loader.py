"""The resource pool bridge jobs run in, looked up once and created when missing.

Jobs go to their role's pool `path/<role>` (default `/AuroraBridge/<role>`), GPU
jobs to `gpu_path/<role>`: a pool per role, as Aurora keeps a quota per role.  A
role's pool is created on first use under the bridge's pool with the configured
resources (the bridge's pool grows to hold it: children's reservations sum within
their parent's); setQuota sets its reservation and limit.  The first use of the
bridge's pool looks it up (v0 ResourceManager.LookupResourcePoolID); if it
does not exist it is created under the root from the configured default
spec (Peloton's development pool spec unless configured), and the id is
cached for the life of the process.  Lookups that fail for transient reasons
are retried for `retry_for_s`, as Peloton's loader retried until the request
deadline; a pool that cannot be found or made is reported as Unavailable so
Aurora clients retry.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from aurorabridge.config import RespoolSettings
from aurorabridge.ports import PelotonPort
from peloton.api.gen.peloton.api.v0.respool import respool_pb2
from peloton.core.errors import AlreadyExists, NotFound, Unavailable

log = logging.getLogger(__name__)


class RespoolLoader:
    """Maps "is this a GPU job?" to a resource pool id."""

    def __init__(self, port: PelotonPort, settings: RespoolSettings,
                 sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._port = port
        self._settings = settings
        self._sleep = sleep
        self._clock = clock
        self._ids: dict[str, str] = {}

    def path(self, gpu: bool, role: str = "") -> str:
        """The pool path for a job (of `role`: the role's pool under the bridge's)."""
        base = self._settings.gpu_path if gpu and self._settings.gpu_path else self._settings.path
        return f"{base.rstrip('/')}/{role}" if role else base

    def load(self, gpu: bool = False, role: str = "") -> str:
        """The pool id for a job, creating the pool (and the bridge's, for a role's) if needed."""
        path = self.path(gpu, role)
        cached = self._ids.get(path)
        if cached:
            return cached
        deadline = self._clock() + self._settings.retry_for_s
        while True:
            try:
                pool_id = self._lookup(path) or (self._create_role(gpu, role) if role
                                                 else self._create(path))
                self._ids[path] = pool_id
                return pool_id
            except (Unavailable, AlreadyExists) as exc:  # AlreadyExists: another bridge won the race
                if self._clock() >= deadline:
                    raise Unavailable(f"resource pool {path}: {exc.message}") from None
                self._sleep(self._settings.retry_interval_s)

    def lookup(self, path: str) -> str | None:
        """The id of the pool at `path`, or None."""
        return self._lookup(path)

    def _lookup(self, path: str) -> str | None:
        try:
            resp = self._port.lookup_respool_id(path)
        except NotFound:
            return None
        return str(resp.id.value) or None

    def _create(self, path: str) -> str:
        root = self._lookup("/")
        if root is None:
            raise Unavailable("the root resource pool is not available yet")
        s = self._settings
        config = respool_pb2.ResourcePoolConfig(
            name=path.strip("/").rsplit("/", 1)[-1], owningTeam=s.owning_team,
            description="Pool of jobs created through the Aurora bridge",
            resources=[respool_pb2.ResourceConfig(kind=r.kind, reservation=r.reservation, limit=r.limit,
                                                  share=r.share) for r in s.resources],
            policy=respool_pb2.PriorityFIFO,
            controllerLimit=respool_pb2.ControllerLimit(maxPercent=s.controller_limit_percent),
            slackLimit=respool_pb2.SlackLimit(maxPercent=s.slack_limit_percent))
        config.parent.value = self._parent_id(path, root)
        resp = self._port.create_respool(config)
        log.info("created resource pool %s (%s)", path, resp.result.value)
        return str(resp.result.value)

    def _create_role(self, gpu: bool, role: str) -> str:
        parent_id = self.load(gpu)
        parent = self.get(parent_id).config
        s = self._settings
        config = respool_pb2.ResourcePoolConfig(
            name=role, owningTeam=s.owning_team,
            description=f"Pool of role {role}'s jobs created through the Aurora bridge (its quota)",
            resources=[respool_pb2.ResourceConfig(kind=r.kind, reservation=r.reservation, limit=r.limit,
                                                  share=r.share) for r in s.resources],
            policy=respool_pb2.PriorityFIFO, controllerLimit=parent.controllerLimit,
            slackLimit=parent.slackLimit)
        config.parent.value = parent_id
        self._make_room(parent_id, "", {r.kind: (r.reservation, r.limit) for r in config.resources})
        resp = self._port.create_respool(config)
        log.info("created resource pool %s (%s)", self.path(gpu, role), resp.result.value)
        return str(resp.result.value)

    def set_limits(self, pool_id: str, wanted: dict[str, float]) -> None:
        """Reserve and limit `pool_id` to `wanted` (kind -> amount), its parent grown to hold it."""
        config = respool_pb2.ResourcePoolConfig()
        config.CopyFrom(self.get(pool_id).config)
        existing = {r.kind: r for r in config.resources}
        for kind, amount in wanted.items():
            res = existing.get(kind) or config.resources.add(kind=kind, share=1.0)
            res.reservation = res.limit = amount
        self._make_room(config.parent.value, pool_id,
                        {r.kind: (r.reservation, r.limit) for r in config.resources})
        self.update(pool_id, config)

    def _make_room(self, parent_id: str, child_id: str, new: dict[str, tuple[float, float]]) -> None:
        """Grow the bridge's pool so its child `child_id` ("" for a new one) fits with `new`
        (kind -> (reservation, limit)): children's reservations may not sum above their
        parent's, nor a child's limit exceed its.  The bridge's pool is never shrunk."""
        if not parent_id or parent_id == "root":
            return
        info = self.get(parent_id)
        siblings: dict[str, float] = {}
        for other in info.children:
            if other.value != child_id:
                for r in self.get(other.value).config.resources:
                    siblings[r.kind] = siblings.get(r.kind, 0.0) + r.reservation
        config = respool_pb2.ResourcePoolConfig()
        config.CopyFrom(info.config)
        existing = {r.kind: r for r in config.resources}
        changed = False
        for kind, (reservation, limit) in new.items():
            res = existing.get(kind) or config.resources.add(kind=kind, share=1.0)
            needed = siblings.get(kind, 0.0) + reservation
            if needed > res.reservation or limit > res.limit:
                res.reservation = max(res.reservation, needed)
                res.limit = max(res.limit, limit, res.reservation)
                changed = True
        if changed:
            self.update(parent_id, config)

    def _parent_id(self, path: str, root: str) -> str:
        parent = path.strip("/").rsplit("/", 1)
        if len(parent) == 1:
            return root
        found = self._lookup("/" + parent[0])
        if found is None:
            raise NotFound(f"parent pool /{parent[0]} of {path} does not exist")
        return found

    def get(self, pool_id: str) -> Any:
        """The ResourcePoolInfo of `pool_id`."""
        return self._port.get_respool(pool_id).poolinfo

    def update(self, pool_id: str, config: Any) -> None:
        """Replace the config of `pool_id`."""
        self._port.update_respool(pool_id, config)
