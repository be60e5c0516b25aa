"""The operator console's pages with 100,000 job rows: how long ``/console/jobs`` (counts by
job, lane and state, throughput of the last hour, the newest rows), the same page filtered by
state and job, and one job's page take to render, signed in as a tenant's SystemAdmin.

    .venv/bin/python bench/console_page.py [--rows 100000] [--other 20000] [--renders 20]
                                           [--json PATH]

The tenant holds ``--rows`` job rows over five jobs and every state, another tenant
``--other``; the run table holds one row per job row, a fifth of them ended in the last hour.
Each page is rendered in-process (Starlette's test client: no socket), after one warm-up
render; the median and the slowest render are reported against the target of 200 ms.
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
import secrets
import statistics
import time
import uuid
from typing import Any

from sqlalchemy import insert
from starlette.testclient import TestClient

from _common import ADMIN_URL, scratch_database
from _results import Figure, at_most, safe_ratio, write_figures
from asanoha import App, Feature, SessionUser, Settings
from asanoha.console import build_console_app
from asanoha.handlers import consumer_admin, job_admin
from asanoha.platform.http import issue_token

TARGET_MS = 200.0
TENANT = "bench-tenant"
ADMIN = SessionUser.of("bench-ops", TENANT, ["SystemAdmin"])
JOBS = [f"bench:job:step-{n}" for n in range(5)]
STATES = ("succeeded", "succeeded", "succeeded", "failed", "pending", "cancelled")
CHUNK = 5_000


def bench_app(url: str) -> App:
    """Five manual jobs and the bundled admin features."""
    feature = Feature("bench")
    for qn in JOBS:
        feature.job(qn.rsplit(":", 1)[-1], manual=True)(lambda payload, ctx: None)
    return App(
        [feature, job_admin.feature, consumer_admin.feature],
        Settings(database_url=url, jwt_secret=secrets.token_urlsafe(32)),
    )


def fill(app: App, tenant: str, rows: int) -> uuid.UUID:
    """``rows`` job rows of ``tenant`` and a run row each; the id of a failed one."""
    tables = app.service.tables
    now = dt.datetime.now(dt.UTC)
    failed: uuid.UUID | None = None
    with app.database.begin() as conn:
        for start in range(0, rows, CHUNK):
            jobs: list[dict[str, Any]] = []
            runs: list[dict[str, Any]] = []
            for n in range(start, min(start + CHUNK, rows)):
                row_id = uuid.uuid4()
                state = STATES[n % len(STATES)]
                job = JOBS[n % len(JOBS)]
                # A fifth ended in the last hour, the rest over the last few days.
                age = dt.timedelta(minutes=n % 60) if n % 5 == 0 else dt.timedelta(hours=1 + n % 96)
                created = now - age - dt.timedelta(seconds=1)
                finished = None if state == "pending" else now - age
                if state == "failed" and failed is None:
                    failed = row_id
                jobs.append(
                    {
                        "id": row_id, "job_qn": job, "payload": {"n": n},
                        "headers": {"tenant_id": tenant}, "state": state, "attempt": 1,
                        "not_before": created, "relay_after": created, "created_at": created,
                        "finished_at": finished,
                        "last_error": "ValueError: bench" if state == "failed" else None,
                    }
                )  # fmt: skip
                if finished is not None:
                    runs.append(
                        {
                            "job_qn": job, "task_id": str(row_id), "tenant_id": tenant,
                            "attempt": 1, "status": state if state != "cancelled" else "failed",
                            "error": None, "started_at": created, "finished_at": finished,
                            "logs": "INFO step done",
                        }
                    )  # fmt: skip
            conn.execute(insert(tables.outbox), jobs)
            if runs:
                conn.execute(insert(tables.job_runs), runs)
        conn.exec_driver_sql("ANALYZE asanoha_outbox")
        conn.exec_driver_sql("ANALYZE asanoha_job_runs")
    assert failed is not None
    return failed


def signed_in(client: TestClient, app: App) -> None:
    form = client.get("/console/login")
    nonce = re.search(r'name="nonce" value="([^"]+)"', form.text)
    assert nonce is not None
    client.post(
        "/console/login", data={"nonce": nonce.group(1), "token": issue_token(app.settings, ADMIN)}
    )


def timed(client: TestClient, path: str, renders: int) -> list[float]:
    """Milliseconds of each render of ``path`` (after one warm-up)."""
    answer = client.get(path)
    assert answer.status_code == 200, answer.text[:500]
    times = []
    for _ in range(renders):
        started = time.perf_counter()
        answer = client.get(path)
        times.append((time.perf_counter() - started) * 1000)
        assert answer.status_code == 200
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--other", type=int, default=20_000)
    parser.add_argument("--renders", type=int, default=20)
    parser.add_argument("--database-url", default=ADMIN_URL)
    parser.add_argument("--json", help="write the figures to this file (for run_all.py)")
    args = parser.parse_args(argv)
    figures: list[Figure] = []
    with scratch_database(args.database_url, "asanoha_bench_console") as url:
        app = bench_app(url)
        try:
            app.create_schema()
            failed = fill(app, TENANT, args.rows)
            fill(app, "other-tenant", args.other)
            with TestClient(build_console_app(app)) as client:
                signed_in(client, app)
                pages = {
                    "jobs page": "/console/jobs",
                    "jobs page, filtered": f"/console/jobs?state=failed&job={JOBS[1]}",
                    "a job's page": f"/console/jobs/{failed}",
                }
                print(f"{args.rows:,} job rows of the tenant, {args.other:,} of another")
                for name, path in pages.items():
                    times = timed(client, path, args.renders)
                    median = statistics.median(times)
                    ratio = safe_ratio(median, TARGET_MS)
                    print(f"{name:22} median {median:7.1f} ms   slowest {max(times):7.1f} ms")
                    figures.append(
                        Figure(
                            benchmark="console_page.py",
                            name=f"console {name}, {args.rows:,} job rows (median)",
                            value=round(median, 1),
                            unit="ms",
                            peer="target",
                            peer_value=TARGET_MS,
                            ratio_label="median / 200 ms",
                            ratio=None if ratio is None else round(ratio, 2),
                            target="<= 1",
                            target_met=at_most(ratio, 1.0),
                            note=f"slowest of {args.renders}: {max(times):.1f} ms",
                        )
                    )
        finally:
            app.close()
    write_figures(args.json, figures)
    missed = [figure.name for figure in figures if figure.target_met is False]
    print(
        f"target {TARGET_MS:g} ms: " + ("met" if not missed else "missed by " + "; ".join(missed))
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
