"""The resource pool bridge jobs run in, looked up once and created when missing.

Jobs go to `path` (default `/AuroraBridge`), GPU jobs to `gpu_path`.  The
first use looks the pool up (v0 ResourceManager.LookupResourcePoolID); if it
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

    def path(self, gpu: bool) -> str:
        """The pool path for a job."""
        return self._settings.gpu_path if gpu and self._settings.gpu_path else self._settings.path

    def load(self, gpu: bool = False) -> str:
        """The pool id for a job, creating the pool if needed."""
        path = self.path(gpu)
        cached = self._ids.get(path)
        if cached:
            return cached
        deadline = self._clock() + self._settings.retry_for_s
        while True:
            try:
                pool_id = self._lookup(path) or self._create(path)
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
