"""Fixture features for lists: notes with searchable, sortable and nullable fields, and
tags, which declare no searchable field."""

from __future__ import annotations

from asanoha import Access, Entity, Feature, fields

ADMIN = Access(roles=["Admin"])

notes = Feature("notes")
notes.crud(
    "note",
    Entity(
        table="list_notes",
        fields={
            "title": fields.text(personal=False, reason="fixture", searchable=True, sortable=True),
            "body": fields.long_text(personal=False, reason="fixture", searchable=True),
            "rank": fields.integer(sortable=True, filterable=True),
            "price": fields.decimal(sortable=True),
        },
        soft_delete=True,
    ),
    write=ADMIN,
    read=ADMIN,
)
notes.crud(
    "tag",
    Entity(table="list_tags", fields={"label": fields.text(personal=False, reason="fixture")}),
    write=ADMIN,
    read=ADMIN,
)
