"""Partitioned consumers: every event keeps a partition key (a stable hash of its tenant and
stream), and a consumer has one cursor row per partition.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-04
"""

import zlib
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | Sequence[str] | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: Rows whose partition key one statement sets while filling in existing events.
_BATCH = 5000


def _partition_key(tenant_id: str, stream_id: str) -> int:
    # The same function as asanoha.platform.store.events.partition_key, kept here as it is.
    return zlib.crc32(f"{tenant_id}\x1f{stream_id}".encode()) & 0x7FFFFFFF


def upgrade() -> None:
    with op.batch_alter_table("asanoha_events") as batch:
        batch.add_column(
            sa.Column("partition_key", sa.Integer(), nullable=False, server_default="0")
        )
    _fill_partition_keys()
    if op.get_context().dialect.name == "postgresql":
        op.add_column(
            "asanoha_consumers",
            sa.Column("partition", sa.Integer(), nullable=False, server_default="0"),
        )
        op.add_column(
            "asanoha_consumers",
            sa.Column("partitions", sa.Integer(), nullable=False, server_default="1"),
        )
        op.drop_constraint("asanoha_consumers_pkey", "asanoha_consumers", type_="primary")
        op.create_primary_key("asanoha_consumers_pkey", "asanoha_consumers", ["name", "partition"])
        return
    # SQLite changes a primary key by copying the table: from the table as it is declared at
    # 0016, so that the old key is not carried over.
    with op.batch_alter_table(
        "asanoha_consumers", copy_from=_sqlite_consumers(partitioned=False), recreate="always"
    ) as batch:
        batch.add_column(sa.Column("partition", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("partitions", sa.Integer(), nullable=False, server_default="1"))
        batch.create_primary_key("pk_asanoha_consumers", ["name", "partition"])


def _sqlite_consumers(*, partitioned: bool) -> sa.Table:
    """``asanoha_consumers`` on SQLite at 0016 (``partitioned``: at 0017), without a key."""
    position = sa.Integer()
    columns: list[sa.Column[Any]] = [
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("position", position, nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("gaps", sa.JSON(), nullable=False, server_default="[]"),
        sa.Column("event_id", position, nullable=True),
        sa.Column("skipped", sa.JSON(), nullable=False, server_default="[]"),
        sa.Column("types", sa.JSON(), nullable=False, server_default="[]"),
        sa.Column("retry_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("resume_status", sa.String(length=16), nullable=True),
    ]
    if partitioned:
        columns += [
            sa.Column("partition", sa.Integer(), nullable=False, server_default="0"),
            sa.Column("partitions", sa.Integer(), nullable=False, server_default="1"),
        ]
    return sa.Table("asanoha_consumers", sa.MetaData(), *columns)


def _fill_partition_keys() -> None:
    """Give the events already stored their key (offline, ``--sql``: nothing to read)."""
    if op.get_context().as_sql:
        return
    conn = op.get_bind()
    events = sa.table(
        "asanoha_events",
        sa.column("id", sa.BigInteger()),
        sa.column("tenant_id", sa.String()),
        sa.column("stream_id", sa.String()),
        sa.column("partition_key", sa.Integer()),
    )
    after = 0
    while True:
        rows = conn.execute(
            sa.select(events.c.id, events.c.tenant_id, events.c.stream_id)
            .where(events.c.id > after)
            .order_by(events.c.id)
            .limit(_BATCH)
        ).all()
        if not rows:
            return
        conn.execute(
            events.update()
            .where(events.c.id == sa.bindparam("event_id"))
            .values(partition_key=sa.bindparam("key")),
            [
                {"event_id": row.id, "key": _partition_key(row.tenant_id, row.stream_id)}
                for row in rows
            ],
        )
        after = rows[-1].id


def downgrade() -> None:
    op.execute("DELETE FROM asanoha_consumers WHERE partition <> 0")
    if op.get_context().dialect.name == "postgresql":
        op.drop_constraint("asanoha_consumers_pkey", "asanoha_consumers", type_="primary")
        op.create_primary_key("asanoha_consumers_pkey", "asanoha_consumers", ["name"])
        op.drop_column("asanoha_consumers", "partitions")
        op.drop_column("asanoha_consumers", "partition")
    else:
        with op.batch_alter_table(
            "asanoha_consumers", copy_from=_sqlite_consumers(partitioned=True), recreate="always"
        ) as batch:
            batch.drop_column("partitions")
            batch.drop_column("partition")
            batch.create_primary_key("pk_asanoha_consumers", ["name"])
    with op.batch_alter_table("asanoha_events") as batch:
        batch.drop_column("partition_key")
