"""The Cassandra store: the per-table-group modules composed over one CqlSession."""

from __future__ import annotations

from peloton.storage.cassandra.bulk import CassandraBulk
from peloton.storage.cassandra.cluster import CassandraCluster
from peloton.storage.cassandra.cron import CassandraCron
from peloton.storage.cassandra.history import CassandraHistory
from peloton.storage.cassandra.index import CassandraJobQuery
from peloton.storage.cassandra.jobs import CassandraJobs
from peloton.storage.cassandra.leaders import CassandraLeaders
from peloton.storage.cassandra.schema import CQL_SCHEMA_VERSIONS, READ_VERSIONS
from peloton.storage.cassandra.session import CqlSession, DriverSession
from peloton.storage.cassandra.tasks import CassandraTasks
from peloton.storage.schema import SchemaMismatch, SchemaStatus
from peloton.storage.store import Store, StoreOptions

#: Tables the backend writes besides the ones the copy tool scans.
DERIVED_TABLES = ("job_index", "job_index_by_state", "job_index_by_owner",
                  "job_index_by_respool", "job_index_by_label", "job_names_by_job",
                  "task_config_versions", "pod_event_instances", "updates_by_job",
                  "secrets_by_job", "copy_checkpoints", "cron_jobs", "leader_epochs")


class CassandraStore(CassandraJobs, CassandraJobQuery, CassandraTasks, CassandraHistory,
                     CassandraCluster, CassandraCron, CassandraBulk, CassandraLeaders):
    """A Store over Cassandra; see peloton/storage/store.py for the contract."""

    backend = "cassandra"

    def __init__(self, url: str, session: CqlSession, options: StoreOptions) -> None:
        self.url = url
        self.s = session
        self.options = options

    def schema_status(self) -> SchemaStatus:
        """The highest applied CQL migration against the versions this code knows."""
        try:
            rows = self.s.execute(READ_VERSIONS, ())
        except SchemaMismatch:  # no migrations table: nothing was ever applied
            rows = []
        current = f"{max(int(r['version']) for r in rows):04d}" if rows else None
        return SchemaStatus(current, CQL_SCHEMA_VERSIONS)

    def close(self) -> None:
        """Disconnect from the cluster."""
        self.s.close()

    def __repr__(self) -> str:
        return f"CassandraStore({self.url!r})"


def open_cassandra_store(url: str, options: StoreOptions) -> Store:
    """Backend factory for cassandra:// URLs (see registry.py).

    The keyspace must exist and be migrated by `peloton migrate schema up`
    (schema changes in Cassandra need agreement across the cluster, so the
    store never creates tables implicitly, even with `options.bootstrap`).
    """
    session = DriverSession(url, options)
    store: Store = CassandraStore(session.url, session, options)
    return store
