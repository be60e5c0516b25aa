"""Workflow runs, their steps and step items.

Revision ID: 0027
Revises: 0026
Create Date: 2026-12-06
"""

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0027"
down_revision: str | Sequence[str] | None = "0026"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _json() -> sa.types.TypeEngine[Any]:
    return sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "asanoha_workflow_runs",
        sa.Column("id", sa.Uuid(), primary_key=True),
        sa.Column("workflow_qn", sa.String(length=200), nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("payload", _json(), nullable=False),
        sa.Column("headers", _json(), nullable=False),
        sa.Column("steps_left", sa.Integer(), nullable=False),
        sa.Column("result", _json(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("failed_step", sa.String(length=100), nullable=True),
        sa.Column("failed_item", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index(
        "ix_asanoha_workflow_runs_state", "asanoha_workflow_runs", ["state", "created_at"]
    )
    op.create_table(
        "asanoha_workflow_steps",
        sa.Column("run_id", sa.Uuid(), primary_key=True),
        sa.Column("step", sa.String(length=100), primary_key=True),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("remaining", sa.Integer(), nullable=False),
        sa.Column("items_left", sa.Integer(), nullable=True),
    )
    op.create_table(
        "asanoha_workflow_items",
        sa.Column("run_id", sa.Uuid(), primary_key=True),
        sa.Column("step", sa.String(length=100), primary_key=True),
        sa.Column("item", sa.Integer(), primary_key=True),
        sa.Column("job_id", sa.Uuid(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("result", _json(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
    )
    op.create_index(
        "uq_asanoha_workflow_items_job", "asanoha_workflow_items", ["job_id"], unique=True
    )


def downgrade() -> None:
    op.drop_table("asanoha_workflow_items")
    op.drop_table("asanoha_workflow_steps")
    op.drop_index("ix_asanoha_workflow_runs_state", table_name="asanoha_workflow_runs")
    op.drop_table("asanoha_workflow_runs")
