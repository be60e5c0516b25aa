"""Uploaded files: one row per upload, with the row it belongs to once a write names it.

Revision ID: 0030
Revises: 0029
Create Date: 2026-12-07
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0030"
down_revision: str | Sequence[str] | None = "0029"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "asanoha_files",
        sa.Column("id", sa.Uuid(), primary_key=True),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("uploaded_by", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("content_type", sa.String(length=255), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("storage_key", sa.String(length=300), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("entity", sa.String(length=200), nullable=True),
        sa.Column("row_id", sa.String(length=64), nullable=True),
        sa.Column("field", sa.String(length=200), nullable=True),
        sa.Column("subject", sa.String(length=200), nullable=True),
        sa.Column("attached_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("deleted_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("purged_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index("ix_asanoha_files_row", "asanoha_files", ["tenant_id", "row_id"])
    op.create_index("ix_asanoha_files_subject", "asanoha_files", ["tenant_id", "subject"])
    op.create_index("ix_asanoha_files_purge", "asanoha_files", ["deleted_at", "purged_at"])
    op.create_index("ix_asanoha_files_unattached", "asanoha_files", ["row_id", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_asanoha_files_unattached", table_name="asanoha_files")
    op.drop_index("ix_asanoha_files_purge", table_name="asanoha_files")
    op.drop_index("ix_asanoha_files_subject", table_name="asanoha_files")
    op.drop_index("ix_asanoha_files_row", table_name="asanoha_files")
    op.drop_table("asanoha_files")
