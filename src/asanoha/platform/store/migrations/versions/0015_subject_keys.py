"""Per-subject data keys of personal values; stored event payloads can no longer be updated.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-04
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | Sequence[str] | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: The event store is append-only: forgetting destroys a key, it never rewrites an event.
_REFUSAL = "asanoha_events is append-only: the payload of a stored event is never updated"

_POSTGRES_FUNCTION = f"""
CREATE OR REPLACE FUNCTION asanoha_events_refuse_payload_update() RETURNS trigger AS $$
BEGIN
    IF NEW.payload IS DISTINCT FROM OLD.payload THEN
        RAISE EXCEPTION '{_REFUSAL}' USING ERRCODE = 'restrict_violation';
    END IF;
    RETURN NEW;
END
$$ LANGUAGE plpgsql
"""
_POSTGRES_TRIGGER = """
CREATE TRIGGER asanoha_events_payload_append_only
BEFORE UPDATE OF payload ON asanoha_events
FOR EACH ROW EXECUTE FUNCTION asanoha_events_refuse_payload_update()
"""
_SQLITE_TRIGGER = f"""
CREATE TRIGGER asanoha_events_payload_append_only
BEFORE UPDATE OF payload ON asanoha_events
FOR EACH ROW WHEN NEW.payload IS NOT OLD.payload
BEGIN
    SELECT RAISE(ABORT, '{_REFUSAL}');
END
"""


def upgrade() -> None:
    op.create_table(
        "asanoha_subject_keys",
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("subject", sa.String(length=200), nullable=False),
        sa.Column("wrapped_key", sa.Text(), nullable=True),
        sa.Column("master_key_id", sa.String(length=64), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("forgotten_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("forgotten_by", sa.String(length=64), nullable=True),
        sa.Column("forgotten_reason", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("tenant_id", "subject"),
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_POSTGRES_FUNCTION)
        op.execute(_POSTGRES_TRIGGER)
    else:
        op.execute(_SQLITE_TRIGGER)


def downgrade() -> None:
    op.execute(
        "DROP TRIGGER IF EXISTS asanoha_events_payload_append_only ON asanoha_events"
        if op.get_bind().dialect.name == "postgresql"
        else "DROP TRIGGER IF EXISTS asanoha_events_payload_append_only"
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP FUNCTION IF EXISTS asanoha_events_refuse_payload_update()")
    op.drop_table("asanoha_subject_keys")
