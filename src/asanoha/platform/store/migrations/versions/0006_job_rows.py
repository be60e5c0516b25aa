"""The job row is the job's record: state, attempt, schedule, last error and timestamps on
the outbox row; run rows are one per ended attempt (no upsert key any more).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
_NOW = sa.text("CURRENT_TIMESTAMP")


def upgrade() -> None:
    with op.batch_alter_table("asanoha_outbox") as batch:
        batch.drop_index("ix_asanoha_outbox_unpublished")
        batch.add_column(sa.Column("trigger_result", _JSON, nullable=True))
        batch.add_column(
            sa.Column("state", sa.String(length=16), nullable=False, server_default="pending")
        )
        batch.add_column(sa.Column("attempt", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(
            sa.Column("not_before", sa.DateTime(timezone=True), nullable=False, server_default=_NOW)
        )
        batch.add_column(
            sa.Column(
                "relay_after", sa.DateTime(timezone=True), nullable=False, server_default=_NOW
            )
        )
        batch.add_column(sa.Column("last_error", sa.Text(), nullable=True))
        batch.add_column(sa.Column("started_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True))
        batch.create_index("ix_asanoha_outbox_due", ["state", "relay_after"])
        batch.create_index("ix_asanoha_outbox_finished", ["finished_at"])
    # Rows published before this revision ran under the old design; their outcome is in the
    # run rows. Mark them finished so they are neither pending work nor relayed again.
    op.execute(
        "UPDATE asanoha_outbox SET state = 'succeeded', finished_at = published_at "
        "WHERE published_at IS NOT NULL"
    )
    with op.batch_alter_table("asanoha_job_runs") as batch:
        batch.drop_constraint("uq_asanoha_job_runs_task_attempt", type_="unique")
        batch.drop_index("ix_asanoha_job_runs_status")
        batch.create_index("ix_asanoha_job_runs_task", ["task_id", "attempt"])
        batch.create_index("ix_asanoha_job_runs_finished", ["finished_at"])


def downgrade() -> None:
    with op.batch_alter_table("asanoha_job_runs") as batch:
        batch.drop_index("ix_asanoha_job_runs_finished")
        batch.drop_index("ix_asanoha_job_runs_task")
        batch.create_index("ix_asanoha_job_runs_status", ["status", "finished_at"])
        batch.create_unique_constraint("uq_asanoha_job_runs_task_attempt", ["task_id", "attempt"])
    with op.batch_alter_table("asanoha_outbox") as batch:
        batch.drop_index("ix_asanoha_outbox_finished")
        batch.drop_index("ix_asanoha_outbox_due")
        for column in (
            "finished_at",
            "started_at",
            "last_error",
            "relay_after",
            "not_before",
            "attempt",
            "state",
            "trigger_result",
        ):
            batch.drop_column(column)
        batch.create_index("ix_asanoha_outbox_unpublished", ["published_at", "created_at"])
