"""Cron jobs (issue 11): one row per cron job name, the CronJob as JSON, a CAS revision.

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

Str = sa.String().with_variant(sa.String(collation="C"), "postgresql")


def upgrade() -> None:
    op.create_table("cron_jobs",
                    sa.Column("name", Str, primary_key=True),
                    sa.Column("revision", sa.BigInteger, nullable=False),
                    sa.Column("body", sa.Text, nullable=False))


def downgrade() -> None:
    op.drop_table("cron_jobs")
