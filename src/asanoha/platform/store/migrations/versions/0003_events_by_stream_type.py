"""Events indexed by stream type: a projection rebuild reads one entity's events in order.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(
        "ix_asanoha_events_stream_type_id", "asanoha_events", ["stream_type", "id"], unique=False
    )


def downgrade() -> None:
    op.drop_index("ix_asanoha_events_stream_type_id", table_name="asanoha_events")
