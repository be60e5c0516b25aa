"""The cost of tracing on the write path: service-layer creates with tracing into an
in-memory exporter against the same creates with tracing off (``asanoha[otel]`` installed,
no ``OTEL_*`` variable), with 1 and 8 threads; and what the calls a write makes into
``platform/telemetry.py`` and ``log_context`` cost while tracing is off, against the CPU of
a whole write.

    .venv/bin/python bench/tracing.py [--seconds 3] [--rounds 2] [--json PATH]

The two settings write to one database, alternating round by round; each one's best round
is kept. The database is made for the run and dropped at the end.
"""

from __future__ import annotations

import argparse
import functools
import sys
import timeit
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

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
from _results import Figure, at_least, at_most, safe_ratio, write_figures
from asanoha import App, Settings
from asanoha.platform import telemetry
from asanoha.platform.log_context import bound_log_fields

THREAD_COUNTS = (1, 8)
#: With an in-memory exporter a write keeps at least this share of its rate untraced.
TRACED_TARGET = 0.85
#: Tracing off, the calls a write makes into telemetry cost at most this share of its CPU.
OFF_TARGET = 0.03
SETTINGS = ("off", "in-memory exporter")


def main(argv: list[str] | None = None) -> int:
    """Measure both settings and the calls of an untraced write; print the ratios."""
    args = parse_args(argv)
    best: dict[tuple[str, int], Throughput] = {}
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    with scratch_database(args.database_url, "asanoha_bench_trace") as url, ExitStack() as stack:
        app = App(
            features=[bench_feature()],
            settings=Settings(database_url=url, database_pool_size=max(THREAD_COUNTS)),
        )
        stack.callback(app.close)
        stack.callback(telemetry.disable)
        app.create_schema()
        print(f"tracing, {args.seconds:g} s per measurement; {describe_setup(url)}")
        for round_ in range(1, args.rounds + 1):
            for threads in THREAD_COUNTS:
                for setting in SETTINGS:
                    if setting == "off":
                        telemetry.disable()
                    else:
                        telemetry.use_tracer_provider(provider)
                    make_writer = functools.partial(writer, app)
                    run_threads(make_writer, threads, seconds=warm_up_seconds(args.seconds))
                    result = run_threads(make_writer, threads, seconds=args.seconds)
                    provider.force_flush()
                    exporter.clear()
                    key = (setting, threads)
                    if key not in best or result.rate > best[key].rate:
                        best[key] = result
                    print(f"  round {round_}  {setting:<20}{threads} thread(s) "
                          f"{result.rate:8.0f}/s  {result.cpu_ms_per_call:.3f} ms CPU/write")  # fmt: skip
        telemetry.disable()
    added_us = untraced_calls_us()
    figures = figures_of(best, added_us)
    print()
    for figure in figures:
        print(f"{figure.name}: {figure.value:.3g} against {figure.peer_value:.3g}, ratio "
              f"{figure.ratio:.3f} (target {figure.target})")  # fmt: skip
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
    """One create through the service layer: a write span and an event span when traced."""
    dispatch = app.service.dispatch_write
    yield lambda n: dispatch(CREATE_QN, note_payload(n), USER)


def untraced_calls_us(calls: int = 200_000) -> float:
    """Microseconds of the calls one create makes into telemetry and the log fields while
    tracing is off: the write's span and fields, the event's span, the event's trace header."""

    def one_write() -> None:
        with (
            telemetry.dispatch_span("write", CREATE_QN, "t") as span,
            bound_log_fields(request_id=None, correlation_id=None, tenant="t", handler="q"),
        ):
            span.set("entry.handler", CREATE_QN)
            span.set("entry.risk", "low")
            with telemetry.event_span("notes:event:note.created", "s") as event:
                event.set("event.position", 1)
            {**telemetry.trace_headers()}

    telemetry.disable()
    return min(timeit.repeat(one_write, number=calls, repeat=3)) / calls * 1e6


def figures_of(best: dict[tuple[str, int], Throughput], added_us: float) -> list[Figure]:
    """Traced against untraced writes per thread count, and the untraced calls' share."""
    figures = []
    for threads in THREAD_COUNTS:
        traced, off = best["in-memory exporter", threads], best["off", threads]
        ratio = safe_ratio(traced.rate, off.rate)
        figures.append(
            Figure(
                benchmark="tracing",
                name=f"writes traced into an in-memory exporter, {threads} thread(s)",
                value=traced.rate,
                unit="writes/s",
                peer="tracing off",
                peer_value=off.rate,
                ratio_label="traced / off",
                ratio=ratio,
                target=f">= {TRACED_TARGET}",
                target_met=at_least(ratio, TRACED_TARGET),
                note=f"CPU {traced.cpu_ms_per_call:.3f} vs {off.cpu_ms_per_call:.3f} ms per write",
            )
        )
    write_cpu_us = best["off", 1].cpu_ms_per_call * 1000
    share = safe_ratio(added_us, write_cpu_us)
    figures.append(
        Figure(
            benchmark="tracing",
            name="tracing off: the telemetry calls of one write",
            value=added_us,
            unit="us",
            peer="CPU of the whole write, 1 thread",
            peer_value=write_cpu_us,
            ratio_label="calls / write",
            ratio=share,
            target=f"<= {OFF_TARGET}",
            target_met=at_most(share, OFF_TARGET),
        )
    )
    return figures


if __name__ == "__main__":
    sys.exit(main())
