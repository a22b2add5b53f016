"""Contracts of the cluster tables: resource pools, hosts, secrets, volumes, frameworks.

These are small, rarely written tables, each owned by one daemon (the
resource manager owns pools, the host manager hosts and framework info,
the job manager secrets and volumes), so plain create / put / delete with
existence checks is enough; none of them is written by compare-and-set.
"""

from __future__ import annotations

from typing import Protocol

from peloton.core.model.host import HostInfo
from peloton.core.model.respool import ResourcePool
from peloton.core.model.storage_records import FrameworkInfo, SecretInfo, VolumeInfo
from peloton.core.states import HostState


class ResourcePoolStore(Protocol):
    """Resource pool configurations (the tree is rebuilt from them by the resource manager)."""

    def create_resource_pool(self, pool: ResourcePool) -> None:
        """Store a new pool.  AlreadyExists if the id is taken."""
        ...

    def update_resource_pool(self, pool: ResourcePool) -> None:
        """Replace a pool's config.  NotFound if absent."""
        ...

    def get_resource_pool(self, pool_id: str) -> ResourcePool:
        """One pool; NotFound if absent."""
        ...

    def get_resource_pools(self) -> list[ResourcePool]:
        """Every pool, sorted by id."""
        ...

    def delete_resource_pool(self, pool_id: str) -> None:
        """Delete a pool.  Idempotent."""
        ...


class HostStore(Protocol):
    """Host maintenance records: state, goal state, labels, current and desired pool."""

    def put_host(self, host: HostInfo) -> None:
        """Create or replace a host's record.  Idempotent."""
        ...

    def get_host(self, hostname: str) -> HostInfo:
        """One host; NotFound if absent."""
        ...

    def get_hosts(self, state: HostState | None = None) -> list[HostInfo]:
        """Every host (or those in `state`), sorted by hostname."""
        ...

    def delete_host(self, hostname: str) -> None:
        """Forget a host.  Idempotent."""
        ...


class SecretStore(Protocol):
    """Secrets of jobs."""

    def create_secret(self, secret: SecretInfo) -> None:
        """Store a new secret.  AlreadyExists if the id is taken."""
        ...

    def update_secret(self, secret: SecretInfo) -> None:
        """Replace a secret.  NotFound if absent."""
        ...

    def get_secret(self, secret_id: str) -> SecretInfo:
        """One secret; NotFound if absent."""
        ...

    def get_secrets_for_job(self, job_id: str) -> list[SecretInfo]:
        """Secrets of one job, sorted by id."""
        ...

    def delete_secret(self, secret_id: str) -> None:
        """Delete a secret.  Idempotent."""
        ...


class VolumeStore(Protocol):
    """Persistent volumes of stateful jobs."""

    def create_volume(self, volume: VolumeInfo) -> None:
        """Store a new volume record.  AlreadyExists if the id is taken."""
        ...

    def update_volume(self, volume: VolumeInfo) -> None:
        """Replace a volume record.  NotFound if absent."""
        ...

    def get_volume(self, volume_id: str) -> VolumeInfo:
        """One volume; NotFound if absent."""
        ...

    def get_volumes(self, job_id: str | None = None) -> list[VolumeInfo]:
        """Every volume (or those of one job), sorted by id."""
        ...

    def delete_volume(self, volume_id: str) -> None:
        """Delete a volume record.  Idempotent."""
        ...


class FrameworkStore(Protocol):
    """What the host manager registered with its cluster manager, by framework name."""

    def put_framework_info(self, info: FrameworkInfo) -> None:
        """Create or replace.  Idempotent."""
        ...

    def get_framework_info(self, name: str) -> FrameworkInfo | None:
        """The stored record; None if this framework never registered."""
        ...
