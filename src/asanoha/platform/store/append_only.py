"""The event store is append-only: a trigger refuses any ``UPDATE`` of a stored event's
payload (forgetting destroys a key, it never rewrites an event).

Declared on the events table, so that a database made from ``build_tables`` has it; the
platform migration ``0015`` adds it to an existing one.
"""

from __future__ import annotations

from sqlalchemy import DDL, Table, event

REFUSAL = "asanoha_events is append-only: the payload of a stored event is never updated"

POSTGRES_FUNCTION = f"""
CREATE OR REPLACE FUNCTION asanoha_events_refuse_payload_update() RETURNS trigger AS $$
BEGIN
    IF NEW.payload IS DISTINCT FROM OLD.payload THEN
        RAISE EXCEPTION '{REFUSAL}' USING ERRCODE = 'restrict_violation';
    END IF;
    RETURN NEW;
END
$$ LANGUAGE plpgsql
"""
POSTGRES_TRIGGER = """
CREATE TRIGGER asanoha_events_payload_append_only
BEFORE UPDATE OF payload ON asanoha_events
FOR EACH ROW EXECUTE FUNCTION asanoha_events_refuse_payload_update()
"""
SQLITE_TRIGGER = f"""
CREATE TRIGGER asanoha_events_payload_append_only
BEFORE UPDATE OF payload ON asanoha_events
FOR EACH ROW WHEN NEW.payload IS NOT OLD.payload
BEGIN
    SELECT RAISE(ABORT, '{REFUSAL}');
END
"""


def refuse_payload_updates(events: Table) -> None:
    """Create the trigger whenever ``events`` is created."""
    for statement, dialect in (
        (POSTGRES_FUNCTION, "postgresql"),
        (POSTGRES_TRIGGER, "postgresql"),
        (SQLITE_TRIGGER, "sqlite"),
    ):
        ddl = DDL(statement).execute_if(dialect=dialect)  # type: ignore[no-untyped-call]
        event.listen(events, "after_create", ddl)
