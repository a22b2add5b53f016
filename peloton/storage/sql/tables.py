"""The SQL tables, as SQLAlchemy Core metadata (the schema of the newest migration).

Each table holds the columns queries filter or sort on, plus `body`: the
whole value as JSON from peloton/storage/codec.py.  Every query the
backend runs is served by a primary key or one of the indexes below
(tests/contract/test_sql_plans.py checks SQLite's plans).

The migrations in migrations/sql/versions/ must produce exactly this
schema; tests/contract/test_schema.py compares the two on both databases.

`jobs` is the runtime table and the job index in one row: its runtime
columns are written by the revision CAS, its config columns (name, owner,
pool, labels, search text) from the newest config version, so a query is
one indexed scan with no join except for labels (`job_labels`).
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
)

#: Alembic revision ids, oldest first; the last is the version this code needs.
SCHEMA_VERSIONS: tuple[str, ...] = ("0001", "0002", "0003", "0004")

metadata = MetaData()

#: Text compared byte-wise in every database, so that SQL orders strings exactly as Python
#: does (PostgreSQL's default collation follows the locale and would not).
Str = String().with_variant(String(collation="C"), "postgresql")

job_configs = Table(
    "job_configs", metadata,
    Column("job_id", Str, primary_key=True),
    Column("version", BigInteger, primary_key=True),
    Column("created_at", Float, nullable=False),
    Column("body", Text, nullable=False),
)

jobs = Table(
    "jobs", metadata,
    Column("job_id", Str, primary_key=True),
    # runtime part: NULL until the runtime is stored (mid-create, mid-copy)
    Column("revision", BigInteger),
    Column("state", Str),
    Column("creation_time", Float),
    Column("completion_time", Float),
    Column("update_time", Float),
    Column("runtime", Text),
    # index part, from config version `config_version`
    Column("config_version", BigInteger),
    Column("name", Str),
    Column("name_lower", Str),
    Column("job_type", Str),
    Column("owner", Str),
    Column("owning_team", Str),
    Column("respool_id", Str),
    Column("instance_count", Integer),
    Column("labels", Text),
    Column("sla", Text),
    Column("search_text", Text),
    Index("ix_jobs_state", "state", "creation_time"),
    Index("ix_jobs_owner", "owner", "creation_time"),
    Index("ix_jobs_respool", "respool_id", "creation_time"),
    Index("ix_jobs_name", "name"),
    Index("ix_jobs_creation_time", "creation_time"),
    Index("ix_jobs_completion_time", "completion_time"),
)

job_labels = Table(
    "job_labels", metadata,
    Column("job_id", Str, primary_key=True),
    Column("key", Str, primary_key=True),
    Column("value", Str, primary_key=True),
    Index("ix_job_labels_key_value", "key", "value"),
)

job_names = Table(
    "job_names", metadata,
    Column("name", Str, primary_key=True),
    Column("job_id", Str, primary_key=True),
    Column("update_time", Float, nullable=False),
    Column("body", Text, nullable=False),
    Index("ix_job_names_name_time", "name", "update_time"),
    Index("ix_job_names_job", "job_id"),
)

active_jobs = Table(
    "active_jobs", metadata,
    Column("job_id", Str, primary_key=True),
)

task_configs = Table(
    "task_configs", metadata,
    Column("job_id", Str, primary_key=True),
    Column("version", BigInteger, primary_key=True),
    # -1 is the job's default config, as in Peloton's task_config_v2
    Column("instance", Integer, primary_key=True),
    Column("body", Text, nullable=False),
)

task_runtimes = Table(
    "task_runtimes", metadata,
    Column("job_id", Str, primary_key=True),
    Column("instance", Integer, primary_key=True),
    Column("state", Str, nullable=False),
    Column("revision", BigInteger, nullable=False),
    Column("body", Text, nullable=False),
    Index("ix_task_runtimes_job_state", "job_id", "state"),
)

pod_events = Table(
    "pod_events", metadata,
    Column("job_id", Str, primary_key=True),
    Column("instance", Integer, primary_key=True),
    Column("run_id", BigInteger, primary_key=True),
    Column("time_us", BigInteger, primary_key=True),
    Column("state", Str, primary_key=True),
    Column("expires_at", Float, nullable=False),
    Column("body", Text, nullable=False),
    Index("ix_pod_events_expires_at", "expires_at"),
)

updates = Table(
    "updates", metadata,
    Column("update_id", Str, primary_key=True),
    Column("job_id", Str, nullable=False),
    Column("state", Str, nullable=False),
    Column("revision", BigInteger, nullable=False),
    Column("creation_time", Float, nullable=False),
    Column("body", Text, nullable=False),
    Index("ix_updates_job", "job_id", "creation_time"),
)

workflow_events = Table(
    "workflow_events", metadata,
    Column("update_id", Str, primary_key=True),
    # -1 is the workflow itself
    Column("instance", Integer, primary_key=True),
    Column("time_us", BigInteger, primary_key=True),
    Column("state", Str, primary_key=True),
    Column("body", Text, nullable=False),
)

respools = Table(
    "respools", metadata,
    Column("pool_id", Str, primary_key=True),
    Column("parent_id", Str, nullable=False),
    Column("body", Text, nullable=False),
)

hosts = Table(
    "hosts", metadata,
    Column("hostname", Str, primary_key=True),
    Column("state", Str, nullable=False),
    Column("body", Text, nullable=False),
    Index("ix_hosts_state", "state"),
)

secrets = Table(
    "secrets", metadata,
    Column("secret_id", Str, primary_key=True),
    Column("job_id", Str, nullable=False),
    Column("body", Text, nullable=False),
    Index("ix_secrets_job", "job_id"),
)

volumes = Table(
    "volumes", metadata,
    Column("volume_id", Str, primary_key=True),
    Column("job_id", Str, nullable=False),
    Column("body", Text, nullable=False),
    Index("ix_volumes_job", "job_id"),
)

frameworks = Table(
    "frameworks", metadata,
    Column("name", Str, primary_key=True),
    Column("body", Text, nullable=False),
)

# -- added by migration 0002 --------------------------------------------------
copy_checkpoints = Table(
    "copy_checkpoints", metadata,
    Column("copy_id", Str, primary_key=True),
    Column("kind", Str, primary_key=True),
    Column("cursor", Text),
    Column("done", Boolean, nullable=False),
    Column("passes", Integer, nullable=False),
    Column("copied", BigInteger, nullable=False),
)

# -- added by migration 0003 --------------------------------------------------
cron_jobs = Table(
    "cron_jobs", metadata,
    Column("name", Str, primary_key=True),
    Column("revision", BigInteger, nullable=False),
    Column("body", Text, nullable=False),
)

# -- added by migration 0004 --------------------------------------------------
#: The newest leadership epoch of each role (jobmgr, resmgr, hostmgr): fenced writes check it.
leader_epochs = Table(
    "leader_epochs", metadata,
    Column("role", Str, primary_key=True),
    Column("epoch", BigInteger, nullable=False),
    Column("holder", Text, nullable=False),
)
