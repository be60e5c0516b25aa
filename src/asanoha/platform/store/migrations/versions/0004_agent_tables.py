"""The agent surface's tables: approval tokens and provenance of instruction fields.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A database made by create_all (adopted as the baseline) may hold these tables already.
    offline = op.get_context().as_sql  # --sql: no connection to look at, print everything
    existing = set() if offline else set(sa.inspect(op.get_bind()).get_table_names())
    if "asanoha_agent_approvals" not in existing:
        _create_approvals()
    if "asanoha_instruction_provenance" not in existing:
        _create_provenance()


def _create_approvals() -> None:
    op.create_table(
        "asanoha_agent_approvals",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("handler_qn", sa.String(length=200), nullable=False),
        sa.Column("principal", sa.String(length=64), nullable=False),
        sa.Column("payload_digest", sa.String(length=64), nullable=False),
        sa.Column("target_id", sa.String(length=64), nullable=True),
        sa.Column("target_version", sa.Integer(), nullable=True),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("approved_by", sa.String(length=64), nullable=False),
        sa.Column("channel", sa.String(length=64), nullable=False),
        sa.Column("agent_run", sa.String(length=200), nullable=True),
        sa.Column("tool_call", sa.String(length=200), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("used_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("used_by_request", sa.String(length=64), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )


def _create_provenance() -> None:
    op.create_table(
        "asanoha_instruction_provenance",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("entity", sa.String(length=200), nullable=False),
        sa.Column("row_id", sa.String(length=64), nullable=False),
        sa.Column("field", sa.String(length=200), nullable=False),
        sa.Column("writer", sa.String(length=64), nullable=False),
        sa.Column("writer_kind", sa.String(length=16), nullable=False),
        sa.Column("agent_run", sa.String(length=200), nullable=True),
        sa.Column("entry_qn", sa.String(length=200), nullable=True),
        sa.Column("entry_risk", sa.String(length=8), nullable=True),
        sa.Column("approval_id", sa.Uuid(), nullable=True),
        sa.Column("payload_digest", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        "ix_asanoha_instruction_provenance_row",
        "asanoha_instruction_provenance",
        ["tenant_id", "entity", "row_id", "field", "id"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index(
        "ix_asanoha_instruction_provenance_row", table_name="asanoha_instruction_provenance"
    )
    op.drop_table("asanoha_instruction_provenance")
    op.drop_table("asanoha_agent_approvals")
