"""Revoked bearer tokens by ``jti`` and personal access tokens (digests only).

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-06
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0020"
down_revision: str | Sequence[str] | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "asanoha_token_revocations",
        sa.Column("tenant_id", sa.String(length=64), primary_key=True),
        sa.Column("jti", sa.String(length=200), primary_key=True),
        sa.Column("revoked_by", sa.String(length=64), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index(
        "ix_asanoha_token_revocations_expires", "asanoha_token_revocations", ["expires_at"]
    )
    json = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
    op.create_table(
        "asanoha_access_tokens",
        sa.Column("id", sa.String(length=64), primary_key=True),
        sa.Column("token_hash", sa.String(length=64), nullable=False, unique=True),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("user_id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("roles", json, nullable=False),
        sa.Column("scopes", json, nullable=False),
        sa.Column("agent", sa.String(length=200), nullable=True),
        sa.Column("created_by", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index(
        "ix_asanoha_access_tokens_owner", "asanoha_access_tokens", ["tenant_id", "user_id"]
    )


def downgrade() -> None:
    op.drop_table("asanoha_access_tokens")
    op.drop_table("asanoha_token_revocations")
