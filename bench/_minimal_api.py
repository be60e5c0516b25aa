"""The peer server of ``bench/memory.py``: a minimal FastAPI app under uvicorn, one endpoint
that does what an asanoha create does by hand (``BENCH_DATABASE_URL``)."""

from __future__ import annotations

import os
from typing import Any

import psycopg
from fastapi import FastAPI
from pydantic import BaseModel

from _common import conninfo, write_raw

api = FastAPI()
_conninfo = conninfo(
    os.environ.get("BENCH_DATABASE_URL", "postgresql://postgres@127.0.0.1/postgres")
)


class NoteIn(BaseModel):
    title: str
    amount: int | None = None


@api.get("/health")
def health() -> dict[str, str]:
    return {"status": "ok"}


@api.post("/notes")
def create(payload: NoteIn) -> dict[str, Any]:
    with psycopg.connect(_conninfo) as conn:
        return {"data": write_raw(conn, payload.model_dump())}
