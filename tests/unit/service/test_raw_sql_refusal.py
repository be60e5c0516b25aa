"""What ``ctx.sql`` lets through: statements on the handler's own tables, judged by their text."""

from __future__ import annotations

import pytest

from asanoha.platform.service.raw_sql import protected_tables, refusal

PROTECTED = protected_tables(["prompts", "asanoha_events"])


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT id, note FROM notes WHERE id = :id",
        "INSERT INTO notes (id, note) VALUES (:id, :note)",
        "UPDATE notes SET note = 'a;b' WHERE id = 1",
        "DELETE FROM notes",
        "WITH old AS (DELETE FROM notes RETURNING id) SELECT count(*) FROM old",
        "CREATE TABLE IF NOT EXISTS tallies (n integer)",
        "CREATE TEMPORARY TABLE scratch (n integer)",
        "CREATE UNIQUE INDEX ix_notes_note ON notes (note)",
        "ALTER TABLE notes ADD COLUMN seen boolean",
        "DROP TABLE scratch",
        "SELECT 1;",
        "SELECT 1; -- done",
        "SELECT replace(note, 'a', 'b') FROM notes",
    ],
)
def test_statements_on_own_tables_pass(sql: str) -> None:
    assert refusal(sql, PROTECTED, read_only=False) is None


@pytest.mark.parametrize(
    ("sql", "why"),
    [
        ("UPDATE prompts SET body = 'x'", "'prompts'"),
        ('UPDATE "PROMPTS" SET body = :b', "'prompts'"),
        ("DELETE FROM public.asanoha_events", "'asanoha_events'"),
        ("SELECT * FROM asanoha_future_table", "'asanoha_future_table'"),
        ("UPDATE alembic_version SET version_num = 'x'", "'alembic_version'"),
        ("SELECT body FROM prompts", "'prompts'"),
        ("SELECT 'prompts'::regclass", "'prompts'"),
        ("INSERT INTO notes SELECT * FROM prompts", "'prompts'"),
        ("SELECT 1; UPDATE notes SET note = 'x'", "one statement per call"),
        ("SELECT E'\\''; COMMIT; --'", "one statement per call"),
        ("COMMIT", "COMMIT statements are not allowed"),
        ("ROLLBACK", "ROLLBACK statements are not allowed"),
        ("SAVEPOINT s", "SAVEPOINT statements are not allowed"),
        ("SET search_path = other", "SET statements are not allowed"),
        ("DO $$ BEGIN EXECUTE 'UPDATE ' || 'pro' || 'mpts SET body = 1'; END $$", "DO"),
        ("CREATE FUNCTION f() RETURNS int AS 'SELECT 1' LANGUAGE sql", "CREATE statements"),
        ("CREATE OR REPLACE VIEW v AS SELECT 1", "CREATE statements"),
        ("CREATE TRIGGER t AFTER INSERT ON notes EXECUTE FUNCTION f()", "CREATE statements"),
        ("PRAGMA writable_schema = 1", "PRAGMA statements"),
        ("ATTACH DATABASE 'other.db' AS other", "ATTACH statements"),
        ("SELECT query_to_xml('SELECT 1', true, true, '')", "query_to_xml()"),
        ("SELECT set_config('role', 'x', true)", "set_config()"),
        ("SELECT setval((chr(97) || 'sanoha_events_id_seq')::regclass, 1)", "setval()"),
        ("SELECT pg_advisory_xact_lock(1)", "pg_advisory_xact_lock()"),
        ("SELECT pg_terminate_backend(42)", "pg_terminate_backend()"),
        ('SELECT * FROM U&"\\0070rompts"', "U&"),
        ("", "no statement"),
    ],
)
def test_statements_that_reach_protected_tables_or_leave_the_transaction_are_refused(
    sql: str, why: str
) -> None:
    found = refusal(sql, PROTECTED, read_only=False)
    assert found is not None
    assert why in found


@pytest.mark.parametrize(
    "sql",
    [
        "INSERT INTO notes VALUES (1)",
        "WITH x AS (UPDATE notes SET note = 'a' RETURNING id) SELECT * FROM x",
        "SELECT * INTO copy FROM notes",
        "SELECT * FROM notes FOR UPDATE",
        "CREATE TABLE t (n int)",
    ],
)
def test_a_query_handler_may_only_read(sql: str) -> None:
    assert refusal(sql, PROTECTED, read_only=True) == "a query handler's SQL may only read"
    assert refusal("SELECT count(*) FROM notes", PROTECTED, read_only=True) is None
