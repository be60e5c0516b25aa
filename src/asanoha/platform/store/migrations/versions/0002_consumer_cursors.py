"""Consumer cursors: gaps, the stopped-at event, skipped events; outbox idempotency keys;
on Postgres, writers own their transaction id before they draw an event id.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
_POSITION = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

#: The sequence of the serial ``asanoha_events.id`` (named by Postgres after table and column;
#: fixed here so that ``asanoha migrate --sql`` can print it without a database).
_SEQUENCE = "asanoha_events_id_seq"
_NEXT_EVENT_ID = """
CREATE OR REPLACE FUNCTION asanoha_next_event_id() RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM pg_current_xact_id();
    RETURN nextval('{sequence}'::regclass);
END
$$
"""


def upgrade() -> None:
    with op.batch_alter_table("asanoha_consumers") as batch:
        batch.drop_column("pending")
        batch.add_column(sa.Column("gaps", _JSON, nullable=False, server_default="[]"))
        batch.add_column(sa.Column("event_id", _POSITION, nullable=True))
        batch.add_column(sa.Column("skipped", _JSON, nullable=False, server_default="[]"))
    with op.batch_alter_table("asanoha_outbox") as batch:
        batch.add_column(sa.Column("idempotency_key", sa.String(length=300), nullable=True))
        batch.create_index("uq_asanoha_outbox_idempotency_key", ["idempotency_key"], unique=True)
    if op.get_context().dialect.name == "postgresql":
        # Defaults are evaluated in column order: without this a transaction's first event
        # id would be drawn before tx_id assigns its transaction id (see backends.py).
        op.execute(_NEXT_EVENT_ID.format(sequence=_SEQUENCE))
        op.execute("ALTER TABLE asanoha_events ALTER COLUMN id SET DEFAULT asanoha_next_event_id()")


def downgrade() -> None:
    if op.get_context().dialect.name == "postgresql":
        op.execute(
            "ALTER TABLE asanoha_events ALTER COLUMN id "
            f"SET DEFAULT nextval('{_SEQUENCE}'::regclass)"
        )
        op.execute("DROP FUNCTION asanoha_next_event_id()")
    with op.batch_alter_table("asanoha_outbox") as batch:
        batch.drop_index("uq_asanoha_outbox_idempotency_key")
        batch.drop_column("idempotency_key")
    with op.batch_alter_table("asanoha_consumers") as batch:
        batch.drop_column("skipped")
        batch.drop_column("event_id")
        batch.drop_column("gaps")
        batch.add_column(sa.Column("pending", _JSON, nullable=True))
