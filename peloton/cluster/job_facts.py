"""What the job APIs' authorization needs to know about jobs and pools, read from the store.

The job guard (peloton/api/auth_jobs.py) asks who owns a job or a cron job,
which job a workflow belongs to, and the path of a pool; the composition roots (`peloton
up`, the job manager process) give it this reader over the cluster's store,
so authorization needs nothing from the job manager's memory.
"""

from __future__ import annotations

from peloton.core.errors import DataCorruption, InvalidArgument, NotFound
from peloton.storage import Store

ROOT_POOL = "root"
_MAX_DEPTH = 64


class StoreJobFacts:
    """JobFacts over a Store (reads only)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def job_owner_and_pool(self, job_id: str) -> tuple[str, str] | None:
        """(owner, pool id) of the job's newest config; None if there is none."""
        try:
            spec = self.store.get_job_config(job_id)
        except (NotFound, InvalidArgument, DataCorruption):
            return None
        return spec.owner, spec.respool_id

    def job_of_update(self, update_id: str) -> str | None:
        """The job of a workflow; None if there is none."""
        try:
            return self.store.get_update(update_id).job_id
        except (NotFound, InvalidArgument, DataCorruption):
            return None

    def cron_job_owner(self, name: str) -> str | None:
        """The owner of a cron job's template; None if there is no such cron job."""
        try:
            return self.store.get_cron_job(name).template.owner
        except (NotFound, InvalidArgument, DataCorruption):
            return None

    def pool_path(self, pool_id: str) -> str | None:
        """"/a/b" for a pool; "/" for the root; None if unknown."""
        if pool_id == ROOT_POOL:
            return "/"
        names: list[str] = []
        current = pool_id
        for _ in range(_MAX_DEPTH):
            if current == ROOT_POOL:
                return "/" + "/".join(reversed(names))
            try:
                pool = self.store.get_resource_pool(current)
            except (NotFound, InvalidArgument, DataCorruption):
                return None
            names.append(pool.config.name)
            current = pool.config.parent_id
        return None
