"""Each cron tick, open until its job rows are placed: a per-tenant fan-out that failed
part-way is completed by the next tick, and ``catch_up`` reads the newest tick here (the
prune of job rows keeps it).

Revision ID: 0023
Revises: 0021
Create Date: 2026-12-06
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0023"
down_revision: str | Sequence[str] | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "asanoha_cron_ticks",
        sa.Column("job_qn", sa.String(length=200), primary_key=True),
        sa.Column("tick", sa.String(length=64), primary_key=True),
        sa.Column("tick_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("opened_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("done_at", sa.DateTime(timezone=True), nullable=True),
    )


def downgrade() -> None:
    op.drop_table("asanoha_cron_ticks")
