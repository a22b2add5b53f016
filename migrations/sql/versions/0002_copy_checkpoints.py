"""Checkpoints of `peloton migrate copy`, kept in the destination store.

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

Str = sa.String().with_variant(sa.String(collation="C"), "postgresql")


def upgrade() -> None:
    op.create_table("copy_checkpoints",
                    sa.Column("copy_id", Str, primary_key=True),
                    sa.Column("kind", Str, primary_key=True),
                    sa.Column("cursor", sa.Text),
                    sa.Column("done", sa.Boolean, nullable=False),
                    sa.Column("passes", sa.Integer, nullable=False),
                    sa.Column("copied", sa.BigInteger, nullable=False))


def downgrade() -> None:
    op.drop_table("copy_checkpoints")
