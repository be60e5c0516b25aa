"""Start-up time of the ``asanoha`` command against Celery's: ``asanoha --help`` against
``celery --help`` and ``python -c "import celery"``, each the best of several runs.

    .venv/bin/python bench/cli_startup.py [--runs 5] [--json PATH]

Every command a user types pays its start-up first; the commands are run alternately, so a
change of the machine's load touches each alike, and the fastest run of each is kept (the
one least disturbed by other work). Target: ``asanoha --help`` within 1.3 x ``celery --help``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

from _results import Figure, at_most, safe_ratio, write_figures

#: ``asanoha --help`` may take at most this many times ``celery --help``.
TARGET = 1.3
BIN = Path(sys.executable).parent


def commands() -> dict[str, list[str]]:
    return {
        "asanoha --help": [str(BIN / "asanoha"), "--help"],
        "celery --help": [str(BIN / "celery"), "--help"],
        "import celery": [sys.executable, "-c", "import celery"],
        "import asanoha": [sys.executable, "-c", "import asanoha"],
    }


def seconds_of(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, timeout=120)
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    best: dict[str, float] = {}
    for _ in range(args.runs):
        for name, command in commands().items():
            took = seconds_of(command)
            best[name] = min(best.get(name, took), took)
    for name, took in best.items():
        print(f"{name:<16} {took * 1000:7.0f} ms (best of {args.runs})")
    ratio = safe_ratio(best["asanoha --help"], best["celery --help"])
    print(f"asanoha --help / celery --help: {ratio:.2f} (target at most {TARGET})")
    import_ratio = safe_ratio(best["import asanoha"], best["import celery"])
    print(f"import asanoha / import celery: {import_ratio:.2f}")
    figures = [
        Figure(
            benchmark="cli_startup",
            name="asanoha --help",
            value=best["asanoha --help"] * 1000,
            unit="ms",
            peer="celery --help",
            peer_value=best["celery --help"] * 1000,
            ratio_label="asanoha / celery",
            ratio=ratio,
            target=f"<= {TARGET}",
            target_met=at_most(ratio, TARGET),
        ),
        Figure(
            benchmark="cli_startup",
            name="import asanoha",
            value=best["import asanoha"] * 1000,
            unit="ms",
            peer="import celery",
            peer_value=best["import celery"] * 1000,
            ratio_label="asanoha / celery",
            ratio=import_ratio,
        ),
    ]
    write_figures(args.json, figures)
    return 0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs of each command; best kept")
    parser.add_argument("--json", help="write the figures to this file (for run_all.py)")
    return parser.parse_args(argv)


if __name__ == "__main__":
    sys.exit(main())
