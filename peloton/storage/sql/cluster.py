"""SQL cluster tables: resource pools, hosts, secrets, volumes, framework info.

Small tables with plain create / replace / delete; the only indexes
beyond primary keys serve "hosts in state X" and "secrets / volumes of
job Y".
"""

from __future__ import annotations

from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from peloton.core.errors import AlreadyExists, NotFound
from peloton.core.model.host import HostInfo
from peloton.core.model.respool import ResourcePool
from peloton.core.model.storage_records import FrameworkInfo, SecretInfo, VolumeInfo
from peloton.core.states import HostState
from peloton.storage import codec
from peloton.storage.sql.database import Database
from peloton.storage.sql.tables import frameworks, hosts, respools, secrets, volumes

T = TypeVar("T")


def respool_row(pool: ResourcePool) -> dict[str, Any]:
    """The respools row of a pool."""
    return {"pool_id": pool.pool_id, "parent_id": pool.config.parent_id,
            "body": codec.to_json(pool)}


def host_row(host: HostInfo) -> dict[str, Any]:
    """The hosts row of a host."""
    return {"hostname": host.hostname, "state": host.state.value, "body": codec.to_json(host)}


def secret_row(secret: SecretInfo) -> dict[str, Any]:
    """The secrets row of a secret."""
    return {"secret_id": secret.secret_id, "job_id": secret.job_id,
            "body": codec.to_json(secret)}


def volume_row(volume: VolumeInfo) -> dict[str, Any]:
    """The volumes row of a volume."""
    return {"volume_id": volume.volume_id, "job_id": volume.job_id,
            "body": codec.to_json(volume)}


def framework_row(info: FrameworkInfo) -> dict[str, Any]:
    """The frameworks row of a framework registration."""
    return {"name": info.name, "body": codec.to_json(info)}


class SqlCluster:
    """ResourcePoolStore, HostStore, SecretStore, VolumeStore and FrameworkStore over SQL."""

    db: Database

    # -- shared shapes -----------------------------------------------------
    def _insert(self, what: str, table: sa.Table, row: dict[str, Any], key: str) -> None:
        self.db.run(f"create {what}", lambda c: c.execute(sa.insert(table), [row]),
                    duplicate=lambda: AlreadyExists(f"{what} {key} already exists"))

    def _replace(self, what: str, table: sa.Table, row: dict[str, Any], key: str) -> None:
        pk = table.primary_key.columns.values()[0]

        def tx(conn: Connection) -> None:
            values = {k: v for k, v in row.items() if k != pk.name}
            if conn.execute(sa.update(table).where(pk == key).values(**values)).rowcount == 0:
                raise NotFound(f"{what} {key} not found")
        self.db.run(f"update {what}", tx)

    def _get(self, what: str, table: sa.Table, key: str, cls: type[T]) -> T:
        pk = table.primary_key.columns.values()[0]
        q = sa.select(table.c.body).where(pk == key)
        body = self.db.run(f"get {what}", lambda c: c.execute(q).scalar(), write=False)
        if body is None:
            raise NotFound(f"{what} {key} not found")
        return codec.from_json(cls, body, f"{what} {key}")

    def _list(self, what: str, table: sa.Table, cls: type[T], *where: Any) -> list[T]:
        pk = table.primary_key.columns.values()[0]
        q = sa.select(pk, table.c.body).where(*where).order_by(pk)
        rows = self.db.run(f"list {what}s", lambda c: list(c.execute(q)), write=False)
        return [codec.from_json(cls, r[1], f"{what} {r[0]}") for r in rows]

    def _delete(self, what: str, table: sa.Table, key: str) -> None:
        pk = table.primary_key.columns.values()[0]
        self.db.run(f"delete {what}", lambda c: c.execute(sa.delete(table).where(pk == key)))

    # -- resource pools ----------------------------------------------------
    def create_resource_pool(self, pool: ResourcePool) -> None:
        self._insert("resource pool", respools, respool_row(pool), pool.pool_id)

    def update_resource_pool(self, pool: ResourcePool) -> None:
        self._replace("resource pool", respools, respool_row(pool), pool.pool_id)

    def get_resource_pool(self, pool_id: str) -> ResourcePool:
        return self._get("resource pool", respools, pool_id, ResourcePool)

    def get_resource_pools(self) -> list[ResourcePool]:
        return self._list("resource pool", respools, ResourcePool)

    def delete_resource_pool(self, pool_id: str) -> None:
        self._delete("resource pool", respools, pool_id)

    # -- hosts -------------------------------------------------------------
    def put_host(self, host: HostInfo) -> None:
        self.db.run("put host", lambda c: self.db.upsert(c, hosts, [host_row(host)]))

    def get_host(self, hostname: str) -> HostInfo:
        return self._get("host", hosts, hostname, HostInfo)

    def get_hosts(self, state: HostState | None = None) -> list[HostInfo]:
        where = [] if state is None else [hosts.c.state == state.value]
        return self._list("host", hosts, HostInfo, *where)

    def delete_host(self, hostname: str) -> None:
        self._delete("host", hosts, hostname)

    # -- secrets -----------------------------------------------------------
    def create_secret(self, secret: SecretInfo) -> None:
        self._insert("secret", secrets, secret_row(secret), secret.secret_id)

    def update_secret(self, secret: SecretInfo) -> None:
        self._replace("secret", secrets, secret_row(secret), secret.secret_id)

    def get_secret(self, secret_id: str) -> SecretInfo:
        return self._get("secret", secrets, secret_id, SecretInfo)

    def get_secrets_for_job(self, job_id: str) -> list[SecretInfo]:
        return self._list("secret", secrets, SecretInfo, secrets.c.job_id == job_id)

    def delete_secret(self, secret_id: str) -> None:
        self._delete("secret", secrets, secret_id)

    # -- volumes -----------------------------------------------------------
    def create_volume(self, volume: VolumeInfo) -> None:
        self._insert("volume", volumes, volume_row(volume), volume.volume_id)

    def update_volume(self, volume: VolumeInfo) -> None:
        self._replace("volume", volumes, volume_row(volume), volume.volume_id)

    def get_volume(self, volume_id: str) -> VolumeInfo:
        return self._get("volume", volumes, volume_id, VolumeInfo)

    def get_volumes(self, job_id: str | None = None) -> list[VolumeInfo]:
        where = [] if job_id is None else [volumes.c.job_id == job_id]
        return self._list("volume", volumes, VolumeInfo, *where)

    def delete_volume(self, volume_id: str) -> None:
        self._delete("volume", volumes, volume_id)

    # -- frameworks --------------------------------------------------------
    def put_framework_info(self, info: FrameworkInfo) -> None:
        self.db.run("put framework info",
                    lambda c: self.db.upsert(c, frameworks, [framework_row(info)]))

    def get_framework_info(self, name: str) -> FrameworkInfo | None:
        try:
            return self._get("framework", frameworks, name, FrameworkInfo)
        except NotFound:
            return None
