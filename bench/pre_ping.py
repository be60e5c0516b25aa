"""The cost of ``ASANOHA_DATABASE_PRE_PING`` (on by default for Postgres): service-layer
creates with pre-ping against the same creates without it, with 1 and 8 threads.

    .venv/bin/python bench/pre_ping.py [--seconds 3] [--rounds 2] [--json PATH]

Pre-ping tests a pooled connection before it is handed out, so a database restart fails no
call on a stale connection; it pings (one round trip) only a connection whose socket has
something to read or that sat idle for long (``store/liveness``), so a busy pool pays a
``poll()`` per checkout. The two applications write to one
database, alternating round by round; each one's best round is kept. The database is made
for the run and dropped at the end.
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

from _common import (
    ADMIN_URL,
    CREATE_QN,
    USER,
    Throughput,
    Work,
    bench_feature,
    describe_setup,
    note_payload,
    run_threads,
    scratch_database,
    warm_up_seconds,
)
from _results import Figure, at_least, safe_ratio, write_figures
from asanoha import App, Settings

THREAD_COUNTS = (1, 8)
#: With pre-ping a write should keep at least this share of its rate without it.
TARGET = 0.8


def main(argv: list[str] | None = None) -> int:
    """Measure both settings and print the rates and the ratio."""
    args = parse_args(argv)
    best: dict[tuple[bool, int], Throughput] = {}
    with scratch_database(args.database_url, "asanoha_bench_ping") as url, ExitStack() as stack:
        apps: dict[bool, App] = {}
        for pre_ping in (True, False):
            settings = Settings(
                database_url=url,
                database_pool_size=max(THREAD_COUNTS),
                database_pre_ping=pre_ping,
            )
            app = apps[pre_ping] = App(features=[bench_feature()], settings=settings)
            stack.callback(app.close)
        apps[True].create_schema()
        print(f"pre-ping, {args.seconds:g} s per measurement; {describe_setup(url)}")
        for round_ in range(1, args.rounds + 1):
            for threads in THREAD_COUNTS:
                for pre_ping, app in apps.items():
                    make_writer = functools.partial(writer, app)
                    run_threads(make_writer, threads, seconds=warm_up_seconds(args.seconds))
                    result = run_threads(make_writer, threads, seconds=args.seconds)
                    key = (pre_ping, threads)
                    if key not in best or result.rate > best[key].rate:
                        best[key] = result
                    label = "with pre-ping" if pre_ping else "without"
                    print(f"  round {round_}  {label:<14}{threads} thread(s) {result.rate:8.0f}/s")
    figures = figures_of(best)
    print()
    for figure in figures:
        print(
            f"{figure.name}: {figure.value:.0f}/s with, {figure.peer_value:.0f}/s without, "
            f"ratio {figure.ratio:.2f} (target {figure.target})"
        )
    write_figures(args.json, figures)
    return 0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="per measurement")
    parser.add_argument("--rounds", type=int, default=2, help="measurements per setting; best kept")
    parser.add_argument(
        "--database-url", default=ADMIN_URL, help="admin URL used to create and drop the database"
    )
    parser.add_argument("--json", help="write the figures to this file (for run_all.py)")
    return parser.parse_args(argv)


@contextmanager
def writer(app: App) -> Iterator[Work]:
    """One create through the service layer (a checkout of a pooled connection per write)."""
    dispatch = app.service.dispatch_write
    yield lambda n: dispatch(CREATE_QN, note_payload(n), USER)


def figures_of(best: dict[tuple[bool, int], Throughput]) -> list[Figure]:
    """Writes per second with pre-ping against without, per thread count."""
    figures = []
    for threads in THREAD_COUNTS:
        with_ping, without = best[True, threads].rate, best[False, threads].rate
        ratio = safe_ratio(with_ping, without)
        figures.append(
            Figure(
                benchmark="pre_ping",
                name=f"writes with pre-ping, {threads} thread(s)",
                value=with_ping,
                unit="writes/s",
                peer="without pre-ping",
                peer_value=without,
                ratio_label="with / without",
                ratio=ratio,
                target=f">= {TARGET}",
                target_met=at_least(ratio, TARGET),
            )
        )
    return figures


if __name__ == "__main__":
    sys.exit(main())
