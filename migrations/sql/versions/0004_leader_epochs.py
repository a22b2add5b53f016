"""Leadership epochs: the store refuses writes of a leader whose term is over (fencing).

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

Str = sa.String().with_variant(sa.String(collation="C"), "postgresql")


def upgrade() -> None:
    op.create_table("leader_epochs",
                    sa.Column("role", Str, primary_key=True),
                    sa.Column("epoch", sa.BigInteger, nullable=False),
                    sa.Column("holder", sa.Text, nullable=False))


def downgrade() -> None:
    op.drop_table("leader_epochs")
