"""Consumer cursors: the time of the next attempt at a failing event (backoff), and the
status a disabled consumer resumes with.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("asanoha_consumers") as batch:
        batch.add_column(sa.Column("retry_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("resume_status", sa.String(length=16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("asanoha_consumers") as batch:
        batch.drop_column("resume_status")
        batch.drop_column("retry_at")
