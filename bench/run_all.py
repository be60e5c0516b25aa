"""Every benchmark in one go, and one table of the figures: ``bench/RESULTS.md``.

    .venv/bin/python bench/run_all.py            # full run, writes bench/RESULTS.md
    .venv/bin/python bench/run_all.py --quick    # smoke run (CI), under two minutes

Each benchmark runs as its own process, one after the other. Those that can write their
figures as JSON (``--json``) go into the table with their peer, ratio and target; the others'
printed report is kept verbatim below it. A benchmark that is not there (another version of
the repository) is left out with a note. The exit status is not 0 only when a benchmark
fails to run: a missed target is a line in the table, never an error, since the machines
these run on are shared and the figures noisy.
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psycopg
import redis

from _common import ADMIN_URL, conninfo
from _results import Figure, read_figures

BENCH_DIR = Path(__file__).resolve().parent
RESULTS = BENCH_DIR / "RESULTS.md"


@dataclass(frozen=True)
class Benchmark:
    """A benchmark script and its arguments in each mode."""

    script: str
    full: tuple[str, ...] = ()
    quick: tuple[str, ...] = ()
    #: Seconds it may take in full mode before it counts as failed.
    timeout: float = 900


# The quick arguments make each benchmark run end to end on the least work that still
# exercises every part of it: a smoke run checks that the benchmarks run, not their figures.
BENCHMARKS = (
    Benchmark("write_path.py", quick=("--writes", "40", "--rounds", "1")),
    Benchmark("http_write.py", quick=("--requests", "40", "--rounds", "1")),
    Benchmark("memory.py", quick=("--jobs", "10", "--settle", "0.2")),
    Benchmark("worker_throughput.py", quick=("--jobs", "50", "--repeat", "1")),
    Benchmark("job_throughput.py", quick=("--jobs", "50", "--rounds", "2", "--repeat", "1")),
    # A workflow's fan-out/fan-in against plain jobs and against Celery's chord.
    Benchmark("workflows.py", quick=("--items", "20", "--repeat", "1")),
    Benchmark(
        "consumer_catchup.py", quick=("--events", "5000", "--seconds", "0.3", "--rounds", "1")
    ),
    Benchmark("drain_probe.py", quick=("--foreign", "2000", "--passes", "20")),
    Benchmark("pre_ping.py", quick=("--seconds", "0.2", "--rounds", "1")),
    # asanoha --help against celery --help, and import asanoha against import celery.
    Benchmark("cli_startup.py", quick=("--runs", "1")),
    Benchmark("tracing.py", quick=("--seconds", "0.2", "--rounds", "1")),
    Benchmark("console_page.py", quick=("--rows", "2000", "--other", "500", "--renders", "2")),
    Benchmark("rebuild.py", quick=("--quick",)),
    Benchmark("aggregates.py", quick=("--quick",)),
    Benchmark("partitioned_consumer.py", quick=("--events", "500", "--rounds", "1")),
    Benchmark("consumer_wakes.py", quick=("--quick",)),
    # The live feed: commit -> receipt with 1, 100, 1,000 clients (quick: 1 and 5).
    Benchmark("stream.py", quick=("--quick",)),
    # API processes, workers and a partitioned consumer scaled 1 -> 2 -> 4 (quick: 1 -> 2,
    # on small backlogs; not --quick, which would replace them by its own).
    Benchmark(
        "fleet.py",
        quick=(
            *("--counts", "1", "2", "--rounds", "1", "--seconds", "0.5"),
            *("--jobs", "100", "--events", "100"),
        ),
    ),
    # serve --workers 2 and two workers under a few, then more clients whose writes start a
    # job and feed a consumer (quick: 2 and 4 clients).
    Benchmark("client_load.py", quick=("--quick",)),
    # Last: loading a million events leaves Postgres busy for a while afterwards (autovacuum,
    # checkpoints), which would slow the database-bound benchmarks that came after it.
    Benchmark("job_table.py", quick=("--rows", "20000", "--cycles", "20", "--rounds", "1")),
    Benchmark("scale.py", quick=("--quick", "--calls", "5", "--rounds", "1")),
)


@dataclass
class Outcome:
    """How one benchmark's run went."""

    benchmark: Benchmark
    seconds: float = 0.0
    returncode: int | None = None
    output: str = ""
    figures: tuple[Figure, ...] = ()
    skipped: str = ""


