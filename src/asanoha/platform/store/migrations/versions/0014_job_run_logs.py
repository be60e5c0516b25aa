"""What each job attempt logged through ``ctx.log``, kept with its run row.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-04
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | Sequence[str] | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("asanoha_job_runs") as batch:
        batch.add_column(sa.Column("logs", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("asanoha_job_runs") as batch:
        batch.drop_column("logs")
