"""The initial schema: every table of the storage gateway.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

# Byte-wise text (PostgreSQL's locale collation would sort differently from Python).
Str = sa.String().with_variant(sa.String(collation="C"), "postgresql")


def _key(name: str) -> sa.Column[str]:
    return sa.Column(name, Str, primary_key=True)


def upgrade() -> None:
    op.create_table("job_configs", _key("job_id"),
                    sa.Column("version", sa.BigInteger, primary_key=True),
                    sa.Column("created_at", sa.Float, nullable=False),
                    sa.Column("body", sa.Text, nullable=False))
    op.create_table("jobs", _key("job_id"),
                    sa.Column("revision", sa.BigInteger), sa.Column("state", Str),
                    sa.Column("creation_time", sa.Float), sa.Column("completion_time", sa.Float),
                    sa.Column("update_time", sa.Float), sa.Column("runtime", sa.Text),
                    sa.Column("config_version", sa.BigInteger), sa.Column("name", Str),
                    sa.Column("name_lower", Str), sa.Column("job_type", Str),
                    sa.Column("owner", Str), sa.Column("owning_team", Str),
                    sa.Column("respool_id", Str), sa.Column("instance_count", sa.Integer),
                    sa.Column("labels", sa.Text), sa.Column("sla", sa.Text),
                    sa.Column("search_text", sa.Text))
    op.create_index("ix_jobs_state", "jobs", ["state", "creation_time"])
    op.create_index("ix_jobs_owner", "jobs", ["owner", "creation_time"])
    op.create_index("ix_jobs_respool", "jobs", ["respool_id", "creation_time"])
    op.create_index("ix_jobs_name", "jobs", ["name"])
    op.create_index("ix_jobs_creation_time", "jobs", ["creation_time"])
    op.create_index("ix_jobs_completion_time", "jobs", ["completion_time"])
    op.create_table("job_labels", _key("job_id"), _key("key"), _key("value"))
    op.create_index("ix_job_labels_key_value", "job_labels", ["key", "value"])
    op.create_table("job_names", _key("name"), _key("job_id"),
                    sa.Column("update_time", sa.Float, nullable=False),
                    sa.Column("body", sa.Text, nullable=False))
    op.create_index("ix_job_names_name_time", "job_names", ["name", "update_time"])
    op.create_index("ix_job_names_job", "job_names", ["job_id"])
    op.create_table("active_jobs", _key("job_id"))
    op.create_table("task_configs", _key("job_id"),
                    sa.Column("version", sa.BigInteger, primary_key=True),
                    sa.Column("instance", sa.Integer, primary_key=True),
                    sa.Column("body", sa.Text, nullable=False))
    op.create_table("task_runtimes", _key("job_id"),
                    sa.Column("instance", sa.Integer, primary_key=True),
                    sa.Column("state", Str, nullable=False),
                    sa.Column("revision", sa.BigInteger, nullable=False),
                    sa.Column("body", sa.Text, nullable=False))
    op.create_index("ix_task_runtimes_job_state", "task_runtimes", ["job_id", "state"])
    op.create_table("pod_events", _key("job_id"),
                    sa.Column("instance", sa.Integer, primary_key=True),
                    sa.Column("run_id", sa.BigInteger, primary_key=True),
                    sa.Column("time_us", sa.BigInteger, primary_key=True), _key("state"),
                    sa.Column("expires_at", sa.Float, nullable=False),
                    sa.Column("body", sa.Text, nullable=False))
    op.create_index("ix_pod_events_expires_at", "pod_events", ["expires_at"])
    op.create_table("updates", _key("update_id"),
                    sa.Column("job_id", Str, nullable=False),
                    sa.Column("state", Str, nullable=False),
                    sa.Column("revision", sa.BigInteger, nullable=False),
                    sa.Column("creation_time", sa.Float, nullable=False),
                    sa.Column("body", sa.Text, nullable=False))
    op.create_index("ix_updates_job", "updates", ["job_id", "creation_time"])
    op.create_table("workflow_events", _key("update_id"),
                    sa.Column("instance", sa.Integer, primary_key=True),
                    sa.Column("time_us", sa.BigInteger, primary_key=True), _key("state"),
                    sa.Column("body", sa.Text, nullable=False))
    op.create_table("respools", _key("pool_id"),
                    sa.Column("parent_id", Str, nullable=False),
                    sa.Column("body", sa.Text, nullable=False))
    op.create_table("hosts", _key("hostname"), sa.Column("state", Str, nullable=False),
                    sa.Column("body", sa.Text, nullable=False))
    op.create_index("ix_hosts_state", "hosts", ["state"])
    op.create_table("secrets", _key("secret_id"), sa.Column("job_id", Str, nullable=False),
                    sa.Column("body", sa.Text, nullable=False))
    op.create_index("ix_secrets_job", "secrets", ["job_id"])
    op.create_table("volumes", _key("volume_id"), sa.Column("job_id", Str, nullable=False),
                    sa.Column("body", sa.Text, nullable=False))
    op.create_index("ix_volumes_job", "volumes", ["job_id"])
    op.create_table("frameworks", _key("name"), sa.Column("body", sa.Text, nullable=False))


def downgrade() -> None:
    for table in ("frameworks", "volumes", "secrets", "hosts", "respools", "workflow_events",
                  "updates", "pod_events", "task_runtimes", "task_configs", "active_jobs",
                  "job_names", "job_labels", "jobs", "job_configs"):
        op.drop_table(table)
