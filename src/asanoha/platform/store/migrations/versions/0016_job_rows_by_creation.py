"""Job rows by creation time: the newest rows of a tenant without sorting the table.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-04
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0016"
down_revision: str | Sequence[str] | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_asanoha_outbox_created", "asanoha_outbox", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_asanoha_outbox_created", table_name="asanoha_outbox")