def main(argv: list[str] | None = None) -> int:
    """Run the benchmarks, write the table, and fail only if one of them could not run."""
    args = parse_args(argv)
    output = Path(args.output) if args.output else default_output(args.quick)
    started = dt.datetime.now(dt.UTC)
    load_before = os.getloadavg()
    outcomes = []
    for benchmark in BENCHMARKS:
        if args.only and benchmark.script not in args.only:
            continue
        outcome = run(benchmark, args.quick)
        outcomes.append(outcome)
        state = outcome.skipped or (
            "ok" if outcome.returncode == 0 else f"FAILED ({outcome.returncode})"
        )
        print(f"{benchmark.script:<22}{outcome.seconds:7.1f} s   {state}", flush=True)
    load_after = os.getloadavg()
    text = render(outcomes, args.quick, started, load_before, load_after, args.database_url)
    kept = hand_written(output.read_text(encoding="utf-8")) if output.exists() else []
    output.write_text(with_sections(text, kept), encoding="utf-8")
    print(f"wrote {output}")
    failed = [o for o in outcomes if not o.skipped and o.returncode != 0]
    for outcome in failed:
        print(f"\n--- {outcome.benchmark.script} failed; its output ends:\n")
        print("\n".join(outcome.output.splitlines()[-40:]))
    return 1 if failed else 0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: short and small")
    parser.add_argument(
        "--output",
        help="where to write the table (default: bench/RESULTS.md; --quick: a temp file)",
    )
    parser.add_argument("--only", nargs="+", help="run only these scripts (for example scale.py)")
    parser.add_argument(
        "--database-url", default=ADMIN_URL, help="admin URL of the Postgres server"
    )
    return parser.parse_args(argv)


def default_output(quick: bool) -> Path:
    # A smoke run must not replace the committed table of a full run.
    if quick:
        return Path(tempfile.gettempdir()) / "asanoha-bench-RESULTS-quick.md"
    return RESULTS


def run(benchmark: Benchmark, quick: bool) -> Outcome:
    """Run one benchmark in its own process, with ``--json`` when it takes it."""
    outcome = Outcome(benchmark)
    script = BENCH_DIR / benchmark.script
    if not script.exists():
        outcome.skipped = "not in this version: skipped"
        return outcome
    wanted = list(benchmark.quick if quick else benchmark.full)
    with tempfile.TemporaryDirectory() as folder:
        figures_file = Path(folder) / "figures.json"
        json_option = ["--json", str(figures_file)]
        started = time.perf_counter()
        done = attempt(script, [*wanted, *json_option], benchmark, quick)
        if done.returncode == 2 and "unrecognized arguments" in done.output:
            # Another version of the script, which takes fewer options: ask it which (its
            # --help costs a start of the interpreter, so only when it refused one).
            accepted = options_of(script)
            arguments = keep_accepted(wanted, accepted)
            if "--json" in accepted:
                arguments += json_option
            done = attempt(script, arguments, benchmark, quick)
        outcome.returncode, outcome.output = done.returncode, done.output
        outcome.seconds = time.perf_counter() - started
        if outcome.returncode == 0 and figures_file.exists():
            outcome.figures = tuple(read_figures(figures_file))
    return outcome


@dataclass(frozen=True)
class Attempt:
    """One run of a benchmark script: its exit status and what it printed."""

    returncode: int
    output: str


def attempt(script: Path, arguments: list[str], benchmark: Benchmark, quick: bool) -> Attempt:
    """Run ``script`` with ``arguments`` in its own process, within the benchmark's time."""
    try:
        done = subprocess.run(
            [sys.executable, str(script), *arguments],
            cwd=BENCH_DIR.parent,
            capture_output=True,
            text=True,
            timeout=benchmark.timeout / (3 if quick else 1),
        )
    except subprocess.TimeoutExpired as expired:
        return Attempt(-1, f"timed out after {expired.timeout:.0f} s\n{expired.stdout or ''}")
    return Attempt(done.returncode, done.stdout + (done.stderr if done.returncode else ""))


