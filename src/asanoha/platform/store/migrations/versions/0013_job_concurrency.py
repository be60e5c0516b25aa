"""Job concurrency keys and pauses: a job row's concurrency and per-tenant slot keys, and
the table of paused jobs and lanes.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-04
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | Sequence[str] | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("asanoha_outbox") as batch:
        batch.add_column(sa.Column("concurrency_key", sa.String(64), nullable=True))
        batch.add_column(sa.Column("slot_key", sa.String(64), nullable=True))
        batch.create_index("ix_asanoha_outbox_concurrency_key", ["concurrency_key", "state"])
        batch.create_index("ix_asanoha_outbox_slot_key", ["slot_key", "state"])
    op.create_table(
        "asanoha_job_pauses",
        sa.Column("target", sa.String(220), primary_key=True),
        sa.Column("paused_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("paused_by", sa.String(200), nullable=True),
    )


def downgrade() -> None:
    op.drop_table("asanoha_job_pauses")
    with op.batch_alter_table("asanoha_outbox") as batch:
        batch.drop_index("ix_asanoha_outbox_slot_key")
        batch.drop_index("ix_asanoha_outbox_concurrency_key")
        batch.drop_column("slot_key")
        batch.drop_column("concurrency_key")
