"""Cassandra cluster tables: resource pools, hosts, secrets, volumes, framework info.

Create is `INSERT ... IF NOT EXISTS` and update `UPDATE ... IF EXISTS`, so
AlreadyExists / NotFound are decided by Cassandra, not by a racy read.
The host and volume tables are small; "hosts in state X" and "volumes of
job Y" scan them and filter, as Peloton did.
"""

from __future__ import annotations

from typing import TypeVar

from peloton.core.errors import AlreadyExists, NotFound
from peloton.core.model.host import HostInfo
from peloton.core.model.respool import ResourcePool
from peloton.core.model.storage_records import FrameworkInfo, SecretInfo, VolumeInfo
from peloton.core.states import HostState
from peloton.storage import codec
from peloton.storage.cassandra.base import CassandraBase, applied

T = TypeVar("T")


class CassandraCluster(CassandraBase):
    """ResourcePoolStore, HostStore, SecretStore, VolumeStore and FrameworkStore."""

    def _one(self, stmt: str, key: str, cls: type[T], what: str) -> T:
        row = self.q1(stmt, key)
        if row is None:
            raise NotFound(f"{what} {key} not found")
        return codec.from_json(cls, row["body"], f"{what} {key}")

    # -- resource pools ----------------------------------------------------
    def create_resource_pool(self, pool: ResourcePool) -> None:
        if not applied(self.q1("respools.create", pool.pool_id, codec.to_json(pool))):
            raise AlreadyExists(f"resource pool {pool.pool_id} already exists")

    def update_resource_pool(self, pool: ResourcePool) -> None:
        if not applied(self.q1("respools.replace", codec.to_json(pool), pool.pool_id)):
            raise NotFound(f"resource pool {pool.pool_id} not found")

    def get_resource_pool(self, pool_id: str) -> ResourcePool:
        return self._one("respools.get", pool_id, ResourcePool, "resource pool")

    def get_resource_pools(self) -> list[ResourcePool]:
        rows = sorted(self.q("respools.all"), key=lambda r: str(r["respool_id"]))
        return [codec.from_json(ResourcePool, r["body"], f"resource pool {r['respool_id']}")
                for r in rows]

    def delete_resource_pool(self, pool_id: str) -> None:
        self.q("respools.delete", pool_id)

    # -- hosts -------------------------------------------------------------
    def put_host(self, host: HostInfo) -> None:
        self.q("host_info.put", host.hostname, host.state.value, codec.to_json(host))

    def get_host(self, hostname: str) -> HostInfo:
        return self._one("host_info.get", hostname, HostInfo, "host")

    def get_hosts(self, state: HostState | None = None) -> list[HostInfo]:
        rows = [r for r in self.q("host_info.all")
                if state is None or r["state"] == state.value]
        rows.sort(key=lambda r: str(r["hostname"]))
        return [codec.from_json(HostInfo, r["body"], f"host {r['hostname']}") for r in rows]

    def delete_host(self, hostname: str) -> None:
        self.q("host_info.delete", hostname)

    # -- secrets -----------------------------------------------------------
    def create_secret(self, secret: SecretInfo) -> None:
        self.q("secrets_by_job.add", secret.job_id, secret.secret_id)
        if not applied(self.q1("secret_info.create", secret.secret_id, secret.job_id,
                               codec.to_json(secret))):
            raise AlreadyExists(f"secret {secret.secret_id} already exists")

    def update_secret(self, secret: SecretInfo) -> None:
        old = self.q1("secret_info.get", secret.secret_id)
        if old is None or not applied(self.q1("secret_info.replace", secret.job_id,
                                              codec.to_json(secret), secret.secret_id)):
            raise NotFound(f"secret {secret.secret_id} not found")
        if old["job_id"] != secret.job_id:
            self.q("secrets_by_job.remove", old["job_id"], secret.secret_id)
            self.q("secrets_by_job.add", secret.job_id, secret.secret_id)

    def get_secret(self, secret_id: str) -> SecretInfo:
        return self._one("secret_info.get", secret_id, SecretInfo, "secret")

    def get_secrets_for_job(self, job_id: str) -> list[SecretInfo]:
        ids = sorted(str(r["secret_id"]) for r in self.q("secrets_by_job.get", job_id))
        results = self.many("secret_info.get", [(i,) for i in ids])
        return [codec.from_json(SecretInfo, rows[0]["body"], f"secret {i}")
                for i, rows in zip(ids, results, strict=True)
                if rows and rows[0]["job_id"] == job_id]

    def delete_secret(self, secret_id: str) -> None:
        old = self.q1("secret_info.get", secret_id)
        self.q("secret_info.delete", secret_id)
        if old is not None:
            self.q("secrets_by_job.remove", old["job_id"], secret_id)

    # -- volumes -----------------------------------------------------------
    def create_volume(self, volume: VolumeInfo) -> None:
        if not applied(self.q1("persistent_volumes.create", volume.volume_id, volume.job_id,
                               codec.to_json(volume))):
            raise AlreadyExists(f"volume {volume.volume_id} already exists")

    def update_volume(self, volume: VolumeInfo) -> None:
        if not applied(self.q1("persistent_volumes.replace", volume.job_id,
                               codec.to_json(volume), volume.volume_id)):
            raise NotFound(f"volume {volume.volume_id} not found")

    def get_volume(self, volume_id: str) -> VolumeInfo:
        return self._one("persistent_volumes.get", volume_id, VolumeInfo, "volume")

    def get_volumes(self, job_id: str | None = None) -> list[VolumeInfo]:
        rows = [r for r in self.q("persistent_volumes.all")
                if job_id is None or r["job_id"] == job_id]
        rows.sort(key=lambda r: str(r["volume_id"]))
        return [codec.from_json(VolumeInfo, r["body"], f"volume {r['volume_id']}") for r in rows]

    def delete_volume(self, volume_id: str) -> None:
        self.q("persistent_volumes.delete", volume_id)

    # -- frameworks --------------------------------------------------------
    def put_framework_info(self, info: FrameworkInfo) -> None:
        self.q("frameworks.put", info.name, codec.to_json(info))

    def get_framework_info(self, name: str) -> FrameworkInfo | None:
        row = self.q1("frameworks.get", name)
        if row is None:
            return None
        return codec.from_json(FrameworkInfo, row["body"], f"framework {name}")
