"""Run ids are never reused on SQLite (AUTOINCREMENT): after the prune emptied the table, a
plain rowid started over and drain() took new failures for runs it had already reported.

Postgres identities never go back; only SQLite's table is rebuilt.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-04
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0009"
down_revision: str | Sequence[str] | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    with op.batch_alter_table(
        "asanoha_job_runs", recreate="always", table_kwargs={"sqlite_autoincrement": True}
    ):
        pass


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    with op.batch_alter_table(
        "asanoha_job_runs", recreate="always", table_kwargs={"sqlite_autoincrement": False}
    ):
        pass
