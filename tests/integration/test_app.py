"""``App`` wires the outbox to the broker without anyone touching ``app.celery`` first."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import select

from asanoha import Access, App, Entity, Feature, SessionUser, Settings, fields
from asanoha.app import DeferredCeleryPublisher


def build_app(tmp_path: Path) -> App:
    feature = Feature("inbox")
    feature.crud(
        "message",
        Entity(table="messages", fields={"subject": fields.text(personal=False, reason="subject")}),
        write=Access(roles=["Admin"]),
        read=Access(roles=["Admin"]),
    )

    @feature.job("route", on="inbox:write:message:create")
    def route(payload: dict[str, Any], ctx: Any) -> None: ...

    settings = Settings(
        database_url=f"sqlite+pysqlite:///{tmp_path / 'app.sqlite3'}",
        broker_url="memory://",
        queue_prefix=f"app-{tmp_path.name}",
    )
    app = App([feature], settings)
    app.create_schema()
    return app


def test_a_write_in_a_process_that_never_built_celery_publishes_its_job(tmp_path: Path) -> None:
    app = build_app(tmp_path)
    assert isinstance(app.service.publisher, DeferredCeleryPublisher)
    assert "celery_jobs" not in app.__dict__
    app.service.dispatch_write(
        "inbox:write:message:create", {"subject": "hi"}, SessionUser.of("u", "t", ["Admin"])
    )
    assert "celery_jobs" in app.__dict__
    with app.database.connect() as conn:
        published = conn.execute(select(app.service.tables.outbox.c.published_at)).scalar_one()
    assert published is not None
    app.close()


def test_an_app_without_jobs_has_no_publisher(tmp_path: Path) -> None:
    feature = Feature("plain")
    app = App([feature], Settings(database_url=f"sqlite+pysqlite:///{tmp_path / 'p.sqlite3'}"))
    assert app.service.publisher is None
    app.close()
