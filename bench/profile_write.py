"""Where a service-layer create spends its CPU: cProfile over many creates on one thread,
beside the raw psycopg writer doing the same inserts.

    .venv/bin/python bench/profile_write.py [--writes 5000] [--top 40] [--output FILE]

Prints the functions by own time and by cumulative time for the asanoha create, the CPU per
write of both writers without the profiler, and the share of the create's time spent in the
driver (psycopg), in SQLAlchemy and in asanoha itself.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time
from collections.abc import Callable
from contextlib import redirect_stdout
from pathlib import Path

import psycopg

from _common import (
    ADMIN_URL,
    CREATE_QN,
    USER,
    bench_feature,
    conninfo,
    create_raw_tables,
    describe_setup,
    note_payload,
    scratch_database,
    write_raw,
)
from asanoha import App, Settings


def main(argv: list[str] | None = None) -> int:
    """Profile the create and print the report (to ``--output`` as well, when given)."""
    args = parse_args(argv)
    report = io.StringIO()
    with scratch_database(args.database_url, "asanoha_bench_profile") as url:
        app = App(features=[bench_feature()], settings=Settings(database_url=url))
        try:
            app.create_schema()
            create_raw_tables(url)
            with psycopg.connect(conninfo(url)) as conn:
                asanoha = lambda n: app.service.dispatch_write(  # noqa: E731
                    CREATE_QN, note_payload(n), USER
                )
                raw = lambda n: write_raw(conn, note_payload(n))  # noqa: E731
                for work in (asanoha, raw):
                    run(work, args.writes // 5)  # warm: pools, prepared statements, caches
                cpu = {"asanoha service": cpu_per_call(asanoha, args.writes)}
                cpu["raw psycopg"] = cpu_per_call(raw, args.writes)
                # CPU time, not wall time: waiting for the server is not what is profiled.
                profile = cProfile.Profile(time.process_time)
                profile.enable()
                run(asanoha, args.writes)
                profile.disable()
            with redirect_stdout(report):
                print(f"profile of {args.writes} service-layer creates, 1 thread; ", end="")
                print(describe_setup(url))
                print()
                for name, ms in cpu.items():
                    print(f"CPU per write without the profiler, {name:<16} {ms:.3f} ms")
                print(f"ratio {cpu['asanoha service'] / cpu['raw psycopg']:.2f}")
                print()
                print_layers(profile)
                stats = pstats.Stats(profile, stream=sys.stdout)
                stats.strip_dirs()
                print("\n== by own time ==")
                stats.sort_stats("tottime").print_stats(args.top)
                print("\n== by cumulative time ==")
                stats.sort_stats("cumulative").print_stats(args.top)
        finally:
            app.close()
    text = report.getvalue()
    print(text)
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    return 0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=5000)
    parser.add_argument("--top", type=int, default=45, help="functions listed per table")
    parser.add_argument("--output", help="also write the report to this file")
    parser.add_argument("--database-url", default=ADMIN_URL, help="admin URL (creates a db)")
    return parser.parse_args(argv)


def run(work: Callable[[int], object], calls: int) -> None:
    for n in range(calls):
        work(n)


def cpu_per_call(work: Callable[[int], object], calls: int) -> float:
    """Milliseconds of this process's CPU per call."""
    started = time.process_time()
    run(work, calls)
    return 1000 * (time.process_time() - started) / calls


def print_layers(profile: cProfile.Profile) -> None:
    """Own time by the package the function lives in: where the create's CPU goes."""
    layers: dict[str, float] = {}
    stats = pstats.Stats(profile)
    total = 0.0
    for (filename, _, _), (_, _, own, _, _) in stats.stats.items():  # type: ignore[attr-defined]
        total += own
        layers[layer_of(filename)] = layers.get(layer_of(filename), 0.0) + own
    print("own time by layer (profiled):")
    for layer, seconds in sorted(layers.items(), key=lambda item: -item[1]):
        print(f"  {layer:<28}{100 * seconds / total:5.1f} %")


def layer_of(filename: str) -> str:
    for marker in ("asanoha/platform/service", "asanoha/platform/store", "asanoha/platform"):
        if marker in filename:
            return marker.replace("/", ".")
    for package in ("sqlalchemy", "psycopg", "pydantic", "asanoha"):
        if f"/{package}/" in filename:
            return package
    if filename.startswith("~") or filename.startswith("<"):
        return "builtins (C)"
    return "python stdlib / other"


if __name__ == "__main__":
    sys.exit(main())