def options_of(script: Path) -> set[str]:
    """The long options ``script --help`` lists (another version may take fewer)."""
    done = subprocess.run(
        [sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=60
    )
    return {word.strip("[],") for word in done.stdout.split() if word.startswith(("--", "[--"))}


def keep_accepted(arguments: list[str], accepted: set[str]) -> list[str]:
    """``arguments`` without the options (and their values) the script does not take."""
    kept: list[str] = []
    skipping = False
    for argument in arguments:
        if argument.startswith("--"):
            skipping = argument not in accepted
        if not skipping:
            kept.append(argument)
    return kept


# -- the table ------------------------------------------------------------------------------


def render(
    outcomes: list[Outcome],
    quick: bool,
    started: dt.datetime,
    load_before: tuple[float, float, float],
    load_after: tuple[float, float, float],
    database_url: str,
) -> str:
    """``RESULTS.md``: the machine, the figures against their targets, the other reports."""
    mode = "quick (smoke)" if quick else "full"
    lines = [
        "# Benchmark results",
        "",
        f"`bench/run_all.py`, {mode} run, started {started:%Y-%m-%d %H:%M} UTC.",
        "Each figure is compared with its peer measured in the same run; the ratio is what the",
        "target is about. Regenerate with `.venv/bin/python bench/run_all.py`; see",
        "[bench/README.md](README.md) for what each benchmark does.",
        "",
        "## Machine",
        "",
        *machine_lines(database_url),
        f"- load average (1/5/15 min): {fmt_load(load_before)} before, "
        f"{fmt_load(load_after)} after",
        "",
        "## Figures",
        "",
        "| benchmark | figure | value | peer | peer value | ratio | target | met |",
        "|---|---|---:|---|---:|---:|---|---|",
    ]
    for outcome in outcomes:
        for f in outcome.figures:
            lines.append(
                f"| {f.benchmark} | {f.name} | {fmt(f.value)} {f.unit} | {f.peer} | "
                f"{fmt(f.peer_value)} | {fmt_ratio(f)} | {f.target} | {fmt_met(f.target_met)} |"
            )
    notes = [(o, f) for o in outcomes for f in o.figures if f.note]
    if notes:
        lines += ["", "Notes on the figures:", ""]
        lines += [f"- {f.benchmark}, {f.name}: {f.note}" for _, f in notes]
    lines += ["", "## Runs", "", "| benchmark | seconds | result |", "|---|---:|---|"]
    for outcome in outcomes:
        result = outcome.skipped or (
            "ok" if outcome.returncode == 0 else f"failed ({outcome.returncode})"
        )
        lines.append(f"| {outcome.benchmark.script} | {outcome.seconds:.0f} | {result} |")
    verbatim = [o for o in outcomes if not o.skipped and (not o.figures or o.returncode != 0)]
    for outcome in verbatim:
        lines += ["", f"## {outcome.benchmark.script} (its report)", "", "```"]
        lines += report_tail(outcome.output)
        lines += ["```"]
    return "\n".join(lines) + "\n"


#: The sections ``render`` writes; every other ``## `` section of the file is written by hand
#: (a run of one benchmark on its own, what a figure means) and is kept by the next run.
GENERATED_SECTIONS = ("Machine", "Figures", "Runs")


def hand_written(text: str) -> list[str]:
    """The sections of a results file that ``render`` did not write, in their order."""
    sections: list[str] = []
    for part in text.split("\n## ")[1:]:
        heading = part.split("\n", 1)[0].strip()
        if heading in GENERATED_SECTIONS or heading.endswith("(its report)"):
            continue
        sections.append("## " + part.rstrip("\n") + "\n")
    return sections


def with_sections(text: str, sections: list[str]) -> str:
    """``text`` (a rendered results file) with ``sections`` before its ``## Runs``."""
    if not sections:
        return text
    head, runs, tail = text.partition("\n## Runs\n")
    return head + "\n" + "\n".join(sections) + runs + tail


def report_tail(output: str, limit: int = 40) -> list[str]:
    # Worker and server logs go to stderr; stdout ends with the report.
    kept = [line for line in output.splitlines() if not line.startswith("[20")]
    return kept[-limit:]


def machine_lines(database_url: str) -> list[str]:
    cpu = "?"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    memory = "?"
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            memory = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    return [
        f"- `nproc`: {os.cpu_count()}; memory {memory}; CPU {cpu}",
        f"- Python {platform.python_version()}; Postgres {postgres_version(database_url)}; "
        f"Redis {redis_version()}; {platform.system()} {platform.release()}",
    ]


def postgres_version(database_url: str) -> str:
    try:
        with psycopg.connect(conninfo(database_url), connect_timeout=5) as conn:
            found = conn.execute("SHOW server_version").fetchone()
        return str(found[0]).split()[0] if found else "?"
    except psycopg.Error as error:
        return f"? ({error})"


def redis_version() -> str:
    try:
        info = redis.Redis.from_url("redis://127.0.0.1:6379/0", socket_timeout=5).info("server")
        return str(info.get("redis_version", "?"))
    except redis.RedisError as error:
        return f"? ({error})"


def fmt(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.2f}"


def fmt_ratio(figure: Figure) -> str:
    if figure.ratio is None:
        return ""
    return (
        f"{figure.ratio:.2f} ({figure.ratio_label})"
        if figure.ratio_label
        else f"{figure.ratio:.2f}"
    )


def fmt_met(met: bool | None) -> str:
    return "" if met is None else ("yes" if met else "**no**")


def fmt_load(load: tuple[float, float, float]) -> str:
    return "/".join(f"{x:.2f}" for x in load)


if __name__ == "__main__":
    sys.exit(main())
